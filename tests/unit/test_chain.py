"""The validator chain's verdicts, step by step: what the ledger's ``validators`` list records.

Each path through ``Pipeline.decide`` is pinned by the steps it ran and how each one ended, so
the chain's order (the README's) and its step names cannot drift unnoticed. A step records one
name whether it passes or refuses.
"""

from __future__ import annotations

from typing import Any

import pytest

from broker.auth import Authenticator
from broker.config import parse_config
from broker.model import Principal, ProposalRequest
from broker.pipeline import Decided
from broker.pipeline.orchestrator import Pipeline
from broker.stores import ClaimRequest, Conflict, MemoryStore, Replay
from broker.stores.base import Admission, AdmitResult
from broker.taxonomy import StoreUnavailableError
from broker.tools.runtime import build_registry
from tests.conftest import Clock
from tests.fakes import FAKE, FakeBackend, fake_raw

PASSED = [
    ("mediation", "pass"),
    ("tool_authz", "pass"),
    ("schema", "pass"),
    ("idempotency_key", "pass"),
    ("preconditions", "pass"),
]


class _StoreDown(MemoryStore):
    """A store that cannot be reached for the ``failing`` operations."""

    def __init__(self, *failing: str) -> None:
        super().__init__()
        self._failing = failing

    async def admit(self, admission: Admission, *, now: float, dry_run: bool) -> AdmitResult:
        if "admit" in self._failing:
            raise StoreUnavailableError("down")
        return await super().admit(admission, now=now, dry_run=dry_run)

    async def lookup(self, claim: ClaimRequest, *, now: float) -> Replay | Conflict | None:
        if "lookup" in self._failing:
            raise StoreUnavailableError("down")
        return await super().lookup(claim, now=now)


class Harness:
    """A pipeline over the fake backend (route ``ops``), without HTTP or a ledger."""

    def __init__(self, raw: dict[str, Any] | None = None, store: MemoryStore | None = None):
        config = parse_config(raw or fake_raw())
        self.fake = FakeBackend()
        registry = build_registry(config, secrets={}, backends={"fake": self.fake})
        self.pipeline = Pipeline(
            config=config, registry=registry, store=store or MemoryStore(), clock=Clock(1e9)
        )
        self.principal: Principal = Authenticator(config, signing_key=None).authenticate(
            FAKE["Authorization"]
        )

    async def decide(self, tool: str = "ok", key: str | None = "k-1", **fields: Any) -> Decided:
        return await self.pipeline.decide(self.principal, _request(tool, key, **fields))

    async def propose(self, tool: str = "ok", key: str | None = "k-1", **fields: Any) -> int:
        answer = await self.pipeline.propose(self.principal, _request(tool, key, **fields))
        return answer.status


def _request(tool: str, key: str | None, **fields: Any) -> ProposalRequest:
    fields.setdefault("args", {"n": 1})
    return ProposalRequest(tool=tool, idempotency_key=key, **fields)


def _steps(decided: Decided) -> list[tuple[str, str]]:
    return [(v.name, v.verdict) for v in decided.verdicts]


async def test_an_approved_proposal_passes_every_step_in_the_documented_order() -> None:
    decided = await Harness().decide("gated")
    assert _steps(decided) == [*PASSED, ("admission", "pass")]
    assert decided.admitted is not None and decided.rejection is None


@pytest.mark.parametrize(
    ("fields", "steps"),
    [
        ({"tool": "no_such_tool"}, [*PASSED[:1], ("tool_authz", "reject:unknown_tool")]),
        ({"args": {"n": "one"}}, [*PASSED[:2], ("schema", "reject:schema_invalid")]),
        ({"preconditions": ["nonsense"]}, [*PASSED[:2], ("schema", "reject:unknown_precondition")]),
        ({"key": None}, [*PASSED[:3], ("idempotency_key", "reject:idempotency_key_missing")]),
        ({"key": "\n"}, [*PASSED[:3], ("idempotency_key", "reject:idempotency_key_invalid")]),
    ],
    ids=["unknown-tool", "bad-args", "unknown-precondition", "missing-key", "invalid-key"],
)
async def test_stateless_rejections_stop_the_chain_where_they_happen(
    fields: dict[str, Any], steps: list[tuple[str, str]]
) -> None:
    decided = await Harness().decide(**fields)
    assert _steps(decided) == steps
    assert decided.rejection is not None and decided.admitted is None


async def test_a_tool_outside_the_route_is_refused_first() -> None:
    raw = fake_raw()
    raw["routes"]["ops"]["tools"].remove("ok")
    decided = await Harness(raw).decide("ok")
    assert _steps(decided) == [*PASSED[:1], ("tool_authz", "reject:tool_not_allowed")]


async def test_a_failed_precondition_is_rejected_after_the_key_is_checked() -> None:
    harness = Harness()
    harness.fake.gate_open = False
    decided = await harness.decide("gated")
    assert _steps(decided) == [*PASSED[:4], ("preconditions", "reject:precondition_failed")]


async def test_a_failed_precondition_still_replays_an_earlier_answer_under_its_key() -> None:
    harness = Harness()
    assert await harness.propose("gated") == 200
    harness.fake.gate_open = False
    decided = await harness.decide("gated")
    assert _steps(decided) == [*PASSED[:4], ("preconditions", "replay")]
    assert decided.replay is not None
    reused = await harness.decide("gated", args={"n": 2})
    assert _steps(reused) == [*PASSED[:4], ("preconditions", "reject:idempotency_key_reused")]
    dry = await harness.decide("gated", dry_run=True)
    assert _steps(dry) == [*PASSED[:4], ("preconditions", "reject:precondition_failed")]


async def test_admission_replays_refuses_a_key_in_flight_and_counts_limits() -> None:
    raw = fake_raw(rate_limits={"twice": {"limit": 2, "window_s": 60}})
    raw["tools"]["limited"] = {**raw["tools"]["ok"], "rate_limits": ["twice"]}
    raw["routes"]["ops"]["tools"].append("limited")
    harness = Harness(raw)
    assert await harness.propose() == 200
    replay = await harness.decide()
    assert _steps(replay) == [*PASSED, ("admission", "replay")]
    assert replay.replay is not None

    assert (await harness.decide(key="k-2")).admitted is not None
    in_flight = await harness.decide(key="k-2")
    assert _steps(in_flight) == [*PASSED, ("admission", "reject:idempotency_in_progress")]

    for n in range(2):
        assert (await harness.decide("limited", key=f"r-{n}")).admitted is not None
    limited = await harness.decide("limited", key="r-2")
    assert _steps(limited) == [*PASSED, ("admission", "reject:rate_limited")]


async def test_the_implied_write_policy_runs_only_on_routes_that_require_it() -> None:
    raw = fake_raw()
    raw["routes"]["ops"]["require_implied_write_check"] = True
    harness = Harness(raw)
    blocked = await harness.decide()
    assert _steps(blocked) == [*PASSED[:3], ("policy", "reject:policy_blocked")]
    checked = await harness.decide(session_id="s-1")
    assert _steps(checked) == [*PASSED[:3], ("policy", "pass"), *PASSED[3:], ("admission", "pass")]
    elsewhere = await Harness().decide(session_id="s-1")
    assert _steps(elsewhere) == [*PASSED, ("admission", "pass")]


async def test_an_unreachable_store_fails_closed_at_admission() -> None:
    decided = await Harness(store=_StoreDown("admit")).decide()
    assert _steps(decided) == [*PASSED, ("admission", "reject:store_unavailable")]
    assert decided.rejection is not None and decided.rejection.retry_after_s == 1.0


async def test_an_unreachable_store_fails_closed_when_a_failed_precondition_reads_its_key() -> None:
    harness = Harness(store=_StoreDown("lookup"))
    harness.fake.gate_open = False
    decided = await harness.decide("gated")
    # Recorded under the step that was running: admission never ran.
    assert _steps(decided) == [*PASSED[:4], ("preconditions", "reject:store_unavailable")]


async def test_a_dry_run_route_dry_runs_every_proposal_and_other_routes_do_not() -> None:
    raw = fake_raw()
    raw["routes"]["ops"]["dry_run"] = True
    assert (await Harness(raw).decide()).meta.dry_run is True
    assert (await Harness().decide()).meta.dry_run is False
    assert (await Harness().decide(dry_run=True)).meta.dry_run is True
