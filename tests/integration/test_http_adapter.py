"""The ``http`` adapter over real sockets: the request a backend sees, and how answers map.

Every test registers a tool against :class:`~tests.loopback.LoopbackBackend` and counts what
reached it: that count is the ground truth for "retried" and "not retried". Every test runs on
both outbound clients: httpx's own (the default) and the hand-built ``http1`` opt-in
(``BROKER_HTTP_CLIENT``).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

import httpx
import pytest

import adapters.http_pool
from adapters.http import HttpPool, verify_signature
from broker.allowlist import Allowlist
from broker.plugins import CLIENT_ENV, Backend, HttpClientKind
from broker.taxonomy import ProviderError
from tests.conftest import ADMIN, BILLING, free_port
from tests.fakes import SleepRecorder, assert_problem
from tests.loopback import LoopbackBackend, running
from tests.registrations import registration, registration_config

StartBroker = Callable[..., tuple[str, Mapping[str, Backend]]]


@pytest.fixture(autouse=True, params=["httpx", "http1"])
def client_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> HttpClientKind:
    """The outbound client every broker in the test uses (and every pool the test builds)."""
    kind: HttpClientKind = request.param
    monkeypatch.setenv(CLIENT_ENV, kind)
    return kind


@pytest.fixture
def backend() -> Iterator[tuple[str, LoopbackBackend]]:
    loopback = LoopbackBackend()
    with running(loopback) as url:
        yield url, loopback


@pytest.fixture
def sleeps() -> SleepRecorder:
    return SleepRecorder()


@pytest.fixture
async def http(make_broker: StartBroker, sleeps: SleepRecorder) -> AsyncIterator[httpx.AsyncClient]:
    url, _ = make_broker(registration_config(http_max_response_bytes=65536), sleep=sleeps)
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        yield client


async def register(
    http: httpx.AsyncClient,
    loopback: LoopbackBackend,
    backend_url: str,
    behaviour: str,
    **overrides: Any,
) -> str:
    """Register ``billing.<behaviour>`` against a path with that behaviour; its name."""
    slug = behaviour.replace(":", "_")
    path = f"/tools/{slug}"
    loopback.behaviours[path] = behaviour
    url = overrides.pop("url", backend_url + path)
    body = registration(f"billing.{slug}", url, **overrides)
    answer = await http.post("/v1/tools", json=body, headers=ADMIN)
    assert answer.status_code == 201, answer.text
    loopback.secrets[path] = answer.json()["signing_secret"]
    return body["name"]


def propose(tool: str, key: str | None = "key-1", **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"tool": tool, "args": {"payment_id": "P-7"}, **extra}
    if key is not None:
        body["idempotency_key"] = key
    return body


async def test_the_backend_gets_a_signed_request_in_the_documented_shape(
    http: httpx.AsyncClient, backend: tuple[str, LoopbackBackend]
) -> None:
    backend_url, loopback = backend
    tool = await register(http, loopback, backend_url, "ok")
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    answer = await http.post(
        "/v1/proposals",
        json=propose(tool),
        headers={**BILLING, "traceparent": f"00-{trace}-00f067aa0ba902b7-01"},
    )
    assert answer.status_code == 200, answer.text
    (hit,) = loopback.hits_on("/tools/ok")
    body = hit.json()
    assert set(body) == {"tool", "args", "tenant", "trace_id", "proposal_id"}
    assert body == {
        "tool": tool,
        "args": {"payment_id": "P-7"},
        "tenant": "acme",
        "trace_id": trace,
        "proposal_id": answer.json()["proposal_id"],
    }
    assert hit.headers["idempotency-key"] == "key-1"
    assert hit.headers["traceparent"].startswith(f"00-{trace}-")
    assert hit.headers["x-broker-tenant"] == "acme"
    assert hit.headers["content-type"] == "application/json"
    assert "authorization" not in hit.headers  # the caller's bearer token never leaves
    assert verify_signature(
        loopback.secrets["/tools/ok"], hit.headers["x-broker-signature"], hit.body
    )
    signed_at = int(hit.headers["x-broker-signature"].split(",")[0].removeprefix("t="))
    assert abs(signed_at - time.time()) < 5


async def test_transient_answers_are_retried_when_the_key_is_forwarded(
    http: httpx.AsyncClient, backend: tuple[str, LoopbackBackend], sleeps: SleepRecorder
) -> None:
    backend_url, loopback = backend
    for behaviour in ("flaky:503:2", "flaky:502:1", "flaky:504:1", "flaky:500:1"):
        tool = await register(http, loopback, backend_url, behaviour)
        answer = await http.post("/v1/proposals", json=propose(tool, behaviour), headers=BILLING)
        assert answer.status_code == 200, answer.text
        calls = int(behaviour.rsplit(":", 1)[1]) + 1
        assert answer.json()["execution"]["attempts"] == calls
        assert len(loopback.hits_on(f"/tools/{behaviour.replace(':', '_')}")) == calls
    assert sleeps.calls  # jittered backoff between attempts (injected, so no real waiting)
    attempts = {h.headers["x-broker-attempt"] for h in loopback.hits_on("/tools/flaky_503_2")}
    assert attempts == {"1", "2", "3"}
    keys = {h.headers["idempotency-key"] for h in loopback.hits_on("/tools/flaky_503_2")}
    assert keys == {"flaky:503:2"}


async def test_a_4xx_is_definite_never_retried_and_replays(
    http: httpx.AsyncClient, backend: tuple[str, LoopbackBackend]
) -> None:
    backend_url, loopback = backend
    tool = await register(http, loopback, backend_url, "status:409")
    first = await http.post("/v1/proposals", json=propose(tool), headers=BILLING)
    problem = assert_problem(first, 502, "provider_error", "PROVIDER")
    assert problem["execution"]["attempts"] == 1
    assert "HTTP 409" in problem["reason"]
    assert "scripted 409" not in first.text  # the backend's words go to the log and the ledger
    again = await http.post("/v1/proposals", json=propose(tool), headers=BILLING)
    assert again.status_code == 502 and again.headers["idempotent-replayed"] == "true"
    assert len(loopback.hits_on("/tools/status_409")) == 1


async def test_unavailable_backends_are_retried_then_reported(
    http: httpx.AsyncClient, backend: tuple[str, LoopbackBackend]
) -> None:
    backend_url, loopback = backend
    tool = await register(http, loopback, backend_url, "status:503")
    problem = assert_problem(
        await http.post("/v1/proposals", json=propose(tool), headers=BILLING),
        503,
        "provider_unavailable",
        "PROVIDER",
    )
    assert problem["execution"]["attempts"] == 3
    assert len(loopback.hits_on("/tools/status_503")) == 3
    closed = await register(
        http, loopback, backend_url, "closed", url=f"http://127.0.0.1:{free_port()}/nothing"
    )
    refused = await http.post("/v1/proposals", json=propose(closed), headers=BILLING)
    problem = assert_problem(refused, 503, "provider_unavailable", "PROVIDER")
    assert problem["execution"]["attempts"] == 3
    assert problem["reason"] == "the backend could not be reached"  # no Python names


async def test_no_retry_without_a_key_for_a_tool_that_is_not_idempotent(
    http: httpx.AsyncClient, backend: tuple[str, LoopbackBackend]
) -> None:
    backend_url, loopback = backend
    tool = await register(http, loopback, backend_url, "flaky:503:1", risk="read", idempotent=False)
    answer = await http.post("/v1/proposals", json=propose(tool, key=None), headers=BILLING)
    assert_problem(answer, 503, "provider_unavailable", "PROVIDER")
    assert len(loopback.hits_on("/tools/flaky_503_1")) == 1
    assert "idempotency-key" not in loopback.hits_on("/tools/flaky_503_1")[0].headers


async def test_a_hanging_backend_times_out_within_its_deadline(
    http: httpx.AsyncClient, backend: tuple[str, LoopbackBackend]
) -> None:
    backend_url, loopback = backend
    tool = await register(
        http,
        loopback,
        backend_url,
        "hang",
        adapter={"kind": "http", "url": backend_url + "/tools/hang", "timeout_s": 0.4},
    )
    started = time.monotonic()
    answer = await http.post("/v1/proposals", json=propose(tool), headers=BILLING)
    elapsed = time.monotonic() - started
    problem = assert_problem(answer, 504, "timeout", "TIMEOUT")
    assert problem["execution"]["status"] == "failed"
    assert 0.4 <= elapsed < 1.2, elapsed
    assert len(loopback.hits_on("/tools/hang")) == 1


@pytest.mark.parametrize(
    ("behaviour", "words"),
    [
        ("big", "exceeds 65536 bytes"),
        ("invalid_json", "invalid JSON"),
        ("not_object", "not an object"),
        ("redirect", "not followed"),
    ],
)
async def test_answers_that_break_the_contract_are_definite_failures(
    http: httpx.AsyncClient, backend: tuple[str, LoopbackBackend], behaviour: str, words: str
) -> None:
    backend_url, loopback = backend
    tool = await register(http, loopback, backend_url, behaviour)
    answer = await http.post("/v1/proposals", json=propose(tool), headers=BILLING)
    problem = assert_problem(answer, 502, "provider_error", "PROVIDER")
    assert words in problem["reason"]
    assert problem["execution"]["attempts"] == 1
    assert not loopback.hits_on("/tools/redirected")


@pytest.mark.parametrize("named", [False, True], ids=["address", "named-host"])
async def test_the_wire_shape_the_backend_receives(
    backend: tuple[str, LoopbackBackend], named: bool, client_kind: HttpClientKind
) -> None:
    """Host, length and agent, for a URL naming an address or a host (pinned to its address)."""
    backend_url, loopback = backend
    port = backend_url.rsplit(":", 1)[1]
    base = f"http://localhost:{port}" if named else backend_url
    pool = HttpPool(Allowlist([f"{base}/"]), client=client_kind)
    if not (await pool.allowlist.resolve(base)).url.startswith("http://127.0.0.1:"):
        pytest.skip("localhost resolves to ::1 first here; the backend listens on 127.0.0.1")
    body = b'{"tool":"t","args":{},"tenant":"acme"}'
    try:
        for _ in range(2):  # the second call goes out on the pooled connection
            status, payload = await pool.post(
                f"{base}/tools/ok", body, {"X-Broker-Tenant": "acme"}, timeout_s=5
            )
            assert status == 200 and json.loads(payload)["ok"] is True
        hits = loopback.hits_on("/tools/ok")
        assert len(hits) == 2
        for hit in hits:
            assert hit.body == body
            assert hit.headers["host"] == f"{'localhost' if named else '127.0.0.1'}:{port}"
            assert hit.headers["content-length"] == str(len(body))
            assert hit.headers["user-agent"] == "action-broker"
            assert hit.headers["x-broker-tenant"] == "acme"
    finally:
        await pool.aclose()


async def test_any_httpx_transport_can_carry_the_pool(client_kind: HttpClientKind) -> None:
    """A transport given to the pool replaces httpx's (same wire shape); http1 refuses one."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"ok": True})

    allowlist = Allowlist(["http://127.0.0.1:9/"])
    if client_kind == "http1":
        with pytest.raises(ValueError, match="not http1"):
            HttpPool(allowlist, client="http1", transport=httpx.MockTransport(handler))
        return
    pool = HttpPool(allowlist, transport=httpx.MockTransport(handler))
    try:
        status, payload = await pool.post(
            "http://127.0.0.1:9/tools/ok", b"{}", {"X-Broker-Tenant": "acme"}, timeout_s=5
        )
    finally:
        await pool.aclose()
    assert (status, json.loads(payload)) == (200, {"ok": True})
    (request,) = seen
    assert request.headers["host"] == "127.0.0.1:9"
    assert request.headers["user-agent"] == "action-broker"
    assert request.headers["x-broker-tenant"] == "acme"
    assert request.content == b"{}"


async def test_compressed_answers_are_decoded_and_capped_once_decoded(
    backend: tuple[str, LoopbackBackend], client_kind: HttpClientKind
) -> None:
    backend_url, loopback = backend
    loopback.behaviours["/tools/small"] = "gzip:100"
    loopback.behaviours["/tools/bomb"] = "gzip:200000"  # ~200 KB decoded, far less on the wire
    pool = HttpPool(Allowlist([f"{backend_url}/"]), max_response_bytes=65536, client=client_kind)
    try:
        status, payload = await pool.post(f"{backend_url}/tools/small", b"{}", {}, timeout_s=5)
        assert status == 200 and json.loads(payload) == {"ok": True, "pad": "x" * 100}
        with pytest.raises(ProviderError, match="exceeds 65536 bytes"):
            await pool.post(f"{backend_url}/tools/bomb", b"{}", {}, timeout_s=5)
    finally:
        await pool.aclose()


async def test_the_http_client_is_built_before_the_first_call(
    http: httpx.AsyncClient,
    backend: tuple[str, LoopbackBackend],
    monkeypatch: pytest.MonkeyPatch,
    client_kind: HttpClientKind,
) -> None:
    # Building the transport loads the CA certificates (40-100 ms): a registered tool's first
    # call must not pay that inside its own deadline.
    built: list[str] = []
    for maker in ("Http1Transport", "outbound_client"):
        real = getattr(adapters.http_pool, maker)

        def counting(*args: Any, real: Any = real, maker: str = maker, **kwargs: Any) -> Any:
            built.append(maker)
            return real(*args, **kwargs)

        monkeypatch.setattr(adapters.http_pool, maker, counting)
    expected = ["Http1Transport" if client_kind == "http1" else "outbound_client"]
    name = await register(http, backend[1], backend[0], "ok")
    assert built == expected  # at registration, before any proposal
    answer = await http.post("/v1/proposals", json=propose(name), headers=BILLING)
    assert answer.status_code == 200, answer.text
    assert built == expected
