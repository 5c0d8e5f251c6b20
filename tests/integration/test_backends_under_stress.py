"""Backends under stress, over real sockets: a loopback backend that is slow, hangs or fails.

The backend's own record of requests (``LoopbackBackend.hits``, ``max_in_flight``) is the ground
truth: how many calls it had in flight at once (bulkhead), whether calls kept reaching it while
the breaker was open (they must not), how many retries it saw (retry budget).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from adapters.demo import DemoBackend
from adapters.python import FunctionBackend
from broker.config import parse_config
from broker.plugins import AdapterContext, Backend
from tests.conftest import ADMIN, BILLING
from tests.fakes import SleepRecorder, assert_problem
from tests.loopback import LoopbackBackend, running
from tests.registrations import registration, registration_config, registration_raw

StartBroker = Callable[..., tuple[str, Mapping[str, Backend]]]


@pytest.fixture
def backend() -> Iterator[tuple[str, LoopbackBackend]]:
    loopback = LoopbackBackend()
    with running(loopback) as url:
        yield url, loopback


async def client_for(url: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=url, timeout=30, limits=httpx.Limits(max_connections=100))


async def register(
    http: httpx.AsyncClient,
    loopback: LoopbackBackend,
    backend_url: str,
    name: str,
    behaviour: str,
    *,
    timeout_s: float = 5.0,
    max_concurrency: int | None = None,
    **overrides: Any,
) -> str:
    """Register ``billing.<name>`` at ``/tools/<name>`` answering with ``behaviour``."""
    path = f"/tools/{name}"
    loopback.behaviours[path] = behaviour
    adapter: dict[str, Any] = {"kind": "http", "url": backend_url + path, "timeout_s": timeout_s}
    if max_concurrency is not None:
        adapter["max_concurrency"] = max_concurrency
    body = registration(f"billing.{name}", backend_url + path, adapter=adapter, **overrides)
    answer = await http.post("/v1/tools", json=body, headers=ADMIN)
    assert answer.status_code == 201, answer.text
    loopback.secrets[path] = answer.json()["signing_secret"]
    return str(body["name"])


def propose(tool: str, key: str) -> dict[str, Any]:
    return {"tool": tool, "args": {"payment_id": "P-7"}, "idempotency_key": key}


async def metric(http: httpx.AsyncClient, sample: str, **labels: str) -> float | None:
    """One sample's value from ``/metrics`` (``None`` when the series is absent)."""
    text = (await http.get("/metrics")).text
    for family in text_string_to_metric_families(text):
        for found in family.samples:
            if found.name == sample and all(found.labels.get(k) == v for k, v in labels.items()):
                return float(found.value)
    return None


async def until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "gave up waiting"
        await asyncio.sleep(0.01)


# -- bulkhead ---------------------------------------------------------------------------------------


@pytest.fixture
async def http(make_broker: StartBroker) -> AsyncIterator[httpx.AsyncClient]:
    url, _ = make_broker(registration_config())
    async with await client_for(url) as client:
        yield client


async def test_the_bulkhead_caps_the_calls_a_backend_has_in_flight(
    http: httpx.AsyncClient, backend: tuple[str, LoopbackBackend]
) -> None:
    backend_url, loopback = backend
    tool = await register(http, loopback, backend_url, "slow", "slow:0.3", max_concurrency=4)
    answers = await asyncio.gather(
        *(
            http.post("/v1/proposals", json=propose(tool, f"k-{i}"), headers=BILLING)
            for i in range(16)
        )
    )
    assert [a.status_code for a in answers] == [200] * 16, [a.text for a in answers if a.is_error]
    assert len(loopback.hits_on("/tools/slow")) == 16
    assert loopback.max_in_flight == 4  # reached, never passed
    assert await metric(http, "broker_backend_in_flight", backend=backend_url) == 0


async def test_a_call_that_gets_no_slot_within_its_deadline_is_refused_unsent(
    http: httpx.AsyncClient, backend: tuple[str, LoopbackBackend]
) -> None:
    backend_url, loopback = backend
    # Two tools of one backend (one origin) share its bulkhead: the lowest limit, 1, applies.
    slow = await register(http, loopback, backend_url, "slow", "slow:1.2", max_concurrency=1)
    quick = await register(http, loopback, backend_url, "quick", "ok", timeout_s=0.4)
    busy = asyncio.create_task(
        http.post("/v1/proposals", json=propose(slow, "slow-1"), headers=BILLING)
    )
    await until(lambda: loopback.in_flight == 1)
    started = time.monotonic()
    refused = await http.post("/v1/proposals", json=propose(quick, "quick-1"), headers=BILLING)
    waited = time.monotonic() - started
    problem = assert_problem(refused, 503, "provider_unavailable", "PROVIDER")
    assert refused.headers["retry-after"] == "1"
    assert problem["execution"]["attempts"] == 0  # never sent
    assert 0.3 <= waited < 1.0, waited  # it waited within its deadline, not for the slow call
    assert loopback.hits_on("/tools/quick") == []
    assert (
        await metric(
            http, "broker_backend_rejections_total", backend=backend_url, reason="bulkhead"
        )
        == 1
    )
    assert (await busy).status_code == 200
    # Nothing was kept under the key: the same proposal runs once the backend has room.
    again = await http.post("/v1/proposals", json=propose(quick, "quick-1"), headers=BILLING)
    assert again.status_code == 200, again.text
    assert "idempotent-replayed" not in again.headers
    assert len(loopback.hits_on("/tools/quick")) == 1


async def test_max_concurrency_is_checked_in_a_registration(http: httpx.AsyncClient) -> None:
    body = registration(
        "billing.bad",
        "http://127.0.0.1:9/x",
        adapter={"kind": "http", "url": "http://127.0.0.1:9/x", "max_concurrency": 0},
    )
    answer = await http.post("/v1/tools", json=body, headers=ADMIN)
    assert answer.status_code == 422, answer.text
    assert any(e["path"] == "/adapter/max_concurrency" for e in answer.json()["errors"])
    assert (await http.get("/v1/tools/billing.bad", headers=ADMIN)).status_code == 404


# -- circuit breaker --------------------------------------------------------------------------------


@pytest.fixture
async def breaking(make_broker: StartBroker) -> AsyncIterator[httpx.AsyncClient]:
    url, _ = make_broker(registration_config(breaker_open_s=1.0))
    async with await client_for(url) as client:
        yield client


ONE_ATTEMPT = {"attempts": 1, "initial_backoff_s": 0, "max_backoff_s": 0}


@pytest.mark.parametrize("failure", ["status:503", "status:500", "status:429", "status:408"])
async def test_the_breaker_opens_after_five_transient_failures_and_recovers(
    breaking: httpx.AsyncClient, backend: tuple[str, LoopbackBackend], failure: str
) -> None:
    backend_url, loopback = backend
    tool = await register(breaking, loopback, backend_url, "failing", failure, retry=ONE_ATTEMPT)
    for i in range(5):
        answer = await breaking.post("/v1/proposals", json=propose(tool, f"f-{i}"), headers=BILLING)
        assert answer.status_code in (502, 503), answer.text
        assert answer.json()["execution"]["attempts"] == 1
    assert len(loopback.hits_on("/tools/failing")) == 5
    state = await metric(breaking, "broker_backend_circuit_state", backend=backend_url)
    assert state == 1  # open
    for i in range(5):  # fail fast: nothing reaches the backend while it is open
        started = time.monotonic()
        answer = await breaking.post("/v1/proposals", json=propose(tool, f"o-{i}"), headers=BILLING)
        assert time.monotonic() - started < 0.2
        problem = assert_problem(answer, 503, "provider_unavailable", "PROVIDER")
        assert "circuit open" in problem["reason"]
        assert problem["execution"]["attempts"] == 0
        assert answer.headers["retry-after"] == "1"
    assert len(loopback.hits_on("/tools/failing")) == 5
    assert (
        await metric(
            breaking, "broker_backend_rejections_total", backend=backend_url, reason="circuit_open"
        )
        == 5
    )
    loopback.behaviours["/tools/failing"] = "ok"  # the backend recovers
    await asyncio.sleep(1.05)
    probe = await breaking.post("/v1/proposals", json=propose(tool, "probe"), headers=BILLING)
    assert probe.status_code == 200, probe.text
    assert await metric(breaking, "broker_backend_circuit_state", backend=backend_url) == 0
    after = await breaking.post("/v1/proposals", json=propose(tool, "after"), headers=BILLING)
    assert after.status_code == 200
    assert len(loopback.hits_on("/tools/failing")) == 7


async def test_a_failed_probe_opens_the_breaker_again(
    breaking: httpx.AsyncClient, backend: tuple[str, LoopbackBackend]
) -> None:
    backend_url, loopback = backend
    tool = await register(breaking, loopback, backend_url, "down", "status:503", retry=ONE_ATTEMPT)
    for i in range(5):
        await breaking.post("/v1/proposals", json=propose(tool, f"f-{i}"), headers=BILLING)
    await asyncio.sleep(1.05)
    probe = await breaking.post("/v1/proposals", json=propose(tool, "probe"), headers=BILLING)
    assert probe.json()["execution"]["attempts"] == 1  # the one probe reached it, and failed
    refused = await breaking.post("/v1/proposals", json=propose(tool, "next"), headers=BILLING)
    assert refused.json()["execution"]["attempts"] == 0
    assert len(loopback.hits_on("/tools/down")) == 6


async def test_definite_failures_never_open_the_breaker(
    breaking: httpx.AsyncClient, backend: tuple[str, LoopbackBackend]
) -> None:
    backend_url, loopback = backend
    tool = await register(breaking, loopback, backend_url, "refusing", "status:409")
    for i in range(12):
        answer = await breaking.post("/v1/proposals", json=propose(tool, f"r-{i}"), headers=BILLING)
        assert_problem(answer, 502, "provider_error", "PROVIDER")
    assert len(loopback.hits_on("/tools/refusing")) == 12
    assert await metric(breaking, "broker_backend_circuit_state", backend=backend_url) == 0


async def test_timeouts_open_the_breaker_for_every_tool_of_the_backend(
    breaking: httpx.AsyncClient, backend: tuple[str, LoopbackBackend]
) -> None:
    backend_url, loopback = backend
    hang = await register(breaking, loopback, backend_url, "hang", "hang", timeout_s=0.2)
    for i in range(5):
        answer = await breaking.post("/v1/proposals", json=propose(hang, f"h-{i}"), headers=BILLING)
        assert_problem(answer, 504, "timeout", "TIMEOUT")
    other = await register(breaking, loopback, backend_url, "other", "ok")
    answer = await breaking.post("/v1/proposals", json=propose(other, "o-1"), headers=BILLING)
    assert_problem(answer, 503, "provider_unavailable", "PROVIDER")  # same origin: open
    assert loopback.hits_on("/tools/other") == []


async def test_a_retrys_failure_counts_toward_opening_the_breaker(
    breaking: httpx.AsyncClient, backend: tuple[str, LoopbackBackend]
) -> None:
    backend_url, loopback = backend
    tool = await register(breaking, loopback, backend_url, "down", "status:503")  # 3 attempts
    first = await breaking.post("/v1/proposals", json=propose(tool, "d-1"), headers=BILLING)
    assert first.json()["execution"]["attempts"] == 3
    second = await breaking.post("/v1/proposals", json=propose(tool, "d-2"), headers=BILLING)
    problem = assert_problem(second, 503, "provider_unavailable", "PROVIDER")
    # The fifth failure in a row (this proposal's second attempt) opened it: no third attempt.
    assert problem["execution"]["attempts"] == 2
    assert "circuit open" in problem["reason"]
    assert second.headers["retry-after"] == "1"
    assert len(loopback.hits_on("/tools/down")) == 5


# -- retry budget -------------------------------------------------------------------------------------


async def test_retries_stay_within_the_backends_budget(
    make_broker: StartBroker, backend: tuple[str, LoopbackBackend]
) -> None:
    backend_url, loopback = backend
    config = registration_config(
        circuit_breaker=False,
        retry_budget_ratio=0.2,
        retry_budget_window_s=60.0,
        retry_budget_min_retries=0,
    )
    url, _ = make_broker(config, sleep=SleepRecorder())
    async with await client_for(url) as http:
        tool = await register(http, loopback, backend_url, "down", "status:503")
        for i in range(40):  # each proposal may try 3 times: 120 calls without a budget
            await http.post("/v1/proposals", json=propose(tool, f"d-{i}"), headers=BILLING)
        calls = len(loopback.hits_on("/tools/down"))
        assert 40 < calls <= 40 + 0.2 * 40, calls
        denied = await metric(
            http, "broker_backend_rejections_total", backend=backend_url, reason="retry_budget"
        )
        assert denied is not None and denied >= 40 - (calls - 40)


async def test_retry_backoff_is_spread_by_jitter(
    make_broker: StartBroker, backend: tuple[str, LoopbackBackend]
) -> None:
    backend_url, loopback = backend
    sleeps = SleepRecorder()
    config = registration_config(retry_budget_min_retries=1000)
    url, _ = make_broker(config, sleep=sleeps)
    retry = {"attempts": 2, "initial_backoff_s": 0.2, "max_backoff_s": 1.0}
    async with await client_for(url) as http:
        tool = await register(http, loopback, backend_url, "odd", "alternate:503", retry=retry)
        for i in range(200):  # every proposal fails once, then succeeds on its retry
            answer = await http.post("/v1/proposals", json=propose(tool, f"j-{i}"), headers=BILLING)
            assert answer.json()["execution"]["attempts"] == 2, answer.text
    waits = sleeps.calls
    assert len(waits) == 200
    cap = 0.2  # the first retry waits uniformly in [0, initial_backoff_s]
    assert all(0 <= w <= cap for w in waits)
    deciles = statistics.quantiles(waits, n=10)
    # Full jitter: spread over the whole range (uniform: p10 = 0.1 cap, p90 = 0.9 cap, sd 0.29 cap).
    assert deciles[0] < 0.25 * cap and deciles[-1] > 0.75 * cap, deciles
    assert statistics.pstdev(waits) > 0.2 * cap
    assert len({round(w, 4) for w in waits}) > 150


# -- load shedding ------------------------------------------------------------------------------------


async def test_past_max_in_flight_new_proposals_are_shed_before_any_state(
    make_broker: StartBroker, backend: tuple[str, LoopbackBackend], tmp_path: Path
) -> None:
    backend_url, loopback = backend
    url, _ = make_broker(registration_config(max_in_flight_proposals=2))
    ledger = tmp_path / "ledger.jsonl"
    async with await client_for(url) as http:
        tool = await register(http, loopback, backend_url, "slow", "slow:1.0")
        busy = [
            asyncio.create_task(
                http.post("/v1/proposals", json=propose(tool, f"busy-{i}"), headers=BILLING)
            )
            for i in range(2)
        ]
        await until(lambda: loopback.in_flight == 2)
        recorded = ledger.read_bytes()
        shed = await http.post("/v1/proposals", json=propose(tool, "shed-1"), headers=BILLING)
        assert shed.status_code == 503, shed.text
        assert shed.headers["content-type"] == "application/problem+json"
        assert shed.json()["code"] == "service_unavailable"
        assert shed.json()["category"] == "UNAVAILABLE"
        assert int(shed.headers["retry-after"]) >= 1
        ready = await http.get("/readyz")
        assert ready.status_code == 503 and ready.json()["checks"]["load"] == "overloaded"
        assert ledger.read_bytes() == recorded  # nothing recorded for it
        assert await metric(http, "broker_proposals_shed_total") == 1
        assert await metric(http, "broker_proposals_in_flight") == 2
        assert [b.status_code for b in await asyncio.gather(*busy)] == [200, 200]
        assert (await http.get("/readyz")).json()["checks"]["load"] == "ok"
        # Its key was never claimed: the same proposal now runs, for the first time.
        again = await http.post("/v1/proposals", json=propose(tool, "shed-1"), headers=BILLING)
        assert again.status_code == 200, again.text
        assert "idempotent-replayed" not in again.headers
        assert len(loopback.hits_on("/tools/slow")) == 3


async def test_a_python_backend_gets_its_bulkhead_from_the_config(make_broker: StartBroker) -> None:
    running_now = {"now": 0, "max": 0}

    async def count(args: dict[str, Any], ctx: AdapterContext) -> dict[str, Any]:
        running_now["now"] += 1
        running_now["max"] = max(running_now["max"], running_now["now"])
        await asyncio.sleep(0.1)
        running_now["now"] -= 1
        return {"ok": True}

    raw = registration_raw()
    raw["backends"]["counted"] = {"factory": "tests.fakes:create_fake"}  # replaced below
    raw["tools"]["count_things"] = {
        "description": "Count things.",
        "risk": "read",
        "idempotent": True,
        "input_schema": {"type": "object"},
        "adapter": {"kind": "python", "backend": "counted", "operation": "count"},
    }
    raw["tools"]["count_things"]["adapter"]["max_concurrency"] = 3
    raw["routes"]["billing_help"]["tools"].append("count_things")
    backends = {"demo": DemoBackend(), "counted": FunctionBackend({"count": count})}
    url, _ = make_broker(parse_config(raw), backends=backends)
    async with await client_for(url) as http:
        answers = await asyncio.gather(
            *(
                http.post(
                    "/v1/proposals", json={"tool": "count_things", "args": {}}, headers=BILLING
                )
                for _ in range(12)
            )
        )
        assert [a.status_code for a in answers] == [200] * 12
        assert running_now["max"] == 3
        assert await metric(http, "broker_backend_in_flight", backend="python:counted") == 0


async def test_tool_calls_and_mcp_calls_are_shed_like_proposals(
    make_broker: StartBroker, backend: tuple[str, LoopbackBackend]
) -> None:
    backend_url, loopback = backend
    url, _ = make_broker(registration_config(max_in_flight_proposals=1))
    async with await client_for(url) as http:
        tool = await register(http, loopback, backend_url, "slow", "slow:1.0")
        busy = asyncio.create_task(
            http.post("/v1/proposals", json=propose(tool, "busy-1"), headers=BILLING)
        )
        await until(lambda: loopback.in_flight == 1)
        call = {
            "id": "c1",
            "type": "function",
            "function": {"name": "lookup_order", "arguments": "{}"},
        }
        native = await http.post(
            "/v1/tool-calls", json={"format": "openai", "calls": [call]}, headers=BILLING
        )
        mcp = await http.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={**BILLING, "Accept": "application/json, text/event-stream"},
        )
        assert (await busy).status_code == 200
    for shed in (native, mcp):
        assert shed.status_code == 503, shed.text
        assert shed.json()["code"] == "service_unavailable"
        assert int(shed.headers["retry-after"]) >= 1
    assert len(loopback.hits_on("/tools/slow")) == 1
