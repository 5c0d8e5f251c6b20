"""The Python client against a real broker over HTTP: answers, typed errors, retries."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

import pytest
from broker_client import (
    AsyncClient,
    AuthzError,
    Client,
    PreconditionError,
    Retries,
    SchemaError,
    Tool,
    TransportError,
)

from adapters.demo import DemoBackend
from tests.ports import free_port

CREDIT = {"order_id": "O-55291", "amount": 25, "currency": "USD"}


def test_an_approved_proposal_answers_a_typed_decision(broker: tuple[str, DemoBackend]) -> None:
    url, demo = broker
    with Client(url, "demo-billing-token") as client:
        decision = client.propose(
            "issue_credit", CREDIT, idempotency_key="client-1", reason="partial refund"
        )
        again = client.proposal(decision.proposal_id)
    assert decision.approved and decision.status == 200
    assert decision.result is not None and decision.result["credit_id"] == "CR-1001"
    assert decision.execution is not None and decision.execution.attempts == 1
    assert decision.audit is not None and decision.audit.hash.startswith("sha256:")
    assert again.proposal_id == decision.proposal_id
    assert len(demo.credits) == 1


async def test_the_async_client_answers_the_same(broker: tuple[str, DemoBackend]) -> None:
    url, demo = broker
    async with AsyncClient(url, "demo-billing-token") as client:
        first = await client.propose("issue_credit", CREDIT, idempotency_key="client-2")
        replay = await client.propose("issue_credit", CREDIT, idempotency_key="client-2")
    assert first.approved and not first.replayed
    assert replay.replayed and replay.result == first.result
    assert len(demo.credits) == 1


def test_a_rejection_raises_its_categorys_exception(broker: tuple[str, DemoBackend]) -> None:
    url, demo = broker
    unpaid = {"order_id": "O-60000", "amount": 5, "currency": "USD"}
    with Client(url, "demo-billing-token") as client:
        with pytest.raises(PreconditionError) as refused:
            client.propose("issue_credit", unpaid, idempotency_key="client-3")
        with pytest.raises(SchemaError) as malformed:
            client.propose("issue_credit", {"order_id": "O-55291"}, idempotency_key="client-4")
    assert refused.value.status == 409 and refused.value.code == "precondition_failed"
    assert refused.value.remediation
    assert refused.value.decision is not None and refused.value.decision.decision == "rejected"
    assert malformed.value.decision is not None
    assert {error.path for error in malformed.value.decision.errors} >= {"/args/amount"}
    assert demo.credits == []


def test_errors_can_be_returned_as_decisions_instead(broker: tuple[str, DemoBackend]) -> None:
    url, _ = broker
    unpaid = {"order_id": "O-60000", "amount": 5, "currency": "USD"}
    with Client(url, "demo-billing-token", errors="return") as client:
        decision = client.propose("issue_credit", unpaid, idempotency_key="client-5")
    assert decision.decision == "rejected" and decision.status == 409
    assert decision.category == "PRECONDITION" and decision.code == "precondition_failed"


def test_a_bad_token_is_an_authz_error_in_either_mode(broker: tuple[str, DemoBackend]) -> None:
    url, _ = broker
    for mode in ("raise", "return"):
        with (
            Client(url, "not-a-token", errors=mode) as client,  # type: ignore[arg-type]
            pytest.raises(AuthzError) as refused,
        ):
            client.tools()
        assert refused.value.status == 401


def test_the_catalog_and_the_claims_check(broker: tuple[str, DemoBackend]) -> None:
    url, _ = broker
    with Client(url, "demo-billing-token") as client:
        tools = client.tools()
        decision = client.propose("issue_credit", CREDIT, idempotency_key="client-6")
        backed = client.check_claims(
            "I've issued a credit of 25 USD on order O-55291.", trace_id=decision.trace_id
        )
        unbacked = client.check_claims(
            "I've issued a credit of 25 USD on order O-55291.", trace_id="no-such-trace"
        )
    assert all(isinstance(tool, Tool) for tool in tools)
    assert {tool.name for tool in tools} >= {"issue_credit", "lookup_order"}
    assert backed.ok and backed.claims
    assert not unbacked.ok


def _whole_request(connection: socket.socket) -> bytes:
    """One HTTP request as sent (headers and body may arrive in separate segments)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += connection.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += connection.recv(65536)
    return head + b"\r\n\r\n" + body


@contextmanager
def dropping_first_answer(target: str) -> Iterator[str]:
    """A TCP proxy that forwards the first request but closes the connection instead of
    relaying its answer, as a load balancer that dies mid-response would; later connections
    pass through. The broker has executed the first request when the client sees the fault."""
    parts = urlsplit(target)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    connections = 0

    def pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            sink.close()

    def serve() -> None:
        nonlocal connections
        while True:
            try:
                downstream, _ = listener.accept()
            except OSError:
                return
            connections += 1
            upstream = socket.create_connection((parts.hostname, parts.port))
            if connections == 1:
                upstream.sendall(_whole_request(downstream))
                upstream.recv(65536)  # the broker answered: the credit is issued
                upstream.close()
                downstream.close()
                continue
            threading.Thread(target=pipe, args=(downstream, upstream), daemon=True).start()
            threading.Thread(target=pipe, args=(upstream, downstream), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        listener.close()


def test_a_transport_retry_resends_the_same_key_and_executes_once(
    broker: tuple[str, DemoBackend],
) -> None:
    url, demo = broker
    with dropping_first_answer(url) as proxied, Client(proxied, "demo-billing-token") as client:
        decision = client.propose("issue_credit", CREDIT, idempotency_key="client-7")
    assert decision.approved and decision.replayed
    assert len(demo.credits) == 1


def test_an_unreachable_broker_is_a_transport_error_after_the_retries() -> None:
    port = free_port()  # nothing listens there
    retries = Retries(attempts=2, backoff_s=0.01)
    with (
        Client(f"http://127.0.0.1:{port}", "t", retries=retries) as client,
        pytest.raises(TransportError),
    ):
        client.propose("lookup_order", {"order_id": "O-55291"})


def test_retry_waits_honour_retry_after_and_spread_their_jitter() -> None:
    retries = Retries(attempts=5, backoff_s=0.4, max_wait_s=2.0)
    assert retries.wait_s(0, "1") == 1.0
    assert retries.wait_s(0, "30") == 2.0  # capped: the caller's patience wins
    waits = sorted(retries.wait_s(2, None) for _ in range(2000))
    assert waits[0] >= 0 and waits[-1] <= 1.6
    # Full jitter over [0, 1.6): quartiles near 0.4, 0.8 and 1.2, so retries do not arrive together.
    for quartile, expected in zip((500, 1000, 1500), (0.4, 0.8, 1.2), strict=True):
        assert abs(waits[quartile] - expected) < 0.12


def test_provider_catalogs_and_native_tool_calls(broker: tuple[str, DemoBackend]) -> None:
    url, demo = broker
    call = {
        "id": "call_1",
        "type": "function",
        "function": {
            "name": "issue_credit",
            "arguments": '{"order_id": "O-55291", "amount": 25, "currency": "USD"}',
        },
    }
    with Client(url, "demo-billing-token") as client:
        catalog = client.tools(format="openai")
        first = client.tool_calls("openai", {"role": "assistant", "tool_calls": [call]})
        again = client.tool_calls("openai", [call])
    assert {tool["function"]["name"] for tool in catalog["tools"]} >= {"issue_credit"}
    assert first.format == "openai" and first.decisions[0].approved
    assert first.results[0]["tool_call_id"] == "call_1"
    assert again.decisions[0].replayed
    assert len(demo.credits) == 1
