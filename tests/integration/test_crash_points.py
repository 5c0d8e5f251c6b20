"""Every crash point of an approved proposal, on both stores: real processes, killed for real.

A broker started with ``BROKER_TEST_CRASH_AT=<point>`` dies (``os._exit``) the first time a
proposal reaches that point (``broker.faults``). It is started again on the same state, without
the variable, and the test checks what the reliability matrix (§2.1) asks of that crash:

* the claim was taken but the backend never called (``after_claim``, ``after_admission``): the
  completer resolves the stuck claim without anyone retrying the key (the metric says so); a
  non-idempotent tool's key is then ``outcome_unknown`` (nothing tells the store the call never
  left: see README), an idempotent tool's is released and the retry runs it once;
* the call may have reached the backend (``after_send``, ``after_result``, ``after_record``):
  ``outcome_unknown``, and the retry never runs it again;
* the key was settled (``after_settle``): the retry replays the stored answer.

Executions are counted where they happen, at a loopback HTTP backend, and the ledger written by
both processes is verified with ``broker ledger verify`` afterwards.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from broker.faults import CRASH_ENV, CRASH_EXIT_CODE
from tests.integration.procs import (
    ADMIN,
    BILLING,
    REDIS_URL,
    ROOT,
    BrokerProcess,
    Launcher,
    Setup,
    eventually,
    launcher_for,
    redis_reachable,
)
from tests.loopback import LoopbackBackend, running
from tests.registrations import registration

TOOL_TIMEOUT_S = 1.0
LEASE_MARGIN_S = 0.5  # the lease: the tool's timeout plus this
COMPLETER_INTERVAL_S = 0.2
PATH = "/tools/refund"

# point -> (backend calls the crashed proposal made, how a retry of its key ends)
NON_IDEMPOTENT = {
    "after_claim": (0, "outcome_unknown"),
    "after_admission": (0, "outcome_unknown"),
    "after_send": (1, "outcome_unknown"),
    "after_result": (1, "outcome_unknown"),
    "after_record": (1, "outcome_unknown"),
    "after_settle": (1, "replay"),
}
# An idempotent tool's claim that never reached the backend is released: the retry runs it once.
IDEMPOTENT = {
    "after_claim": (0, "executed"),
    "after_admission": (0, "executed"),
}

CASES = [
    pytest.param(point, False, calls, end, id=f"{point}-non-idempotent")
    for point, (calls, end) in NON_IDEMPOTENT.items()
] + [
    pytest.param(point, True, calls, end, id=f"{point}-idempotent")
    for point, (calls, end) in IDEMPOTENT.items()
]


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    yield from launcher_for(tmp_path)


@pytest.fixture
def backend() -> Iterator[tuple[str, LoopbackBackend]]:
    loopback = LoopbackBackend(behaviours={PATH: "ok"})
    with running(loopback) as url:
        yield url, loopback


@pytest.fixture(params=["sqlite", "redis"])
def store_kind(request: pytest.FixtureRequest) -> str:
    if request.param == "redis" and not redis_reachable(REDIS_URL):
        pytest.skip(f"no Redis at {REDIS_URL}")
    return str(request.param)


def _config(launcher: Launcher, store_kind: str) -> Setup:
    def edit(data: dict[str, Any]) -> None:
        service = data["service"]
        service["completer_interval_s"] = COMPLETER_INTERVAL_S
        if store_kind == "sqlite":  # no Redis anywhere: the SQLite file beside the ledger
            del service["redis_url"]

    return launcher.config(edit=edit, shared_numbers=False, lease_margin_s=LEASE_MARGIN_S)


async def _stuck_completed(http: httpx.AsyncClient, broker: BrokerProcess) -> float:
    """``broker_stuck_claims_completed_total``, summed over its outcomes."""
    text = (await http.get(broker.url + "/metrics")).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("broker_stuck_claims_completed_total{")
    )


def _verify_ledger(setup: Setup) -> dict[str, Any]:
    ledger = setup.config_path.parent / f"{setup.prefix}.ledger.jsonl"
    command = [sys.executable, "-m", "broker", "ledger", "verify", "--path", str(ledger), "--json"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def _executions_in_ledger(setup: Setup) -> int:
    ledger = setup.config_path.parent / f"{setup.prefix}.ledger.jsonl"
    records = [json.loads(line) for line in ledger.read_text(encoding="utf-8").splitlines()]
    return sum(1 for r in records if r["execution_status"] == "succeeded" and not r["replayed"])


@pytest.mark.parametrize(("point", "idempotent", "calls", "end"), CASES)
async def test_a_crash_at_each_point_ends_as_the_matrix_says_and_never_runs_twice(
    launcher: Launcher,
    backend: tuple[str, LoopbackBackend],
    store_kind: str,
    point: str,
    idempotent: bool,
    calls: int,
    end: str,
) -> None:
    backend_url, loopback = backend
    setup = _config(launcher, store_kind)
    tool = registration("billing.refund", backend_url + PATH, idempotent=idempotent)
    tool["adapter"]["timeout_s"] = TOOL_TIMEOUT_S
    proposal = {"tool": "billing.refund", "args": {"payment_id": "P-7"}, "idempotency_key": point}

    (doomed,) = launcher.start(setup, 1, env={CRASH_ENV: point})
    async with httpx.AsyncClient(timeout=30) as http:
        created = await http.post(doomed.url + "/v1/tools", json=tool, headers=ADMIN)
        assert created.status_code == 201, created.text
        with pytest.raises(httpx.TransportError):  # the process dies before it answers
            await http.post(doomed.url + "/v1/proposals", json=proposal, headers=BILLING)
    assert doomed.proc.wait(timeout=10) == CRASH_EXIT_CODE, doomed.log_tail()
    assert f"crash point {point}" in doomed.log_tail()
    assert len(loopback.hits_on(PATH)) == calls

    (broker,) = launcher.start(setup, 1)
    async with httpx.AsyncClient(timeout=30) as http:
        if end != "replay":
            # Nobody retries the key: the completer finds the stuck claim after its lease.
            await eventually(
                lambda: _stuck_completed(http, broker),
                timeout_s=TOOL_TIMEOUT_S + LEASE_MARGIN_S + 10,
                what="the completer to resolve the stuck claim",
            )
        retry = await http.post(broker.url + "/v1/proposals", json=proposal, headers=BILLING)
        again = await http.post(broker.url + "/v1/proposals", json=proposal, headers=BILLING)
    broker.stop()

    if end == "outcome_unknown":
        for answer in (retry, again):
            assert answer.status_code == 409, answer.text
            assert answer.json()["code"] == "outcome_unknown", answer.text
        assert len(loopback.hits_on(PATH)) == calls  # never run again
    elif end == "replay":
        assert retry.status_code == 200, retry.text
        assert retry.headers.get("idempotent-replayed") == "true"
        assert retry.json()["execution"]["status"] == "succeeded"
        assert len(loopback.hits_on(PATH)) == calls
    else:  # executed: released, then run exactly once, and replayed after that
        assert retry.status_code == 200, retry.text
        assert retry.json()["execution"]["status"] == "succeeded"
        assert again.headers.get("idempotent-replayed") == "true", again.text
        assert len(loopback.hits_on(PATH)) == calls + 1
    report = _verify_ledger(setup)
    assert report["ok"] is True, report
    # The ledger knows an execution only once recorded: never more often than the backend saw.
    recorded = int(point in ("after_record", "after_settle")) + int(end == "executed")
    assert _executions_in_ledger(setup) == recorded


async def test_a_misspelled_crash_point_refuses_to_start(launcher: Launcher) -> None:
    setup = _config(launcher, "sqlite")
    with pytest.raises(RuntimeError) as refused:
        launcher.start(setup, 1, env={CRASH_ENV: "after_lunch"})
    assert "names no crash point" in str(refused.value)
