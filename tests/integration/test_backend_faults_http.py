"""Outages are not the agent's fault: over real HTTP against a broker and a loopback backend.

* A precondition whose verifier cannot answer (connection refused, 5xx, timeout) is 503
  ``provider_unavailable`` with ``Retry-After``, recorded so in the ledger, never a 409
  ``precondition_failed`` telling the agent to fix its input.
* A backend's 429 or 408 is transient: retried within the deadline after at least its
  ``Retry-After``; when that does not fit the deadline, the key is released (503
  ``provider_unavailable`` with ``Retry-After``) so the same key executes once the backend is back.

Every test runs on both outbound clients (``BROKER_HTTP_CLIENT``).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from email.utils import formatdate
from pathlib import Path
from typing import Any

import httpx
import pytest

from broker.plugins import CLIENT_ENV, Backend, HttpClientKind
from tests.conftest import ADMIN, BILLING, free_port
from tests.fakes import SleepRecorder, assert_problem
from tests.loopback import LoopbackBackend, running
from tests.registrations import registration, registration_config

StartBroker = Callable[..., tuple[str, Mapping[str, Backend]]]


@pytest.fixture(autouse=True, params=["httpx", "http1"])
def client_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> HttpClientKind:
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
    url, _ = make_broker(registration_config(), sleep=sleeps)
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        yield client


def ledger_record(tmp_path: Path, proposal_id: str) -> dict[str, Any]:
    """The proposal's record as the ledger file holds it (read back, not from the answer)."""
    lines = (tmp_path / "ledger.jsonl").read_text().splitlines()
    found = [json.loads(line) for line in lines if proposal_id in line]
    (record,) = [r for r in found if r.get("proposal_id") == proposal_id]
    return record


async def register(
    http: httpx.AsyncClient, loopback: LoopbackBackend, name: str, body: dict[str, Any]
) -> None:
    created = await http.post("/v1/tools", json=body, headers=ADMIN)
    assert created.status_code == 201, created.text
    secret = created.json()["signing_secret"]
    for path in ("/tools/refund", "/verify/check"):
        loopback.secrets[path] = secret


def refund(key: str) -> dict[str, Any]:
    return {"tool": "billing.refund", "args": {"payment_id": "P-7"}, "idempotency_key": key}


def with_verifier(backend_url: str, verifier_url: str, timeout_s: float = 2.0) -> dict[str, Any]:
    return registration(
        "billing.refund",
        backend_url + "/tools/refund",
        adapter={"kind": "http", "url": backend_url + "/tools/refund", "timeout_s": timeout_s},
        preconditions=["billing.customer_known"],
        verifiers={
            "billing.customer_known": {
                "url": verifier_url,
                "remediation": "ASK_FOR_MORE: confirm the customer id",
            }
        },
    )


# -- 1. a verifier that cannot answer -------------------------------------------------------------


@pytest.mark.parametrize("outage", ["refused", "503", "timeout"])
async def test_a_verifier_outage_is_provider_unavailable_not_the_agents_fault(
    http: httpx.AsyncClient,
    backend: tuple[str, LoopbackBackend],
    tmp_path: Path,
    outage: str,
) -> None:
    backend_url, loopback = backend
    verifier_url = backend_url + "/verify/check"
    if outage == "refused":
        verifier_url = f"http://127.0.0.1:{free_port()}/verify/check"  # nothing listens there
    loopback.behaviours["/verify/check"] = {"503": "status:503", "timeout": "hang"}.get(outage, "")
    await register(http, loopback, "billing.refund", with_verifier(backend_url, verifier_url, 0.5))

    answer = await http.post("/v1/proposals", json=refund(f"down-{outage}"), headers=BILLING)

    problem = assert_problem(answer, 503, "provider_unavailable", "PROVIDER")
    assert int(answer.headers["retry-after"]) >= 1
    assert "ASK_FOR_MORE" not in answer.text
    assert problem["remediation"].startswith("RETRY:")
    assert "billing.customer_known" in problem["reason"]
    assert not loopback.hits_on("/tools/refund")  # nothing executed
    record = ledger_record(tmp_path, problem["proposal_id"])
    assert (record["decision"], record["code"]) == ("rejected", "provider_unavailable")
    assert (await http.get("/v1/audit/verify", headers=ADMIN)).json()["ok"] is True


async def test_a_verifier_that_answers_no_is_still_a_failed_precondition(
    http: httpx.AsyncClient, backend: tuple[str, LoopbackBackend]
) -> None:
    backend_url, loopback = backend
    loopback.behaviours["/verify/check"] = "verify:fail"
    await register(
        http, loopback, "billing.refund", with_verifier(backend_url, backend_url + "/verify/check")
    )
    answer = await http.post("/v1/proposals", json=refund("says-no"), headers=BILLING)
    assert_problem(answer, 409, "precondition_failed", "PRECONDITION")
    assert "retry-after" not in answer.headers


async def test_a_verifier_429_passes_its_retry_after_on(
    http: httpx.AsyncClient, backend: tuple[str, LoopbackBackend]
) -> None:
    backend_url, loopback = backend
    loopback.behaviours["/verify/check"] = "later:429:9:7"
    await register(
        http, loopback, "billing.refund", with_verifier(backend_url, backend_url + "/verify/check")
    )
    answer = await http.post("/v1/proposals", json=refund("verify-429"), headers=BILLING)
    assert_problem(answer, 503, "provider_unavailable", "PROVIDER")
    assert answer.headers["retry-after"] == "7"


# -- 2. a backend's 429 and 408 -------------------------------------------------------------------


async def register_tool(
    http: httpx.AsyncClient, loopback: LoopbackBackend, backend_url: str, behaviour: str
) -> None:
    loopback.behaviours["/tools/refund"] = behaviour
    await register(
        http,
        loopback,
        "billing.refund",
        registration("billing.refund", backend_url + "/tools/refund"),
    )


@pytest.mark.parametrize("status", [429, 408])
async def test_a_429_or_408_is_retried_after_its_retry_after(
    http: httpx.AsyncClient,
    backend: tuple[str, LoopbackBackend],
    sleeps: SleepRecorder,
    status: int,
) -> None:
    backend_url, loopback = backend
    await register_tool(http, loopback, backend_url, f"later:{status}:1:1")
    answer = await http.post("/v1/proposals", json=refund(f"later-{status}"), headers=BILLING)
    assert answer.status_code == 200, answer.text
    assert answer.json()["execution"]["attempts"] == 2
    assert len(loopback.hits_on("/tools/refund")) == 2
    assert sleeps.calls and sleeps.calls[0] >= 1.0  # at least what the backend asked


async def test_a_retry_after_past_the_deadline_releases_the_key(
    http: httpx.AsyncClient,
    backend: tuple[str, LoopbackBackend],
    sleeps: SleepRecorder,
    tmp_path: Path,
) -> None:
    backend_url, loopback = backend
    # Asks for 30 s; the tool's deadline is 2 s: no retry fits, and none is slept into.
    await register_tool(http, loopback, backend_url, "later:429:1:30")
    first = await http.post("/v1/proposals", json=refund("busy"), headers=BILLING)

    problem = assert_problem(first, 503, "provider_unavailable", "PROVIDER")
    assert first.headers["retry-after"] == "30"
    assert len(loopback.hits_on("/tools/refund")) == 1
    assert not sleeps.calls
    assert ledger_record(tmp_path, problem["proposal_id"])["code"] == "provider_unavailable"

    # Nothing was stored under the key: the same key executes now that the backend accepts.
    again = await http.post("/v1/proposals", json=refund("busy"), headers=BILLING)
    assert again.status_code == 200, again.text
    assert again.json()["replayed"] is False
    assert len(loopback.hits_on("/tools/refund")) == 2


async def test_an_http_date_retry_after_is_honoured(
    http: httpx.AsyncClient, backend: tuple[str, LoopbackBackend]
) -> None:
    backend_url, loopback = backend
    when = formatdate(time.time() + 120, usegmt=True)
    await register_tool(http, loopback, backend_url, f"later:503:9:{when}")
    answer = await http.post("/v1/proposals", json=refund("dated"), headers=BILLING)
    assert_problem(answer, 503, "provider_unavailable", "PROVIDER")
    assert 100 <= int(answer.headers["retry-after"]) <= 121
    assert len(loopback.hits_on("/tools/refund")) == 1


async def test_other_4xx_stay_definite_and_replay(
    http: httpx.AsyncClient, backend: tuple[str, LoopbackBackend]
) -> None:
    backend_url, loopback = backend
    await register_tool(http, loopback, backend_url, "status:409")
    first = await http.post("/v1/proposals", json=refund("conflict"), headers=BILLING)
    assert_problem(first, 502, "provider_error", "PROVIDER")
    assert "retry-after" not in first.headers
    again = await http.post("/v1/proposals", json=refund("conflict"), headers=BILLING)
    assert again.json()["replayed"] is True
    assert len(loopback.hits_on("/tools/refund")) == 1
