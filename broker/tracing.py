"""OpenTelemetry spans in the GenAI conventions, off unless configured.

With tracing on, each executed proposal gets an ``execute_tool {tool}`` span (attributes
``gen_ai.operation.name``, ``gen_ai.tool.name``, ``gen_ai.tool.call.id``) whose parent is the
caller's W3C ``traceparent`` when one came in, and adapters receive the span's own
``traceparent`` to send on. With tracing off nothing is imported and nothing is allocated.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

__all__ = ["Tracing"]


class Tracing:
    """Spans for tool executions.

    Args:
        tracer: an ``opentelemetry.trace.Tracer``; ``None`` turns tracing off.
    """

    def __init__(self, tracer: Any | None = None) -> None:
        self._tracer = tracer
        if tracer is not None:
            from opentelemetry.trace.propagation.tracecontext import (
                TraceContextTextMapPropagator,
            )

            self._propagator = TraceContextTextMapPropagator()

    @classmethod
    def from_environment(cls, enabled: bool) -> Tracing:
        """The global tracer provider's tracer (configure exporters the OpenTelemetry way)."""
        if not enabled:
            return cls(None)
        from opentelemetry import trace

        return cls(trace.get_tracer("action-broker"))

    @property
    def enabled(self) -> bool:
        return self._tracer is not None

    def execute_tool(
        self, tool: str, call_id: str, traceparent: str | None
    ) -> AbstractContextManager[str | None]:
        """A span around one execution; yields the ``traceparent`` to forward downstream."""
        if self._tracer is None:
            return nullcontext(traceparent)
        return self._span(tool, call_id, traceparent)

    @contextmanager
    def _span(self, tool: str, call_id: str, traceparent: str | None) -> Iterator[str | None]:
        from opentelemetry.trace import SpanKind

        parent = self._propagator.extract({"traceparent": traceparent} if traceparent else {})
        with self._tracer.start_as_current_span(  # type: ignore[union-attr]
            f"execute_tool {tool}",
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool,
                "gen_ai.tool.call.id": call_id,
            },
        ) as span:
            carrier: dict[str, str] = {}
            self._propagator.inject(carrier)
            try:
                yield carrier.get("traceparent", traceparent)
            except BaseException as exc:
                span.record_exception(exc)
                raise
