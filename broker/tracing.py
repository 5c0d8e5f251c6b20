"""OpenTelemetry spans in the GenAI conventions, off unless configured.

With tracing on, every proposal, whatever its decision, is one ``execute_tool {tool}`` span from
the moment the broker has it until it is answered: attributes ``gen_ai.operation.name``,
``gen_ai.tool.name`` and ``gen_ai.tool.call.id`` (the ``proposal_id``), and the broker's own
``broker.decision``, ``broker.category``, ``broker.code``, ``broker.trace_id`` and, when the
tool ran, ``broker.execution.status`` and ``broker.execution.attempts``. Its parent is the
caller's W3C ``traceparent`` when one came in, and adapters receive the span's own
``traceparent`` to send on.

Status follows the OpenTelemetry convention for servers: a refusal is the broker doing its job
(status unset; the category and code say why), while an execution that failed or timed out, and
any answer of 500 or more, is an error with ``error.type`` set to the failure code (``timeout``,
``provider_error``, ``store_unavailable``...). A replay is not an error even when it repeats a
failure: nothing ran.

With tracing off nothing is imported and nothing is allocated.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import msgspec

from broker.responses import Answer

__all__ = ["ProposalSpan", "Tracing"]

OPERATION = "execute_tool"


class _ExecutionOutline(msgspec.Struct):
    status: str
    attempts: int = 0


class _AnswerOutline(msgspec.Struct):
    """The fields of an answer a span records (every answer body has them; the rest is skipped
    unread)."""

    proposal_id: str
    trace_id: str
    decision: str
    category: str | None = None
    code: str | None = None
    replayed: bool = False
    dry_run: bool = False
    execution: _ExecutionOutline | None = None


_outline = msgspec.json.Decoder(_AnswerOutline)


class ProposalSpan:
    """The span of one proposal, as the orchestrator sees it.

    Attributes:
        traceparent: the span's own W3C ``traceparent``, for adapters to forward.
    """

    __slots__ = ("_span", "traceparent")

    def __init__(self, span: Any, traceparent: str | None) -> None:
        self._span = span
        self.traceparent = traceparent

    def answered(self, answer: Answer) -> None:
        """Record how the proposal ended (read back from the answer, so every path agrees)."""
        from opentelemetry.trace import Status, StatusCode

        span = self._span
        try:
            outline = _outline.decode(answer.body)
        except msgspec.DecodeError:  # not a decision: only the status is known
            outline = None
        if outline is not None:
            span.set_attribute("gen_ai.tool.call.id", outline.proposal_id)
            span.set_attribute("broker.trace_id", outline.trace_id)
            decision = "replayed" if outline.replayed else outline.decision
            span.set_attribute("broker.decision", decision)
            span.set_attribute("broker.dry_run", outline.dry_run)
            if outline.category is not None:
                span.set_attribute("broker.category", outline.category)
            if outline.code is not None:
                span.set_attribute("broker.code", outline.code)
            execution = outline.execution
            if execution is not None:
                span.set_attribute("broker.execution.status", execution.status)
                span.set_attribute("broker.execution.attempts", execution.attempts)
            if outline.replayed:
                return
            failed = execution is not None and execution.status == "failed"
            code = outline.code
        else:
            failed, code = False, None
        if failed or answer.status >= 500:
            error_type = code or str(answer.status)
            span.set_attribute("error.type", error_type)
            span.set_status(Status(StatusCode.ERROR, error_type))


class Tracing:
    """Spans for proposals.

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

    def proposal(
        self, tool: str | None, label: str, traceparent: str | None
    ) -> AbstractContextManager[ProposalSpan]:
        """The span around one proposal (tracing must be on); tell it ``answered`` before it
        closes.

        Args:
            tool: the tool the proposal names, as sent (``gen_ai.tool.name``).
            label: its name in the span's name: a registered name or ``_unknown``, so span
                names stay few whatever agents send.
            traceparent: the caller's, if any.
        """
        if self._tracer is None:
            raise RuntimeError("tracing is off")
        return self._span(tool, label, traceparent)

    def current_traceparent(self, fallback: str | None) -> str | None:
        """The current span's ``traceparent`` (the proposal's, inside ``proposal``), else
        ``fallback``."""
        carrier: dict[str, str] = {}
        self._propagator.inject(carrier)
        return carrier.get("traceparent", fallback)

    @contextmanager
    def _span(
        self, tool: str | None, label: str, traceparent: str | None
    ) -> Iterator[ProposalSpan]:
        from opentelemetry.trace import SpanKind

        parent = self._propagator.extract({"traceparent": traceparent} if traceparent else {})
        attributes: dict[str, str] = {"gen_ai.operation.name": OPERATION}
        name = OPERATION
        if tool:  # a malformed body names none
            attributes["gen_ai.tool.name"] = tool
            name = f"{OPERATION} {label}"
        with self._tracer.start_as_current_span(  # type: ignore[union-attr]
            name, context=parent, kind=SpanKind.INTERNAL, attributes=attributes
        ) as span:
            carrier: dict[str, str] = {}
            self._propagator.inject(carrier)
            yield ProposalSpan(span, carrier.get("traceparent", traceparent))
