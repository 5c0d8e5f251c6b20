"""With tracing on, every proposal, whatever its decision, is one ``execute_tool`` span in the
GenAI conventions, parented on the caller's traceparent; refusals say why in attributes, failed
and timed-out executions are errors with ``error.type``. With tracing off, nothing is recorded."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx
import msgspec
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from adapters.demo import DemoBackend
from adapters.python import FunctionBackend
from broker.config import BrokerConfig
from broker.plugins import AdapterContext, Backend
from broker.tracing import Tracing
from tests.conftest import BILLING, SCHEDULING, credit, ticket

CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
CALLER = f"00-{CALLER_TRACE}-b7ad6b7169203331-01"

MakeBroker = Callable[..., tuple[str, Mapping[str, Backend]]]


def traced(make_broker: MakeBroker, **kwargs: Any) -> tuple[str, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    url, _ = make_broker(tracing=Tracing(provider.get_tracer("test")), **kwargs)
    return url, exporter


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def only(spans: Sequence[ReadableSpan]) -> ReadableSpan:
    (span,) = spans
    return span


async def test_an_execution_is_an_execute_tool_span_under_the_callers_trace(
    make_broker: MakeBroker,
) -> None:
    url, exporter = traced(make_broker)
    async with httpx.AsyncClient(base_url=url) as client:
        response = await client.post(
            "/v1/proposals", json=credit(), headers={**BILLING, "traceparent": CALLER}
        )
    assert response.status_code == 200
    span = only(exporter.get_finished_spans())
    assert span.name == "execute_tool issue_credit"
    assert attributes(span) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "issue_credit",
        "gen_ai.tool.call.id": response.json()["proposal_id"],
        "broker.trace_id": CALLER_TRACE,
        "broker.decision": "approved",
        "broker.dry_run": False,
        "broker.execution.status": "succeeded",
        "broker.execution.attempts": 1,
    }
    assert span.status.status_code is StatusCode.UNSET
    assert f"{span.context.trace_id:032x}" == CALLER_TRACE
    assert span.parent is not None and f"{span.parent.span_id:016x}" == "b7ad6b7169203331"


async def test_the_adapter_is_handed_the_proposal_span_as_its_parent(
    make_broker: MakeBroker,
) -> None:
    demo = DemoBackend()
    seen: list[str | None] = []

    async def lookup_order(args: dict[str, Any], ctx: AdapterContext) -> dict[str, Any]:
        seen.append(ctx.traceparent)
        return await demo.adapters["lookup_order"].invoke(args, ctx)

    backend = FunctionBackend(
        {**demo.adapters, "lookup_order": lookup_order}, verifiers=demo.verifiers
    )
    url, exporter = traced(make_broker, backends={"demo": backend})
    async with httpx.AsyncClient(base_url=url) as client:
        response = await client.post(
            "/v1/proposals",
            json={"tool": "lookup_order", "args": {"order_id": "O-55291"}},
            headers={**BILLING, "traceparent": CALLER},
        )
    assert response.status_code == 200
    span = only(exporter.get_finished_spans())
    assert seen == [f"00-{CALLER_TRACE}-{span.context.span_id:016x}-01"]


@pytest.mark.parametrize(
    ("body", "headers", "status", "category", "code", "tool"),
    [
        ({"tool": "nope", "args": {}}, BILLING, 422, "SCHEMA", "unknown_tool", "nope"),
        (credit(amount=5000), BILLING, 422, "SCHEMA", "schema_invalid", "issue_credit"),
        (
            ticket("C-20001"),
            BILLING,
            409,
            "PRECONDITION",
            "precondition_failed",
            "create_support_ticket",
        ),
        (credit(), SCHEDULING, 403, "AUTHZ", "tool_not_allowed", "issue_credit"),
        (b"{not json", BILLING, 400, "SCHEMA", "malformed_request", None),
        (credit(), {"Authorization": "Bearer wrong"}, 401, "AUTHZ", "unauthenticated", None),
    ],
    ids=[
        "unknown_tool",
        "schema_invalid",
        "precondition_failed",
        "tool_not_allowed",
        "malformed_request",
        "unauthenticated",
    ],
)
async def test_every_rejection_is_a_span_that_says_why(
    make_broker: MakeBroker,
    body: dict[str, Any] | bytes,
    headers: dict[str, str],
    status: int,
    category: str,
    code: str,
    tool: str | None,
) -> None:
    url, exporter = traced(make_broker)
    content = body if isinstance(body, bytes) else msgspec.json.encode(body)
    async with httpx.AsyncClient(base_url=url) as client:
        response = await client.post(
            "/v1/proposals",
            content=content,
            headers={**headers, "traceparent": CALLER, "Content-Type": "application/json"},
        )
    assert response.status_code == status
    span = only(exporter.get_finished_spans())
    found = attributes(span)
    assert found["gen_ai.operation.name"] == "execute_tool"
    assert found["gen_ai.tool.call.id"] == response.json()["proposal_id"]
    assert (found["broker.decision"], found["broker.category"], found["broker.code"]) == (
        "rejected",
        category,
        code,
    )
    if tool is not None:
        assert found["gen_ai.tool.name"] == tool
    assert "broker.execution.status" not in found
    # A refusal is the broker doing its job, not an error of the span.
    assert span.status.status_code is StatusCode.UNSET
    assert "error.type" not in found
    assert f"{span.context.trace_id:032x}" == CALLER_TRACE


async def test_an_unknown_tool_is_named_in_the_attribute_not_the_span_name(
    make_broker: MakeBroker,
) -> None:
    url, exporter = traced(make_broker)
    async with httpx.AsyncClient(base_url=url) as client:
        await client.post("/v1/proposals", json={"tool": "x" * 50, "args": {}}, headers=BILLING)
    span = only(exporter.get_finished_spans())
    assert span.name == "execute_tool _unknown"  # span names stay few
    assert attributes(span)["gen_ai.tool.name"] == "x" * 50


async def test_failed_and_timed_out_executions_are_error_spans_with_error_type(
    make_broker: MakeBroker, demo_config: BrokerConfig
) -> None:
    tools = dict(demo_config.tools)
    tools["issue_credit"] = msgspec.structs.replace(tools["issue_credit"], timeout_s=0.05)
    config = msgspec.structs.replace(demo_config, tools=tools)
    url, exporter = traced(
        make_broker, config=config, backends={"demo": DemoBackend(latency_s=0.3)}
    )
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        missing = {"tool": "lookup_order", "args": {"order_id": "O-00000"}}
        failed = await client.post("/v1/proposals", json=missing, headers=BILLING)
        timed_out = await client.post("/v1/proposals", json=credit(), headers=BILLING)
        replayed = await client.post("/v1/proposals", json=credit(), headers=BILLING)
    assert (failed.status_code, timed_out.status_code) == (502, 504)
    by_id = {attributes(s)["gen_ai.tool.call.id"]: s for s in exporter.get_finished_spans()}
    assert len(exporter.get_finished_spans()) == 3

    for response, error_type in ((failed, "provider_error"), (timed_out, "timeout")):
        span = by_id[response.json()["proposal_id"]]
        found = attributes(span)
        assert found["broker.decision"] == "approved"
        assert found["broker.execution.status"] == "failed"
        assert found["error.type"] == error_type == found["broker.code"]
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description == error_type

    # The retry of the timed-out key is refused (outcome unknown); that is a refusal, not an
    # execution, so not an error.
    assert replayed.status_code == 409
    span = by_id[replayed.json()["proposal_id"]]
    assert attributes(span)["broker.code"] == "outcome_unknown"
    assert span.status.status_code is StatusCode.UNSET


async def test_a_replay_is_a_span_but_never_an_error(make_broker: MakeBroker) -> None:
    url, exporter = traced(make_broker)
    async with httpx.AsyncClient(base_url=url) as client:
        first = await client.post("/v1/proposals", json=credit(), headers=BILLING)
        again = await client.post("/v1/proposals", json=credit(), headers=BILLING)
    assert again.headers["Idempotent-Replayed"] == "true"
    spans = exporter.get_finished_spans()
    assert [attributes(s)["broker.decision"] for s in spans] == ["approved", "replayed"]
    # The replay answers the first call: the same tool call id.
    assert {attributes(s)["gen_ai.tool.call.id"] for s in spans} == {first.json()["proposal_id"]}


def test_tracing_off_is_a_no_op() -> None:
    tracing = Tracing.from_environment(enabled=False)
    assert not tracing.enabled
    with pytest.raises(RuntimeError):
        tracing.proposal("issue_credit", "issue_credit", CALLER)
