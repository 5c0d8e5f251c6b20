"""Crash a broker process at a named point, start it again on the same state, and read back what
it ends as: the steps the crash-point tests share (``test_crash_points*.py``).

A broker started with ``BROKER_TEST_CRASH_AT=<point>`` dies (``os._exit``) the first time a
proposal reaches that point (``broker.faults``); the next one starts without the variable.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from broker.faults import CRASH_ENV, CRASH_EXIT_CODE
from tests.integration.procs import (
    ADMIN,
    BILLING,
    ROOT,
    BrokerProcess,
    Launcher,
    Setup,
    eventually,
)

TOOL_TIMEOUT_S = 1.0
LEASE_MARGIN_S = 0.5  # the lease: the tool's timeout plus this
COMPLETER_INTERVAL_S = 0.2


def crash_config(
    launcher: Launcher,
    store_kind: str,
    *,
    ledger: str = "file",
    edit: Callable[[dict[str, Any]], None] | None = None,
) -> Setup:
    """The demo config on SQLite (no Redis anywhere) or Redis, a fast completer, short leases."""

    def edited(data: dict[str, Any]) -> None:
        service = data["service"]
        service["completer_interval_s"] = COMPLETER_INTERVAL_S
        service["ledger"] = ledger
        if store_kind == "sqlite":  # the SQLite file beside the ledger
            del service["redis_url"]
        if edit is not None:
            edit(data)

    return launcher.config(edit=edited, shared_numbers=False, lease_margin_s=LEASE_MARGIN_S)


async def crash(
    launcher: Launcher,
    setup: Setup,
    point: str,
    proposal: dict[str, Any],
    *,
    register: tuple[dict[str, Any], ...] = (),
) -> None:
    """Start a broker armed at ``point``, register ``register``, send ``proposal``: it dies."""
    (doomed,) = launcher.start(setup, 1, env={CRASH_ENV: point})
    async with httpx.AsyncClient(timeout=30) as http:
        for tool in register:
            created = await http.post(doomed.url + "/v1/tools", json=tool, headers=ADMIN)
            assert created.status_code == 201, created.text
        with pytest.raises(httpx.TransportError):  # the process dies before it answers
            await http.post(doomed.url + "/v1/proposals", json=proposal, headers=BILLING)
    assert doomed.proc.wait(timeout=10) == CRASH_EXIT_CODE, doomed.log_tail()
    assert f"crash point {point}" in doomed.log_tail()


@dataclass
class Aftermath:
    """What the restarted broker answered to the crashed proposal, sent again twice."""

    retry: httpx.Response
    again: httpx.Response
    completed: dict[str, float]
    """``broker_stuck_claims_completed_total`` by outcome, before the retry."""


MAYBE_RELEASED = "released, if it was in the file"
"""A crash before anything was sent, on SQLite: an admission does not wait for its own commit
(the dispatch mark does), so the claim may or may not have reached the file. If it did, the
completer releases it; if not, nothing is stuck. Either way the retry runs the call once."""

MAYBE_SETTLED = "settled, if its settlement was not in the file"
"""A crash after a recorded call was settled, on SQLite: that settlement does not wait for its
commit (the ledger record stands for it), so the file may still hold the claim dispatched. Then
the completer settles it from the record; if not, nothing is stuck. Either way the retry
replays the recorded answer."""

_MAYBE = {MAYBE_RELEASED: "released", MAYBE_SETTLED: "settled"}


async def restart_and_retry(
    launcher: Launcher, setup: Setup, proposal: dict[str, Any], *, completion: str | None
) -> Aftermath:
    """Start a broker on the crashed one's state; wait until its completer has completed the
    stuck claim as ``completion`` (``None``: the key was settled, nothing is stuck;
    :data:`MAYBE_RELEASED` and :data:`MAYBE_SETTLED`: completed so if the file held a claim to
    complete, waited for as long as a lease lasts), then send the proposal again, twice (nobody
    retried it before the completer's pass)."""
    (broker,) = launcher.start(setup, 1)
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            if completion in _MAYBE:
                outcome = _MAYBE[completion]
                with contextlib.suppress(TimeoutError):  # nothing was stuck in the file
                    await eventually(
                        lambda: _completed_as(http, broker, outcome),
                        timeout_s=TOOL_TIMEOUT_S + LEASE_MARGIN_S + 4 * COMPLETER_INTERVAL_S,
                        what=f"the completer to complete a claim as {outcome}, if one was stuck",
                    )
            elif completion is not None:
                await eventually(
                    lambda: _completed_as(http, broker, completion),
                    timeout_s=TOOL_TIMEOUT_S + LEASE_MARGIN_S + 10,
                    what=f"the completer to complete the stuck claim as {completion}",
                )
            completed = await completions(http, broker)
            retry = await http.post(broker.url + "/v1/proposals", json=proposal, headers=BILLING)
            again = await http.post(broker.url + "/v1/proposals", json=proposal, headers=BILLING)
    finally:
        broker.stop()
    return Aftermath(retry, again, completed)


async def completions(http: httpx.AsyncClient, broker: BrokerProcess) -> dict[str, float]:
    """``broker_stuck_claims_completed_total`` by its ``outcome`` label."""
    text = (await http.get(broker.url + "/metrics")).text
    found: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("broker_stuck_claims_completed_total{"):
            labels, value = line.rsplit(" ", 1)
            outcome = labels.split('outcome="', 1)[1].split('"', 1)[0]
            found[outcome] = float(value)
    return found


async def _completed_as(http: httpx.AsyncClient, broker: BrokerProcess, outcome: str) -> bool:
    return (await completions(http, broker)).get(outcome, 0.0) >= 1


def assert_ended(end: str, after: Aftermath, calls: Callable[[], int], calls_before: int) -> None:
    """The retry ended as ``end`` (replay, outcome_unknown, executed) and the backend, counted by
    ``calls``, saw exactly what that end allows."""
    retry, again = after.retry, after.again
    if end == "outcome_unknown":
        for answer in (retry, again):
            assert answer.status_code == 409, answer.text
            assert answer.json()["code"] == "outcome_unknown", answer.text
        assert calls() == calls_before  # never run again
    elif end == "replay":
        for answer in (retry, again):
            assert answer.status_code == 200, answer.text
            assert answer.headers.get("idempotent-replayed") == "true", answer.text
            assert answer.json()["execution"]["status"] == "succeeded", answer.text
        assert calls() == calls_before
    else:  # executed: released, then run exactly once, and replayed after that
        assert end == "executed", end
        assert retry.status_code == 200, retry.text
        assert retry.json()["execution"]["status"] == "succeeded", retry.text
        assert again.headers.get("idempotent-replayed") == "true", again.text
        assert calls() == calls_before + 1


def ledger_records(setup: Setup) -> list[dict[str, Any]]:
    ledger = setup.config_path.parent / f"{setup.prefix}.ledger.jsonl"
    return [json.loads(line) for line in ledger.read_text(encoding="utf-8").splitlines()]


def verify_ledger(setup: Setup, *, ledger: str = "file") -> dict[str, Any]:
    """``broker ledger verify --json`` over what both processes wrote; asserts it is ok."""
    command = [sys.executable, "-m", "broker", "ledger", "verify", "--json"]
    if ledger == "file":
        command += ["--path", str(setup.config_path.parent / f"{setup.prefix}.ledger.jsonl")]
    else:
        command += ["--redis-url", setup.redis_url, "--prefix", f"{setup.prefix}:ledger"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    assert report["ok"] is True, report
    return report
