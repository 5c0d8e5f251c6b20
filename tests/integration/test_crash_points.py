"""Every crash point of an approved proposal, on both stores: real processes, killed for real.

A broker started with ``BROKER_TEST_CRASH_AT=<point>`` dies (``os._exit``) the first time a
proposal reaches that point (``broker.faults``). It is started again on the same state, without
the variable, and the test checks what the reliability matrix (§2.1) asks of that crash:

* the claim was taken but its call never left (``after_claim``, ``after_admission``: the claim
  was never marked dispatched): the completer releases it without anyone retrying the key, and
  the retry runs it once, whatever the tool (on SQLite the claim may not have reached the file
  yet, an admission not waiting for its own commit: then nothing is stuck, and the retry runs
  it once all the same);
* the call may have reached the backend and nothing recorded how it ended (``after_send``,
  ``after_result``): ``outcome_unknown`` for a non-idempotent tool, never run again; an
  idempotent one is released and the retry runs it once more;
* the ledger recorded how it ended but the key was not settled (``after_record``): the completer
  settles the key from the ledger record, and the retry replays it;
* the key was settled (``after_settle``): the retry replays the stored answer (on SQLite the
  settlement of a recorded call may not have reached the file yet, not waiting for its commit:
  then the completer settles it from the ledger record, as after ``after_record``).

Executions are counted where they happen, at a loopback HTTP backend; the ledger written by both
processes is verified with ``broker ledger verify`` afterwards. The Python and MCP adapters'
``after_send``: ``test_crash_points_adapters.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.faults import CRASH_ENV
from tests.integration.crashes import (
    MAYBE_RELEASED,
    MAYBE_SETTLED,
    TOOL_TIMEOUT_S,
    assert_ended,
    crash,
    crash_config,
    ledger_records,
    restart_and_retry,
    verify_ledger,
)
from tests.integration.procs import REDIS_URL, Launcher, launcher_for, redis_reachable
from tests.loopback import LoopbackBackend, running
from tests.registrations import registration

PATH = "/tools/refund"

# point -> (backend calls the crashed proposal made, how a retry of its key ends, and how the
# completer completes the stuck claim first: None when the key was settled before the crash)
NON_IDEMPOTENT = {
    "after_claim": (0, "executed", "released"),
    "after_admission": (0, "executed", "released"),
    "after_send": (1, "outcome_unknown", "outcome_unknown"),
    "after_result": (1, "outcome_unknown", "outcome_unknown"),
    "after_record": (1, "replay", "settled"),
    "after_settle": (1, "replay", None),
}
# An idempotent tool's claim is released whenever nothing recorded how its call ended.
IDEMPOTENT = {
    "after_claim": (0, "executed", "released"),
    "after_admission": (0, "executed", "released"),
    "after_send": (1, "executed", "released"),
    "after_record": (1, "replay", "settled"),
}

NOT_IN_THE_FILE_YET = {
    "after_claim": MAYBE_RELEASED,
    "after_admission": MAYBE_RELEASED,
    "after_settle": MAYBE_SETTLED,
}
"""Points where on SQLite the last change may not have been committed yet, and how the completer
then completes the claim: before the dispatch mark (an admission does not wait for its commit),
and after a recorded call's settlement (which does not wait for its commit either)."""

CASES = [
    pytest.param(point, False, *expected, id=f"{point}-non-idempotent")
    for point, expected in NON_IDEMPOTENT.items()
] + [
    pytest.param(point, True, *expected, id=f"{point}-idempotent")
    for point, expected in IDEMPOTENT.items()
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


@pytest.mark.parametrize(("point", "idempotent", "calls", "end", "completion"), CASES)
async def test_a_crash_at_each_point_ends_as_the_matrix_says_and_never_runs_twice(
    launcher: Launcher,
    backend: tuple[str, LoopbackBackend],
    store_kind: str,
    point: str,
    idempotent: bool,
    calls: int,
    end: str,
    completion: str | None,
) -> None:
    backend_url, loopback = backend
    setup = crash_config(launcher, store_kind)
    tool = registration("billing.refund", backend_url + PATH, idempotent=idempotent)
    tool["adapter"]["timeout_s"] = TOOL_TIMEOUT_S
    proposal = {"tool": "billing.refund", "args": {"payment_id": "P-7"}, "idempotency_key": point}

    await crash(launcher, setup, point, proposal, register=(tool,))
    assert len(loopback.hits_on(PATH)) == calls

    if store_kind == "sqlite" and point in NOT_IN_THE_FILE_YET:
        completion = NOT_IN_THE_FILE_YET[point]
    after = await restart_and_retry(launcher, setup, proposal, completion=completion)
    assert_ended(end, after, lambda: len(loopback.hits_on(PATH)), calls)
    # The completer counted what it did, as what it did: nothing else was stuck.
    none = {"released": 0, "settled": 0, "outcome_unknown": 0}
    if completion in (MAYBE_RELEASED, MAYBE_SETTLED):
        done = "released" if completion == MAYBE_RELEASED else "settled"
        assert after.completed in (none, none | {done: 1.0}), after.completed
    elif completion is not None:
        assert after.completed == none | {completion: 1.0}, after.completed
    verify_ledger(setup)
    # The ledger knows an execution only once recorded: never more often than the backend saw.
    records = ledger_records(setup)
    executions = [r for r in records if r["execution_status"] == "succeeded" and not r["replayed"]]
    recorded = int(point in ("after_record", "after_settle")) + int(end == "executed")
    assert len(executions) == recorded
    if end == "executed" and calls:  # sent twice: with one key, so the backend can dedupe
        keys = {_header(hit.headers, "idempotency-key") for hit in loopback.hits_on(PATH)}
        assert len(keys) == 1 and None not in keys, keys
    if end == "replay":  # the replay is the crashed proposal's own recorded answer
        (crashed,) = executions
        assert after.retry.json()["proposal_id"] == crashed["proposal_id"]
        assert after.retry.json()["audit"]["seq"] == crashed["seq"]


def _header(headers: dict[str, str], name: str) -> str | None:
    return next((value for key, value in headers.items() if key.lower() == name), None)


async def test_after_the_record_a_redis_ledger_settles_the_key_too(
    launcher: Launcher, backend: tuple[str, LoopbackBackend]
) -> None:
    if not redis_reachable(REDIS_URL):
        pytest.skip(f"no Redis at {REDIS_URL}")
    backend_url, loopback = backend
    setup = crash_config(launcher, "redis", ledger="redis")
    tool = registration("billing.refund", backend_url + PATH, idempotent=False)
    tool["adapter"]["timeout_s"] = TOOL_TIMEOUT_S
    proposal = {"tool": "billing.refund", "args": {"payment_id": "P-8"}, "idempotency_key": "rl-1"}

    await crash(launcher, setup, "after_record", proposal, register=(tool,))
    after = await restart_and_retry(launcher, setup, proposal, completion="settled")
    assert_ended("replay", after, lambda: len(loopback.hits_on(PATH)), 1)
    report = verify_ledger(setup, ledger="redis")
    assert report["records"] >= 3  # the crashed proposal's record, then the two replays


async def test_a_misspelled_crash_point_refuses_to_start(launcher: Launcher) -> None:
    setup = crash_config(launcher, "sqlite")
    with pytest.raises(RuntimeError) as refused:
        launcher.start(setup, 1, env={CRASH_ENV: "after_lunch"})
    assert "names no crash point" in str(refused.value)
