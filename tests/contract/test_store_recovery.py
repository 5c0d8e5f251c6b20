"""The dispatch mark and recovery, for every Store: what a claim ends as once its process died.

A claim is marked dispatched just before its adapter is called. Past its lease, a claim never
marked is released with its budget charges refunded (its call never left); a marked one is
settled from its proposal's recorded outcome when the ledger has one, and otherwise ends as it
always did (idempotent: released; otherwise ``outcome_unknown``). The recorded outcomes here
come from a dict standing in for the ledger; ``tests/integration/test_crash_points.py`` and
``tests/unit/test_recovery.py`` read real ledgers.
"""

from __future__ import annotations

import pytest

from broker.ledger.errors import LedgerUnavailableError
from broker.stores import (
    Conflict,
    Limited,
    RateHit,
    RecordedOutcome,
    Replay,
    Settlement,
    Store,
    StoredResponse,
    StuckClaims,
)
from broker.stores.redis import RedisStore
from tests.contract.test_store_contract import (
    DAY,
    DENIED,
    OK,
    T0,
    adm,
    admit,
    budget,
    claim,
    room,
    sent,
    settle,
    ticket_of,
)

HIT = RateHit(name="calls", scope="tenant:acme|route:billing", limit=2, window_s=3600.0)


class Recorded:
    """Recorded outcomes by proposal id, and which ids were asked for (the ledger's part)."""

    def __init__(self, outcomes: dict[str, RecordedOutcome] | None = None) -> None:
        self.outcomes = dict(outcomes or {})
        self.asked: list[str] = []
        self.down = False

    async def outcome_of(self, proposal_id: str) -> RecordedOutcome | None:
        self.asked.append(proposal_id)
        if self.down:
            raise LedgerUnavailableError("the ledger cannot be read")
        return self.outcomes.get(proposal_id)


def outcome(settlement: Settlement, response: StoredResponse = OK) -> RecordedOutcome:
    return RecordedOutcome(settlement=settlement, response=response, ttl_s=DAY)


async def test_a_claim_never_dispatched_is_released_and_its_charges_refunded(store: Store) -> None:
    c, charge = claim("unsent", lease_s=30, idempotent=False), budget(4)
    ticket_of(await admit(store, adm(c, charges=(charge,), hits=(HIT,))))
    assert await room(store, charge, T0 + 1) == 6
    # Past the lease, the retry finds the key free: the call never left, so it runs now.
    retried = ticket_of(await admit(store, adm(c, charges=(charge,)), T0 + 31))
    assert await room(store, charge, T0 + 32) == 6  # the first charge given back, the new one held
    assert await store.dispatch(retried, proposal_id="prp_retry", now=T0 + 32)
    assert await settle(store, retried, Settlement.SUCCEEDED, at=T0 + 33)
    assert await admit(store, adm(c, charges=(charge,)), T0 + 34) == Replay(OK)
    # A release gives back budgets, not rate-limit hits (as a transient failure's does): the
    # abandoned claim's hit still counts, so one more call fits the limit of two, not two.
    ticket_of(await admit(store, adm(None, hits=(HIT,)), T0 + 35))
    limited = await admit(store, adm(None, hits=(HIT,)), T0 + 36)
    assert isinstance(limited, Limited) and limited.kind == "rate"


async def test_the_completer_releases_a_claim_never_dispatched_with_its_charges(
    store: Store,
) -> None:
    c, charge = claim("unsent", lease_s=30, idempotent=False), budget(4)
    ticket_of(await admit(store, adm(c, charges=(charge,))))
    marked = claim("marked", lease_s=30, idempotent=False)
    await sent(store, await admit(store, adm(marked, charges=(charge,))))
    assert await room(store, charge, T0 + 1) == 2
    assert await store.complete_stuck(now=T0 + 31, limit=100) == StuckClaims(released=1, unknown=1)
    assert await room(store, charge, T0 + 32) == 6  # the unsent one's charge only
    assert await store.lookup(c, now=T0 + 32) is None
    assert await store.lookup(marked, now=T0 + 32) == Conflict("outcome_unknown")


async def test_dispatch_is_refused_once_the_claim_is_no_longer_ours(store: Store) -> None:
    c = claim("taken", lease_s=30, idempotent=True)
    stale = ticket_of(await admit(store, adm(c)))
    fresh = ticket_of(await admit(store, adm(c), T0 + 31))  # the lease lapsed: taken over
    assert not await store.dispatch(stale, proposal_id="prp_stale", now=T0 + 32)
    assert await store.dispatch(fresh, proposal_id="prp_fresh", now=T0 + 32)
    assert await settle(store, fresh, Settlement.SUCCEEDED, at=T0 + 33)
    assert not await store.dispatch(fresh, proposal_id="prp_fresh", now=T0 + 34)  # settled
    # A ticket without a claim has nothing to mark, and may always be sent.
    assert await store.dispatch(ticket_of(await admit(store, adm(None))), proposal_id="p", now=T0)


async def test_a_late_dispatch_wins_when_nobody_saw_the_lease_lapse(store: Store) -> None:
    c = claim("late", lease_s=30, idempotent=False)
    ticket = ticket_of(await admit(store, adm(c)))
    assert await store.dispatch(ticket, proposal_id="prp_late", now=T0 + 40)
    assert await store.lookup(c, now=T0 + 41) == Conflict("outcome_unknown")


@pytest.mark.parametrize("idempotent", [False, True])
async def test_a_lapsed_dispatched_claim_is_settled_from_its_recorded_success(
    store: Store, idempotent: bool
) -> None:
    c, charge = claim("recorded", lease_s=30, idempotent=idempotent), budget(4)
    ticket = await sent(store, await admit(store, adm(c, charges=(charge,))))
    recorded = Recorded({f"prp_sent_{ticket.owner}": outcome(Settlement.SUCCEEDED)})
    store.recover_from(recorded)
    # The retry finds the lapsed claim, the ledger says it succeeded: it replays, never reruns.
    assert await admit(store, adm(c, charges=(charge,)), T0 + 31) == Replay(OK)
    assert recorded.asked == [f"prp_sent_{ticket.owner}"]
    assert await room(store, charge, T0 + 32) == 6  # a success keeps its charge
    assert await store.complete_stuck(now=T0 + 33, limit=100) == StuckClaims()
    assert await store.unknown_keys() == 0
    # It replays for the idempotency TTL from the recovery, like any settled key.
    assert await admit(store, adm(c), T0 + 31 + DAY - 1) == Replay(OK)


async def test_the_completer_settles_from_recorded_outcomes(store: Store) -> None:
    charge = budget(1)
    claims = {
        name: claim(name, lease_s=30, idempotent=False)
        for name in ("succeeded", "definite", "transient", "unrecorded")
    }
    tickets = {
        name: await sent(store, await admit(store, adm(c, charges=(charge,))))
        for name, c in claims.items()
    }
    recorded = Recorded(
        {
            f"prp_sent_{tickets['succeeded'].owner}": outcome(Settlement.SUCCEEDED),
            f"prp_sent_{tickets['definite'].owner}": outcome(Settlement.DEFINITE_FAILURE, DENIED),
            f"prp_sent_{tickets['transient'].owner}": outcome(Settlement.TRANSIENT_FAILURE),
        }
    )
    store.recover_from(recorded)
    assert await room(store, charge, T0 + 1) == 6
    done = await store.complete_stuck(now=T0 + 31, limit=100)
    assert done == StuckClaims(released=1, unknown=1, settled=2)
    assert sorted(recorded.asked) == sorted(f"prp_sent_{t.owner}" for t in tickets.values())
    at = T0 + 32
    assert await store.lookup(claims["succeeded"], now=at) == Replay(OK)
    assert await store.lookup(claims["definite"], now=at) == Replay(DENIED)
    assert await store.lookup(claims["transient"], now=at) is None  # released: a retry runs it
    assert await store.lookup(claims["unrecorded"], now=at) == Conflict("outcome_unknown")
    # Failures give their charges back, as settling them would have; the rest stay spent.
    assert await room(store, charge, at) == 8


async def test_an_unreadable_ledger_leaves_the_lapsed_claim_as_it_was(store: Store) -> None:
    from broker.taxonomy import StoreUnavailableError

    c = claim("blind", lease_s=30, idempotent=False)
    ticket = await sent(store, await admit(store, adm(c)))
    recorded = Recorded({f"prp_sent_{ticket.owner}": outcome(Settlement.SUCCEEDED)})
    recorded.down = True
    store.recover_from(recorded)
    with pytest.raises(StoreUnavailableError):
        await admit(store, adm(c), T0 + 31)
    with pytest.raises(StoreUnavailableError):
        await store.complete_stuck(now=T0 + 31, limit=100)
    recorded.down = False  # once it reads again, the record is found and replayed
    assert await admit(store, adm(c), T0 + 32) == Replay(OK)


async def test_a_redis_claim_written_before_the_mark_counts_as_dispatched(store: Store) -> None:
    if not isinstance(store, RedisStore):
        pytest.skip("the SQLite file's migration: tests/unit/test_sqlite_store.py")
    c = claim("older", lease_s=30, idempotent=False)
    ticket_of(await admit(store, adm(c)))
    await store.client.hdel(store.keys.idem(c), "d")  # as a broker without the mark wrote it
    assert await admit(store, adm(c), T0 + 31) == Conflict("outcome_unknown")
