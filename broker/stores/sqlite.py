"""The embedded default store: the memory store's decisions, made durable in one SQLite file.

Decisions are :class:`~broker.stores.memory.MemoryStore`'s own (this class inherits them, so the
two cannot drift); what each call changed is written to the file, and the call returns only once
that write is committed, with two exceptions that only a crash can tell apart (``admit`` and
``settle`` say which). A dispatch mark is on disk before ``dispatch`` returns (so before the
adapter is called: one more group commit per proposal with a key, shared with the calls of its
turn), and a process killed mid-call comes
back with the key in progress, then released (never dispatched), settled from the ledger, or
``outcome_unknown`` for a non-idempotent tool, exactly as with Redis. At start the file is read
back into memory.

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
from array import array
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
from broker.stores.memory import MemoryStore
from broker.stores.memory_records import BudgetCounter, IdemKey, RateLog, counted
from broker.stores.sqlite_approvals import SqliteApprovals
from broker.stores.sqlite_expiring import SqliteExpiring
from broker.stores.sqlite_file import Checkpointer, Synchronous, lock_exclusively, open_database
from broker.stores.sqlite_rows import Charges, claim_row, decision_of, holds_decision, read_claim
from broker.stores.sqlite_writer import GC_MARGIN_S, Batch, Writer
from broker.taxonomy import StoreUnavailableError

__all__ = ["SqliteStore"]


class SqliteStore(SqliteApprovals, SqliteExpiring, MemoryStore):
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
        # Each claim's row in the file, numbered in order of creation. A key's row is found by
        # this number, never by the key itself: the file then keeps no index of client keys,
        # whose random order made every commit rewrite as many scattered index pages as it
        # wrote claims, and a claim is settled in the page it was created in, near the tail.
        self._rows: dict[IdemKey, int] = {}
        self._next_row = 1
        # Proposals whose decision record is their claim's row (``decided``): the claim's key.
        self._decided: dict[str, IdemKey] = {}
        self.path = Path(path)
        self.synchronous = synchronous
        self._charges = msgspec.msgpack.Decoder(Charges)
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
        self._encoder = msgspec.msgpack.Encoder()
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

    # -- what a call changed, as rows ---------------------------------------------------------------

    def _build_rows(self, batch: Batch) -> None:
        """The rows of the claims, budget counters and rate logs the batch's calls changed, as
        memory holds them now (the writer calls this on the loop as the batch starts to
        commit)."""
        for key in batch.claims:
            self._claim_row(batch, key)
        for counter in batch.counters:
            self._budget_row(batch, counter)
        for log, window_s in batch.rate_logs.items():
            self._rate_row(batch, log, window_s)

    def _claim_row(self, batch: Batch, key: IdemKey) -> None:
        record = self._idem.get(key)
        if record is None:
            gone = self._rows.pop(key, None)
            if gone is not None:
                batch.idem[gone] = None
            return
        row = self._rows.get(key)
        if row is None:
            row = self._rows[key] = self._next_row
            self._next_row += 1
        batch.idem[row] = claim_row(
            row,
            key,
            record,
            charges=self._encoder.encode(record.charges) if record.charges else None,
            decided=self._decided.get(record.proposal_id or "") == key,
        )

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

    def _budget_row(self, batch: Batch, key: tuple[str, str, int]) -> None:
        counter = self._budgets.get(key)
        batch.budget[key] = None if counter is None else (*key, counter.used, counter.expires_at)

    def _rate_row(self, batch: Batch, key: tuple[str, str], window_s: float) -> None:
        log = self._rates.get(key)
        if log is None or not log.stamps:
            batch.rate[key] = None
            return
        stamps = array("d", log.stamps).tobytes()
        batch.rate[key] = (*key, stamps, log.stamps[-1] + window_s)

    def _keep_decision(self, batch: Batch, record: DecisionRecord, expires_at: float) -> None:
        row = (record.proposal_id, self._encoder.encode(record), expires_at)
        batch.decision[record.proposal_id] = row

    def _query(self, sql: str, params: tuple[object, ...]) -> sqlite3.Cursor:
        if self._reader is None:
            raise StoreUnavailableError(f"the store at {self.path} is closed")
        try:
            return self._reader.execute(sql, params)
        except sqlite3.Error as exc:
            raise StoreUnavailableError(f"sqlite {self.path}: {exc}") from exc

    # -- reading the file back ----------------------------------------------------------------------

    def _load(self, db: sqlite3.Connection) -> None:
        """Memory from the file: every live claim, counter, rate log and registered tool."""
        now = self._clock()
        (last,) = db.execute("SELECT max(id) FROM idem").fetchone()
        self._next_row = (last or 0) + 1
        for row in db.execute("SELECT * FROM idem WHERE gc_at > ?", (now,)):
            number, key, record, decided = read_claim(row, self._charges.decode)
            self._rows[key] = number
            self._idem[key] = record
            if decided and record.state == "completed":
                self._decided[record.proposal_id or ""] = key
            if record.state == "in_progress":  # never settled: the completer's to look at
                self._claimed[key] = None
            if record.state == "outcome_unknown" or (
                record.state == "in_progress"
                and record.dispatched
                and not record.idempotent
                and record.lease_until <= now
            ):
                # An abandoned claim (its process died mid-call) is unknown from the start.
                self._unknown.add(key)
        for name, scope, win, used, expires in db.execute(
            "SELECT * FROM budget WHERE expires_at > ?", (now - GC_MARGIN_S,)
        ):
            self._budgets[(name, scope, win)] = BudgetCounter(used, expires)
        for name, scope, stamps, _ in db.execute("SELECT * FROM rate_log WHERE gc_at > ?", (now,)):
            self._rates[(name, scope)] = RateLog(array("d", stamps).tolist())
        for name, spec, secret, updated_at, updated_by in db.execute("SELECT * FROM tool"):
            self._tools[name] = RegisteredTool(
                name=name,
                spec=spec,
                signing_secret=secret,
                updated_at=updated_at,
                updated_by=updated_by,
            )
        (self._tools_version,) = db.execute("SELECT version FROM catalog").fetchone()

    def _reload(self) -> None:
        self._idem.clear()
        self._unknown.clear()
        self._claimed.clear()
        self._rows.clear()
        self._decided.clear()
        self._budgets.clear()
        self._rates.clear()
        self._tools.clear()
        if self._reader is not None:
            with contextlib.suppress(sqlite3.Error):
                self._load(self._reader)
