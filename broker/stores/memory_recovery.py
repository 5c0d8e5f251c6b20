"""How a memory store's claim ends: settled by its owner, or, once its lease lapsed, settled
from its proposal's ledger record, released, or outcome_unknown.

The base of :class:`~broker.stores.memory.MemoryStore` (so of the SQLite store too), which keeps
the state read here and calls these on every admission, look-up and settlement; kept apart so
the memory store's module holds its calls, and this one the rules for claims whose process may
have died. Redis does the same in its scripts and ``broker.stores.redis_recovery``.
"""

from __future__ import annotations

from broker.stores.base import (
    UNKNOWN_HOLD_S,
    BudgetCharge,
    OutcomeSource,
    Settlement,
    StoredResponse,
)
from broker.stores.memory_records import BudgetCounter, Completion, IdemKey, IdemRecord

__all__ = ["REFUNDED", "MemoryRecovery"]

REFUNDED = frozenset({Settlement.DEFINITE_FAILURE, Settlement.TRANSIENT_FAILURE})
"""Settlements that give the charges back (a set: enum look-ups cost on every settle)."""


class MemoryRecovery:
    """A claim's end, and the recovery of lapsed claims, over the memory store's state (which
    :class:`~broker.stores.memory.MemoryStore` builds)."""

    _idem: dict[IdemKey, IdemRecord]
    _claimed: dict[IdemKey, None]
    _budgets: dict[tuple[str, str, int], BudgetCounter]
    _unknown: set[IdemKey]
    _outcomes: OutcomeSource | None

    async def _complete_stuck(self, now: float, limit: int) -> list[tuple[IdemKey, Completion]]:
        """Each claim past its lease, resolved as the next look at it would: settled from its
        ledger record, released, or now outcome_unknown."""
        stuck: list[IdemKey] = []
        for key in list(self._claimed):
            record = self._idem.get(key)
            if record is None or record.state != "in_progress":
                del self._claimed[key]  # settled or resolved since
            elif record.lease_until <= now and len(stuck) < limit:
                stuck.append(key)
        completed: list[tuple[IdemKey, Completion]] = []
        for key in stuck:
            recovered = await self._recover_recorded(key, now)
            if recovered is not None:
                completed.append((key, recovered))
                continue
            record = self._idem.get(key)
            if record is None or record.state != "in_progress" or record.lease_until > now:
                continue  # settled meanwhile, by its owner or a retry
            gone = self._live_record(key, now) is None
            completed.append((key, "released" if gone else "unknown"))
        return completed

    def _finish(
        self,
        key: tuple[str, str, str],
        idem: IdemRecord,
        settlement: Settlement,
        response: StoredResponse,
        ttl_s: int,
        now: float,
    ) -> None:
        """An in-progress record's end, as its settlement says (charges are the caller's)."""
        idem.charges = ()
        if settlement is Settlement.TRANSIENT_FAILURE:
            del self._idem[key]
        elif settlement is Settlement.UNKNOWN:
            idem.state, idem.owner, idem.expires_at = "outcome_unknown", None, now + ttl_s
            self._unknown.add(key)
        else:
            idem.state, idem.owner, idem.response = "completed", None, response
            idem.expires_at = now + ttl_s

    async def _recover_recorded(self, key: IdemKey, now: float) -> Completion | None:
        """Settle a dispatched claim whose lease lapsed from its proposal's final ledger record,
        if there is one: the process died after recording how the call ended, before settling.

        The look-up awaits, so the claim is checked again after it: only the same lapsed claim
        (same owner) is settled, and only once. How it ended (a recorded transient failure is
        released), or ``None`` when it was not settled here."""
        record = self._idem.get(key)
        if (
            record is None
            or self._outcomes is None
            or record.state != "in_progress"
            or record.lease_until > now
            or not record.dispatched
            or record.proposal_id is None
        ):
            return None
        owner = record.owner
        found = await self._outcomes.outcome_of(record.proposal_id)
        record = self._idem.get(key)
        if found is None or found.settlement is Settlement.UNKNOWN:
            return None
        if record is None or record.owner != owner or record.state != "in_progress":
            return None
        charges = record.charges if found.settlement in REFUNDED else ()
        self._refund(charges)
        self._claimed.pop(key, None)
        self._unknown.discard(key)  # counted as unknown from the file, until this look
        self._finish(key, record, found.settlement, found.response, found.ttl_s, now)
        self._changed(key, charges)
        return "released" if found.settlement is Settlement.TRANSIENT_FAILURE else "settled"

    def _refund(self, charges: tuple[tuple[BudgetCharge, int], ...]) -> None:
        for charge, window in charges:
            counter = self._budgets.get((charge.name, charge.scope, window))
            if counter is not None:
                counter.used = max(counter.used - charge.amount, 0)

    def _changed(self, key: IdemKey, refunded: tuple[tuple[BudgetCharge, int], ...]) -> None:
        """A claim (and the counters of its refunded charges) changed outside admit and settle,
        by recovery: nothing to do in memory; the SQLite store writes them down."""

    def _live_record(self, key: IdemKey, now: float) -> IdemRecord | None:
        record = self._idem.get(key)
        if record is None:
            return None
        if record.expires_at <= now and record.state == "completed":
            # Only a known outcome expires: an unknown one would then run again blindly.
            del self._idem[key]
            return None
        if record.state == "in_progress" and record.lease_until <= now:
            if not record.dispatched:
                # Abandoned before its call was sent: give back what it took (as a release).
                del self._idem[key]
                self._refund(record.charges)
                self._changed(key, record.charges)
                return None
            if record.idempotent:
                del self._idem[key]  # abandoned, and running it again is harmless
                self._changed(key, ())
                return None
            # Abandoned mid-call: it may have reached the backend. Never run it blindly again.
            record.state, record.owner, record.charges = "outcome_unknown", None, ()
            record.expires_at = max(record.expires_at, now + UNKNOWN_HOLD_S)
            self._unknown.add(key)
            self._changed(key, ())
        return record
