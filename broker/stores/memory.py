"""The memory store: process memory, lost on restart, atomic because it never awaits mid-step.

For tests, and for whoever names it (``store = "memory"``); the embedded default is the SQLite store,
which makes these same decisions durable (``broker.stores.sqlite``).

Each public method runs to completion without yielding to the event loop, which gives it the
same all-or-nothing semantics as the Redis store's Lua scripts without any lock.
"""

from __future__ import annotations

import asyncio
import time
from bisect import bisect_right
from collections.abc import Callable

import msgspec

from broker.ids import new_lease_owner
from broker.stores.approvals import ApprovalRow, MemoryApprovals
from broker.stores.base import (
    Admission,
    AdmitResult,
    Admitted,
    BudgetCharge,
    ClaimRequest,
    Conflict,
    DecisionRecord,
    Limited,
    OutcomeSource,
    RegisteredTool,
    Replay,
    Resolution,
    ResolveVerdict,
    Settlement,
    StoredResponse,
    StuckClaims,
    Ticket,
    ToolSnapshot,
    ToolWrite,
    rate_retry_after,
)
from broker.stores.expiring import MemoryExpiring
from broker.stores.memory_records import (
    NO_CLAIM,
    BudgetCounter,
    IdemRecord,
    RateLog,
    counted,
)
from broker.stores.memory_recovery import REFUNDED, MemoryRecovery

__all__ = ["MemoryStore"]

_SWEEP_EVERY = 4096


class MemoryStore(MemoryRecovery, MemoryApprovals, MemoryExpiring):
    """In-process implementation of :class:`~broker.stores.Store` (and of the approvals' and the
    expiring values' sides)."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        super().__init__()  # every side's own state, along the MRO
        self._clock = clock
        self._idem: dict[tuple[str, str, str], IdemRecord] = {}
        # The keys claimed and not yet settled (a superset: entries are checked when read), so
        # the completer looks at the calls in flight, not at a day's worth of keys.
        self._claimed: dict[tuple[str, str, str], None] = {}
        self._budgets: dict[tuple[str, str, int], BudgetCounter] = {}
        self._rates: dict[tuple[str, str], RateLog] = {}
        self._decisions: dict[str, tuple[DecisionRecord, float]] = {}
        self._tools: dict[str, RegisteredTool] = {}
        self._tools_version = 0
        self._unknown: set[tuple[str, str, str]] = set()
        """The keys whose outcome is unknown (the gauge counts them without a scan)."""
        self._ops = 0
        self._sweep_after = _SWEEP_EVERY
        self._outcomes: OutcomeSource | None = None

    def recover_from(self, outcomes: OutcomeSource | None) -> None:
        self._outcomes = outcomes

    async def admit(self, admission: Admission, *, now: float, dry_run: bool) -> AdmitResult:
        self._ops += 1
        if self._ops >= self._sweep_after:
            self._sweep_and_pace(now)
        claim = admission.claim
        if claim is not None:
            claim_key = (claim.tenant, claim.route, claim.key)
            await self._recover_recorded(claim_key, now)
            record = self._live_record(claim_key, now)
            if record is not None:
                verdict = self._verdict(record, claim, now, replay=not dry_run)
                if verdict is not None:
                    return verdict

        windows: list[tuple[BudgetCharge, int]] = []
        for charge in admission.charges:
            window = int(now // charge.window_s)
            counter = self._budgets.get((charge.name, charge.scope, window))
            used = counter.used if counter and counter.expires_at > now else 0
            if used + charge.amount > charge.limit:
                return Limited("budget", charge.name, (window + 1) * charge.window_s - now)
            windows.append((charge, window))
        for hit in admission.hits:
            log = self._rates.get((hit.name, hit.scope))
            if log is None:
                continue
            start = bisect_right(log.stamps, now - hit.window_s)
            if len(log.stamps) - start >= hit.limit:
                oldest = log.stamps[len(log.stamps) - hit.limit]
                return Limited("rate", hit.name, rate_retry_after(oldest, hit.window_s, now))

        if dry_run:
            return Admitted(Ticket(tenant=admission.tenant, claim=None, owner=None, charges=()))

        # Everything passed: take it all.
        used_after: list[int] = []
        for charge, window in windows:
            key = (charge.name, charge.scope, window)
            counter = self._budgets.get(key)
            if counter is None or counter.expires_at <= now:
                counter = self._budgets[key] = BudgetCounter(0, (window + 1) * charge.window_s)
            counter.used += charge.amount
            used_after.append(counter.used)
        for hit in admission.hits:
            log = self._rates.get((hit.name, hit.scope))
            if log is None:  # not setdefault, which would build a RateLog on every call
                log = self._rates[hit.name, hit.scope] = RateLog()
            del log.stamps[: bisect_right(log.stamps, now - hit.window_s)]
            log.stamps.append(now)
        owner = None
        if claim is not None:
            owner = new_lease_owner()
            self._claimed[claim_key] = None
            self._idem[claim_key] = IdemRecord(
                state="in_progress",
                fingerprint=claim.fingerprint,
                idempotent=claim.idempotent,
                owner=owner,
                lease_until=now + claim.lease_s,
                expires_at=now + max(claim.lease_s, 1.0),
                dispatched=False,
                charges=tuple(windows),
            )
        return Admitted(
            Ticket(
                tenant=admission.tenant,
                claim=claim,
                owner=owner,
                charges=tuple(windows),
                used=tuple(used_after),
            )
        )

    async def lookup(self, claim: ClaimRequest, *, now: float) -> Replay | Conflict | None:
        key = (claim.tenant, claim.route, claim.key)
        await self._recover_recorded(key, now)
        return self._verdict(self._live_record(key, now), claim, now, replay=True)

    async def dispatch(self, ticket: Ticket, *, proposal_id: str, now: float) -> bool:
        return self._dispatch(ticket, proposal_id) is not None

    def _dispatch(self, ticket: Ticket, proposal_id: str) -> IdemRecord | None:
        """Mark the ticket's claim; the record marked (``None``: not ours any more), or the
        claim-less ticket's stand-in, which marks nothing."""
        claim = ticket.claim
        if claim is None:
            return NO_CLAIM
        record = self._idem.get((claim.tenant, claim.route, claim.key))
        if record is None or record.owner != ticket.owner or record.state != "in_progress":
            return None  # the lease lapsed and the claim was recovered or taken over
        record.dispatched, record.proposal_id = True, proposal_id
        return record

    async def settle(
        self,
        ticket: Ticket,
        settlement: Settlement,
        *,
        response: StoredResponse,
        record: DecisionRecord,
        ttl_s: int,
        now: float,
    ) -> bool:
        return self._settle(ticket, settlement, response, record, ttl_s, now)

    def _settle(
        self,
        ticket: Ticket,
        settlement: Settlement,
        response: StoredResponse,
        record: DecisionRecord,
        ttl_s: int,
        now: float,
    ) -> bool:
        """:meth:`settle`, which never waits here: the SQLite store adds its rows to this
        without a coroutine of its own (and its keyword arguments) on every settlement."""
        self._decisions[record.proposal_id] = (record, now + ttl_s)
        # The charges belong to the ticket: a failed call gives them back even when its lease
        # lapsed meanwhile (the new owner took charges of its own). Settle runs once per ticket.
        if settlement in REFUNDED:
            self._refund(ticket.charges)
        claim = ticket.claim
        if claim is None:
            return True
        key = (claim.tenant, claim.route, claim.key)
        idem = self._idem.get(key)
        if idem is None or idem.owner != ticket.owner or idem.state != "in_progress":
            return False  # the lease expired and someone else owns the key now
        self._claimed.pop(key, None)
        if idem.proposal_id is None:  # settled without a call: by this proposal all the same
            idem.proposal_id = record.proposal_id
        self._finish(key, idem, settlement, response, ttl_s, now)
        return True

    async def open_approval(
        self,
        row: ApprovalRow,
        ticket: Ticket,
        *,
        response: StoredResponse,
        record: DecisionRecord,
        ttl_s: int,
        now: float,
    ) -> bool:
        """The approval, then the settlement (the SQLite store writes both in one commit)."""
        self._approvals[row.id] = row  # as put_approval, without a coroutine of its own
        return await self.settle(
            ticket, Settlement.SUCCEEDED, response=response, record=record, ttl_s=ttl_s, now=now
        )

    async def resolve(
        self,
        claim: ClaimRequest,
        resolution: Resolution,
        *,
        response: StoredResponse | None,
        ttl_s: int,
        now: float,
    ) -> ResolveVerdict:
        key = (claim.tenant, claim.route, claim.key)
        await self._recover_recorded(key, now)
        record = self._live_record(key, now)
        if record is None:
            return "absent"
        if record.fingerprint != claim.fingerprint:
            return "reused"
        if record.state == "in_progress":
            return "in_progress"
        if record.state == "completed":
            return "settled"
        self._unknown.discard(key)
        if resolution is Resolution.NOT_EXECUTED:
            del self._idem[key]
        else:
            record.state, record.response, record.expires_at = "completed", response, now + ttl_s
        return "resolved"

    async def unknown_keys(self) -> int:
        return len(self._unknown)

    async def complete_stuck(self, *, now: float, limit: int) -> StuckClaims:
        return counted(await self._complete_stuck(now, limit))

    async def save_decision(self, record: DecisionRecord, *, ttl_s: int) -> None:
        self._decisions[record.proposal_id] = (record, self._clock() + ttl_s)

    async def load_decision(self, proposal_id: str) -> DecisionRecord | None:
        found = self._decisions.get(proposal_id)
        if found is None or found[1] <= self._clock():
            return None
        return found[0]

    async def put_tool(self, tool: RegisteredTool, *, keep_secret: bool) -> ToolWrite:
        existing = self._tools.get(tool.name)
        kept = keep_secret and existing is not None
        if kept and existing is not None:
            tool = msgspec.structs.replace(tool, signing_secret=existing.signing_secret)
        self._tools[tool.name] = tool
        self._tools_version += 1
        return ToolWrite(version=self._tools_version, created=existing is None, secret_kept=kept)

    async def get_tool(self, name: str) -> RegisteredTool | None:
        return self._tools.get(name)

    async def delete_tool(self, name: str) -> int | None:
        if self._tools.pop(name, None) is None:
            return None
        self._tools_version += 1
        return self._tools_version

    async def list_tools(self) -> ToolSnapshot:
        return ToolSnapshot(self._tools_version, tuple(self._tools.values()))

    async def tools_version(self) -> int:
        return self._tools_version

    async def wait_tools_changed(self, timeout_s: float) -> None:
        # One process: writes here are applied by the writer itself, so polling is enough.
        await asyncio.sleep(timeout_s)

    async def ping(self) -> None:
        return None

    async def close(self) -> None:
        return None

    # -- internals ------------------------------------------------------------------------------

    @staticmethod
    def _verdict(
        record: IdemRecord | None, claim: ClaimRequest, now: float, *, replay: bool
    ) -> Replay | Conflict | None:
        if record is None:
            return None
        if record.fingerprint != claim.fingerprint:
            return Conflict("reused")
        if record.state == "in_progress":
            return Conflict("in_progress", max(record.lease_until - now, 0.001))
        if record.state == "outcome_unknown":
            return Conflict("outcome_unknown")
        if not replay:
            return None  # a dry run never replays, and never satisfies a later real run
        if record.response is None:  # a completed record always carries its response
            return Conflict("outcome_unknown")
        return Replay(record.response)

    def _sweep_and_pace(self, now: float) -> None:
        self._sweep(now)
        # The next sweep waits for at least as many admissions as entries remain, so scanning
        # them costs a bounded amount per admission however large the store has grown (a sweep
        # every 4096 admissions of a day's worth of keys would scan them all every few seconds).
        self._ops = 0
        self._sweep_after = max(
            _SWEEP_EVERY, len(self._idem) + len(self._budgets) + len(self._decisions)
        )

    def _sweep(self, now: float) -> None:
        # Only known outcomes are swept: an abandoned claim must surface as outcome_unknown, and
        # an unknown one stays until it is resolved.
        for key in [
            k for k, r in self._idem.items() if r.expires_at <= now and r.state == "completed"
        ]:
            del self._idem[key]
        for bkey in [k for k, c in self._budgets.items() if c.expires_at <= now]:
            del self._budgets[bkey]
        for pid in [p for p, (_, exp) in self._decisions.items() if exp <= now]:
            del self._decisions[pid]
