"""The embedded default store: the memory store's decisions, made durable in one SQLite file.

Decisions are :class:`~broker.stores.memory.MemoryStore`'s own (this class inherits them, so the
two cannot drift); what each call changed is written to the file, and the call returns only once
that write is committed, with two exceptions that only a crash can tell apart (``admit`` and
``settle`` say which). A dispatch mark is on disk before ``dispatch`` returns (so before the
adapter is called: one more group commit per proposal with a key, shared with the calls of its
turn), and a process killed mid-call comes
back with the key in progress, then released (never dispatched), settled from the ledger, or
``outcome_unknown`` for a non-idempotent tool, exactly as with Redis. At start the file is read
back into memory (:mod:`broker.stores.sqlite_mirror`, which also builds the rows).

Group commit (:mod:`broker.stores.sqlite_writer`): the rows a call changed are queued, a writer
thread commits them batch after batch, and the call returns once its batch is committed. If a
commit fails, its callers get StoreUnavailableError (503) and memory is read from the file
again, so nothing is answered from state the file does not hold.

One process owns the file (:func:`~broker.stores.sqlite_file.lock_exclusively`): the state in
memory is authoritative only while nobody else writes. Several processes need Redis.

Decision records (``GET /v1/proposals/{id}``, read rarely) live only in the file, so memory holds
just the idempotency records, counters, rate logs and registered tools; but the record of a
proposal that dispatched its claim and settled it is that claim's row (its tenant, route,
proposal and response, and the same expiry), marked ``decided`` rather than written again to
the decision table, and found through the claim in memory. Expired rows are deleted in
bounded batches during commits, so the file stays bounded by the TTLs.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from broker.stores.base import (
    Admission,
    AdmitResult,
    Admitted,
    ClaimRequest,
    Conflict,
    DecisionRecord,
    RegisteredTool,
    Replay,
    Resolution,
    ResolveVerdict,
    Settlement,
    StoredResponse,
    StuckClaims,
    Ticket,
    ToolWrite,
)
from broker.stores.memory_records import IdemKey, counted
from broker.stores.sqlite_approvals import SqliteApprovals
from broker.stores.sqlite_expiring import SqliteExpiring
from broker.stores.sqlite_file import Checkpointer, Synchronous, lock_exclusively, open_database
from broker.stores.sqlite_mirror import SqliteMirror
from broker.stores.sqlite_rows import Charges, decision_of, holds_decision
from broker.stores.sqlite_writer import Batch, Writer
from broker.taxonomy import StoreUnavailableError

__all__ = ["SqliteStore"]


class SqliteStore(SqliteApprovals, SqliteExpiring, SqliteMirror):
    """SQLite implementation of :class:`~broker.stores.Store` (one process per file).

    Args:
        path: the database file (created with the current schema when absent).
        synchronous: ``"normal"`` survives a crash of the process, ``"full"`` a power cut too
            (an fsync per commit).
        clock: wall-clock seconds, as for the memory store.

    Raises:
        ConfigError: another process holds the file, or it is damaged, foreign, or written by a
            newer broker.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Synchronous = "normal",
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(clock=clock)
        self.path = Path(path)
        self.synchronous = synchronous
        self._lock = lock_exclusively(self.path)
        try:
            self._db = open_database(self.path, synchronous=synchronous)
            self._load(self._db)
            self._open_approvals(self.path)
            self._open_expiring(self.path)
        except BaseException:
            self._close_approvals()
            os.close(self._lock)
            raise
        self._checkpointer = Checkpointer(self.path, synchronous=synchronous)
        # The writer thread has the connection above to itself; reads on the loop use this one
        # (the loop's thread may not be the one that built the app, as under a test client).
        self._reader: sqlite3.Connection | None = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False
        )
        self._writer = Writer(
            self._db, self.path, clock=clock, prepare=self._build_rows, on_failure=self._reload
        )
        self._records = msgspec.msgpack.Decoder(DecisionRecord)

    def size_bytes(self) -> int:
        """The database and its write-ahead log on disk (the size gauge)."""
        total = 0
        for name in (self.path, Path(f"{self.path}-wal")):
            with contextlib.suppress(OSError):  # a log not created yet counts nothing
                total += name.stat().st_size
        return total

    def _batch(self) -> Batch:
        if self._reader is None:
            raise StoreUnavailableError(f"the store at {self.path} is closed")
        return self._writer.batch()

    # -- Store protocol: the memory store decides, the file keeps ---------------------------------

    async def admit(self, admission: Admission, *, now: float, dry_run: bool) -> AdmitResult:
        result = await super().admit(admission, now=now, dry_run=dry_run)
        if dry_run or not isinstance(result, Admitted):
            # Nothing was taken, so nothing is written (a replay least of all); what the decision
            # may have changed in memory (an expired key forgotten, an abandoned claim now
            # outcome_unknown) is derived again from the file's rows after a restart.
            await self._writer.caught_up()
            return result
        batch = self._batch()
        if admission.claim is not None:
            claim = admission.claim
            batch.claims[claim.tenant, claim.route, claim.key] = None
        for charge, window in result.ticket.charges:
            batch.counters[charge.name, charge.scope, window] = None
        for hit in admission.hits:
            batch.rate_logs[hit.name, hit.scope] = hit.window_s
        if admission.claim is None:
            await batch.wait()
        # A claimed admission does not wait for its commit. The state in memory decides (one
        # process per file), and what must be in the file before anything is sent is there by
        # then: ``dispatch`` waits for a batch at or after this one (batches commit in order,
        # and a failed one fails the batch behind it and reloads memory from the file, so a
        # claim whose rows were lost is no longer there to dispatch). Every other end of an
        # admitted proposal (release, settle, an approval opened) has its batch committed too,
        # waiting for it but for a recorded call's settlement (``_recorded_call``). A crash
        # before that loses a claim that nothing was sent for, with its charges: a retry runs it
        # afresh, as it should. Written together, the claim's row is often written once.
        return result

    async def lookup(self, claim: ClaimRequest, *, now: float) -> Replay | Conflict | None:
        result = await super().lookup(claim, now=now)
        await self._writer.caught_up()  # read only, as admit's refusals and replays above
        return result

    async def dispatch(self, ticket: Ticket, *, proposal_id: str, now: float) -> bool:
        marked = self._dispatch(ticket, proposal_id)
        if marked is None:
            return False
        if ticket.claim is not None:  # committed before the adapter is called
            claim = ticket.claim
            batch = self._batch()
            batch.claims[claim.tenant, claim.route, claim.key] = None
            await batch.wait()
        return True

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
        claim = ticket.claim
        key = None if claim is None else (claim.tenant, claim.route, claim.key)
        recorded = self._recorded_call(key, ticket)
        settled = self._settle(ticket, settlement, response, record, ttl_s, now)
        self._decisions.pop(record.proposal_id, None)  # kept in the file only
        batch = self._batch()
        held = None if key is None or not settled else self._idem.get(key)
        if key is not None and holds_decision(key, held, record):
            # The claim's row says all the record says, with the same expiry: written once.
            self._decided[record.proposal_id] = key
        else:
            earlier = self._decided.pop(record.proposal_id, None)
            if earlier is not None:  # its claim's row answered for it until now (a 202)
                batch.claims[earlier] = None
            self._keep_decision(batch, record, now + ttl_s)
        for charge, window in ticket.charges:
            batch.counters[charge.name, charge.scope, window] = None
        if key is not None:
            batch.claims[key] = None
        if settled and recorded:
            batch.ask()
        else:
            await batch.wait()
        return settled

    def _recorded_call(self, key: IdemKey | None, ticket: Ticket) -> bool:
        """Whether the ledger can stand in for this settlement until it is in the file, so the
        answer need not wait for its commit: the claim was marked dispatched (in the file
        before the call left), and the pipeline records a call's outcome before it settles.
        Should the process die first, the claim is read back in progress, and the first look
        at it once its lease lapsed settles it from that record
        (``MemoryStore._recover_recorded``)."""
        if key is None or self._outcomes is None:
            return False
        held = self._idem.get(key)
        return held is not None and held.dispatched and held.owner == ticket.owner

    async def resolve(
        self,
        claim: ClaimRequest,
        resolution: Resolution,
        *,
        response: StoredResponse | None,
        ttl_s: int,
        now: float,
    ) -> ResolveVerdict:
        verdict = await super().resolve(claim, resolution, response=response, ttl_s=ttl_s, now=now)
        if verdict != "resolved":
            await self._writer.caught_up()  # nothing taken, as admit's refusals
            return verdict
        batch = self._batch()
        batch.claims[claim.tenant, claim.route, claim.key] = None
        await batch.wait()
        return verdict

    async def complete_stuck(self, *, now: float, limit: int) -> StuckClaims:
        completed = await self._complete_stuck(now, limit)
        if completed:  # the new states in the file before they are reported
            batch = self._batch()
            for key, _ in completed:
                batch.claims[key] = None
            await batch.wait()
        return counted(completed)

    async def save_decision(self, record: DecisionRecord, *, ttl_s: int) -> None:
        batch = self._batch()
        self._keep_decision(batch, record, self._clock() + ttl_s)
        await batch.wait()

    async def load_decision(self, proposal_id: str) -> DecisionRecord | None:
        now = self._clock()
        key = self._decided.get(proposal_id)
        if key is not None:  # the record is that claim's row
            found = decision_of(proposal_id, key, self._idem.get(key), now)
            if found is not None:
                await self._writer.caught_up()  # asked before its commit: answered once durable
            return found
        queued = self._writer.holds_decision(proposal_id)
        if queued is not None:
            # Asked before its commit: answer once it is durable, as every other call does.
            await queued.wait()
        row = self._query(
            "SELECT record FROM decision WHERE proposal_id = ? AND expires_at > ?",
            (proposal_id, now),
        ).fetchone()
        if row is None:
            return None
        try:
            return self._records.decode(row[0])
        except msgspec.DecodeError as exc:
            raise StoreUnavailableError(f"unreadable decision record in {self.path}") from exc

    async def put_tool(self, tool: RegisteredTool, *, keep_secret: bool) -> ToolWrite:
        written = await super().put_tool(tool, keep_secret=keep_secret)
        batch = self._batch()
        kept = self._tools[tool.name]
        batch.tool[tool.name] = (
            kept.name,
            kept.spec,
            kept.signing_secret,
            kept.updated_at,
            kept.updated_by,
        )
        batch.version = self._tools_version
        await batch.wait()
        return written

    async def delete_tool(self, name: str) -> int | None:
        version = await super().delete_tool(name)
        if version is None:
            return None
        batch = self._batch()
        batch.tool[name] = None
        batch.version = version
        await batch.wait()
        return version

    async def ping(self) -> None:
        self._query("SELECT 1", ())

    async def close(self) -> None:
        reader, self._reader = self._reader, None
        if reader is None:
            return
        await self._writer.flush()
        self._writer.close()
        reader.close()
        self._close_approvals()
        self._close_expiring()
        self._db.close()
        self._checkpointer.stop()
        os.close(self._lock)

    def _changed(self, key: IdemKey, refunded: Charges) -> None:
        """Recovery changed a claim (and refunded charges) outside admit and settle: queued with
        the next commit, which every caller that read the change waits for."""
        batch = self._batch()
        batch.claims[key] = None
        for charge, window in refunded:
            batch.counters[charge.name, charge.scope, window] = None

    def _sweep(self, now: float) -> None:
        """The memory store's sweep, and the rows of the claims it forgot deleted with them (the
        file's own sweep would take them later; until then a row must not outlive its key's
        number, or a claim made again would get a second row)."""
        super()._sweep(now)
        forgotten = [key for key in self._rows if key not in self._idem]
        if forgotten:
            batch = self._batch()
            for key in forgotten:
                batch.idem[self._rows.pop(key)] = None
        for proposal_id in [
            p
            for p, key in self._decided.items()
            if key not in self._idem or self._idem[key].proposal_id != p
        ]:
            del self._decided[proposal_id]

    def _query(self, sql: str, params: tuple[object, ...]) -> sqlite3.Cursor:
        if self._reader is None:
            raise StoreUnavailableError(f"the store at {self.path} is closed")
        try:
            return self._reader.execute(sql, params)
        except sqlite3.Error as exc:
            raise StoreUnavailableError(f"sqlite {self.path}: {exc}") from exc

    def _reload(self) -> None:
        """A commit failed (the writer's ``on_failure``): memory is read from the file again."""
        self._reload_from(self._reader)
