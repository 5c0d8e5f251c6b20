"""With tracing on, each execution is an ``execute_tool`` span in the GenAI conventions, parented
on the caller's traceparent; with it off, nothing is recorded."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import httpx
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from broker.plugins import Backend
from broker.tracing import Tracing
from tests.conftest import BILLING, credit

CALLER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


async def test_an_execution_is_an_execute_tool_span_under_the_callers_trace(
    make_broker: Callable[..., tuple[str, Mapping[str, Backend]]],
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    url, _ = make_broker(tracing=Tracing(provider.get_tracer("test")))
    async with httpx.AsyncClient(base_url=url) as client:
        response = await client.post(
            "/v1/proposals", json=credit(), headers={**BILLING, "traceparent": CALLER}
        )
    assert response.status_code == 200
    (span,) = exporter.get_finished_spans()
    assert span.name == "execute_tool issue_credit"
    assert span.attributes is not None
    assert span.attributes["gen_ai.tool.name"] == "issue_credit"
    assert span.attributes["gen_ai.tool.call.id"] == response.json()["proposal_id"]
    assert span.attributes["gen_ai.operation.name"] == "execute_tool"
    assert f"{span.context.trace_id:032x}" == "0af7651916cd43dd8448eb211c80319c"
    assert span.parent is not None and f"{span.parent.span_id:016x}" == "b7ad6b7169203331"


def test_tracing_off_is_a_no_op() -> None:
    tracing = Tracing.from_environment(enabled=False)
    assert not tracing.enabled
    with tracing.execute_tool("issue_credit", "prp_1", CALLER) as outbound:
        assert outbound == CALLER
