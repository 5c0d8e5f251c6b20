"""JsonlLedgerSink: the hash chain in an append-only JSONL file, safe across tasks and processes.

One record per line, ``\\n``-terminated, written with a single ``os.write`` on an ``O_APPEND`` fd
while holding an exclusive ``flock``; under that lock the sink first reads whatever other processes
appended since it last looked, so the chain it extends is the file's real head and never forks.
Appends racing in one process are group-committed: one write per batch, from the event loop
(page cache only), then the appenders wait for an fsync covering their bytes, run one at a time,
each covering everything written before it began (``Durability``), by a small child process
under ``"always"`` (``FsyncProcess``) and by a worker thread otherwise. The next batch is sealed and written while the previous one is being synced.

fsync policy (every policy survives a crash of the broker process: ``append`` returns only after
``os.write`` put the record in the kernel's page cache):

* ``"always"`` (default): ``append`` returns after an fsync covering its record. Nothing
  acknowledged is lost on power loss or kernel crash. Cost: one fsync per group commit.
* ``"batch"``: fsync at most every ``fsync_interval_s`` (checked on append), and on ``sync()`` and
  ``close()``. Power loss or a kernel crash can lose the records acknowledged since the last
  fsync (up to ``fsync_interval_s`` of traffic; longer when idle, until the kernel writes back).
* ``"never"``: only ``sync()`` and ``close()`` fsync. Power loss can lose whatever the kernel had
  not yet written back (typically up to 30 s).

A lost tail leaves a shorter but valid chain, which checkpoints signed later than the tail reveal
as truncation; that is why the Checkpointer calls ``sync()`` before it signs a head.

A torn last line (the writer died inside ``os.write``, or the disk filled) is no record: no append
returned for it. It is cut away, with a warning, by the next writer that holds the lock, so the
chain resumes from the last complete record. Readers simply ignore it.

Appending needs only the file's last line (``read_tail``). Lookups by seq, trace, session and
proposal (``broker.ledger.jsonl_reads``, the sink's base) go through an SQLite index beside the
file (``<ledger>.index``, see ``LookupIndex``), filled in steps as the file grows and rebuilt
from the file whenever it is missing or stale: the broker's memory stays flat however long the
ledger grows, and a restart reads only the tail.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from broker.ledger.batching import GroupCommit
from broker.ledger.durability import Durability
from broker.ledger.errors import LedgerCorruptError, LedgerUnavailableError
from broker.ledger.fsync_process import FsyncProcess
from broker.ledger.jsonl_file import flock, fsync_dir, unlock, write_all
from broker.ledger.jsonl_index import STEP as INDEX_STEP
from broker.ledger.jsonl_index import LookupIndex
from broker.ledger.jsonl_reads import JsonlReads
from broker.ledger.jsonl_tail import ChainTail, read_tail
from broker.ledger.model import AuditRef, LedgerEntry
from broker.ledger.sealing import seal

__all__ = ["FsyncPolicy", "JsonlLedgerSink"]

FsyncPolicy = Literal["always", "batch", "never"]

_log = logging.getLogger("broker.ledger")
_INDEX_RETRY_S = 1.0
"""How long appends leave the index alone after a step of it failed (another process holding
its lock, say); lookups still try, and catch up, meanwhile."""
_LOCK_WAIT_S = 5.0
"""How long an append waits for another writer's file lock before the ledger is unavailable."""


class JsonlLedgerSink(JsonlReads):
    """A ``LedgerSink`` (and ``RawRecordSource``, ``RawBatchSource``) over one JSONL file.

    Args:
        path: the ledger file; created (with its directory) if missing.
        fsync: durability policy, see the module docstring.
        fsync_interval_s: the ``"batch"`` policy's fsync interval.
        read_only: open without writing, locking or repairing anything (what ``verify`` uses);
            lookups then index the file in memory, not beside it.
        monotonic: clock for the ``"batch"`` policy, injectable for tests.
        fsync_in: where fsync runs under ``"always"``: a child process (see ``FsyncProcess``
            for why), or a worker thread calling ``os.fsync`` (which tests can stand in for).
            The other policies always use a worker thread: no child process is started.

    Raises:
        LedgerUnavailableError: the file cannot be opened, locked or read.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        fsync: FsyncPolicy = "always",
        fsync_interval_s: float = 1.0,
        read_only: bool = False,
        monotonic: Callable[[], float] = time.monotonic,
        fsync_in: Literal["process", "thread"] = "process",
    ) -> None:
        if fsync not in ("always", "batch", "never"):
            raise ValueError(f"fsync must be 'always', 'batch' or 'never', not {fsync!r}")
        self.path = Path(path)
        self.fsync_policy: FsyncPolicy = fsync
        self.read_only = read_only
        self._fsync_interval_s = fsync_interval_s
        self._monotonic = monotonic
        self._last_fsync = monotonic()
        self._commits: GroupCommit[LedgerEntry, AuditRef] = GroupCommit(
            self._commit, name=f"ledger {self.path}", deliver=self._deliver
        )
        self._tail = ChainTail()
        self._closed = False
        self._index_step_due = False
        self._index_retry_at = 0.0
        self._fine_this_tick = False
        self._batch_waits_for_fsync = True
        """Whether the appends of the batch just written wait for an fsync: decided once per
        batch (the policy and the clock say the same for all of them), not once per append."""
        try:
            self._fd = self._open()
            opened = os.fstat(self._fd)
        except OSError as exc:
            raise LedgerUnavailableError(f"cannot open ledger {self.path}: {exc}") from exc
        self._identity = (opened.st_dev, opened.st_ino)
        try:
            self._index = LookupIndex(
                None if read_only else self.path.with_name(self.path.name + ".index"),
                self._identity,
            )
        except sqlite3.Error as exc:
            os.close(self._fd)
            raise LedgerUnavailableError(
                f"cannot open the index of ledger {self.path}: {exc}"
            ) from exc
        if not read_only:
            # Whatever the index lacks (all of it, the first time) is taken now, before the
            # broker serves, not by the first lookup.
            self._index_quietly(steps=None)
        # The child only earns its keep when answers wait for fsync ("always"): "batch" syncs
        # about once a second and "never" only on sync()/close(), where a worker thread's GIL
        # wait costs nothing that matters, and an extra process beside the broker would.
        self._fsync_process = (
            FsyncProcess(self._fd, name=str(self.path))
            if fsync_in == "process" and fsync == "always" and not read_only
            else None
        )
        self._durability = Durability(
            self._fd,
            name=str(self.path),
            synced=self._note_fsync,
            fsync=self._fsync_process.fsync if self._fsync_process is not None else None,
        )
        self._durability.written(self._tail.end)

    def _open(self) -> int:
        if self.read_only:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            self._tail = read_tail(fd, self._tail, self.path, repair=False)
            return fd
        self.path.parent.mkdir(parents=True, exist_ok=True)
        existed = self.path.exists()
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o640)
        if not existed:
            fsync_dir(self.path.parent)
        flock(fd)
        try:
            self._tail = read_tail(fd, self._tail, self.path, repair=True)
        finally:
            unlock(fd)
        return fd

    # -- appending -----------------------------------------------------------------------------

    def append(self, entry: LedgerEntry) -> asyncio.Future[AuditRef]:
        """``LedgerSink.append``: the future the group commit answers, awaited as it is (no
        coroutine of its own: each would be one more frame to suspend and resume per record)."""
        if self._closed or self.read_only:
            raise LedgerUnavailableError(f"ledger {self.path} is closed or read-only")
        return self._commits.submit(entry)

    def _deliver(self, future: asyncio.Future[AuditRef], ref: AuditRef) -> None:
        """Answer an append whose record was just written: now, or once an fsync covers it.

        Called right after its batch was written, so the file's end covers the record, and
        whether an fsync is due was decided for the whole batch."""
        if self._batch_waits_for_fsync:
            self._durability.settle_when_durable(future, self._tail.end, ref)
        else:
            future.set_result(ref)

    async def _commit(self, entries: list[LedgerEntry]) -> list[AuditRef | Exception]:
        try:
            outcomes = await self._write_when_unlocked(entries)
        except OSError as exc:
            raise LedgerUnavailableError(f"ledger {self.path} write failed: {exc}") from exc
        self._durability.written(self._tail.end)
        self._batch_waits_for_fsync = self._fsync_due()
        # The index takes a step whenever a step's worth of lines is new, so neither a step nor
        # the next lookup's wait grows with traffic.
        if self._tail.end - self._index.indexed_end >= INDEX_STEP and not self._index_step_due:
            self._index_step_due = True
            asyncio.get_running_loop().call_soon(self._index_step)
        return outcomes

    def _index_step(self) -> None:
        """Index the next lines in a later turn of the loop, after this batch's answers.

        Never waits for another process's lock on the index: the loop would stall with it, once
        per batch while the lock is held. A step that failed is not tried again for a while."""
        self._index_step_due = False
        if not self._closed and self._monotonic() >= self._index_retry_at:
            self._index_quietly(steps=1, wait=False)

    def _index_quietly(self, *, steps: int | None, wait: bool = True) -> None:
        try:
            self._index.catch_up(self._fd, self._tail.end, steps=steps, wait=wait)
        except (OSError, sqlite3.Error) as exc:  # the next lookup tries again, and reports it
            self._index_retry_at = self._monotonic() + _INDEX_RETRY_S
            _log.warning("ledger %s: indexing new records failed: %s", self.path, exc)

    async def _write_when_unlocked(self, entries: list[LedgerEntry]) -> list[AuditRef | Exception]:
        """Seal and write the batch as soon as the file lock is free.

        Other processes hold the lock only while they write a batch from their own event loop,
        so it is retried from ours, backing off to 5 ms, never waited for in a worker thread: a
        thread that got the lock would keep it while waiting for a busy loop to hand it the GIL
        (up to the 5 ms switch interval), and every other writer would queue behind it.

        Raises:
            LedgerUnavailableError: the lock stayed busy for ``_LOCK_WAIT_S`` (a stopped holder).
        """
        delay = 0.0
        deadline = time.monotonic() + _LOCK_WAIT_S
        while (outcomes := self._write_batch(entries)) is None:
            if time.monotonic() > deadline:
                raise LedgerUnavailableError(
                    f"ledger {self.path} stayed locked by another writer for {_LOCK_WAIT_S:g} s"
                )
            await asyncio.sleep(delay)
            delay = min(max(2 * delay, 0.0002), 0.005)
        return outcomes

    def _write_batch(self, entries: list[LedgerEntry]) -> list[AuditRef | Exception] | None:
        """Seal and write under the file lock; ``None`` while another writer holds it."""
        if not flock(self._fd, wait=False):
            return None
        try:
            return self._write_locked(entries)
        finally:
            unlock(self._fd)

    def _write_locked(self, entries: list[LedgerEntry]) -> list[AuditRef | Exception]:
        self._check_still_in_place()  # never extend a file nobody can find any more
        # Another process may have appended since we last looked: extend the file's real head.
        self._tail = read_tail(self._fd, self._tail, self.path, repair=True)
        if self._tail.malformed:
            raise LedgerCorruptError(
                f"the last line of {self.path} is malformed, so its head is unknown; "
                "run `ledger verify` and repair the file before appending"
            )
        head = self._tail.head
        lines: list[bytes] = []
        sealed: list[tuple[LedgerEntry, AuditRef]] = []
        outcomes: list[AuditRef | Exception] = []
        for entry in entries:
            try:
                line, head = seal(entry, head)
            except Exception as exc:  # this entry's own fault: fail it, not its batch
                outcomes.append(exc)
                continue
            lines.append(line)
            sealed.append((entry, head))
            outcomes.append(head)
        if lines:
            start = self._tail.end
            data = b"".join(lines)
            try:
                write_all(self._fd, data)
            except OSError:
                os.ftruncate(self._fd, start)  # never leave a torn or unconfirmed tail
                raise
            self._tail = ChainTail(start + len(data), head)
            self._index.note_written(start, lines, sealed)
        return outcomes

    def _note_fsync(self) -> None:
        self._last_fsync = self._monotonic()

    def _fsync_due(self) -> bool:
        if self.fsync_policy == "always":
            return True
        if self.fsync_policy == "batch":
            return self._monotonic() - self._last_fsync >= self._fsync_interval_s
        return False

    async def sync(self) -> None:
        """fsync now, whatever the policy (the Checkpointer calls this before signing a head)."""
        if self._closed or self.read_only:
            return
        async with self._commits.lock:
            self._durability.written(self._tail.end)
            await self._durability.through(self._tail.end)

    # -- health and lifecycle ------------------------------------------------------------------

    async def ping(self) -> None:
        if self._closed or self.read_only:
            raise LedgerUnavailableError(f"ledger {self.path} is closed or read-only")
        if self._durability.failed:
            # The last fsync failed: refuse until one covering everything written succeeds.
            await self._durability.through(self._tail.end)
        if self._fine_this_tick:
            return
        try:
            self._check_still_in_place()
            if os.fstatvfs(self._fd).f_bavail == 0:
                raise LedgerUnavailableError(f"no space left for ledger {self.path}")
        except OSError as exc:
            raise LedgerUnavailableError(f"ledger {self.path} is unavailable: {exc}") from exc
        # Pings in the rest of this turn of the event loop share this result: no new I/O is seen
        # before the loop's next turn, which starts by forgetting it, so checking again would
        # only repeat the same syscalls (two per proposal, a few percent of the whole path).
        self._fine_this_tick = True
        asyncio.get_running_loop().call_soon(self._forget_ping)

    def _forget_ping(self) -> None:
        self._fine_this_tick = False

    def _check_still_in_place(self) -> None:
        """Raise if the path no longer names the file we hold open (renamed, removed, replaced):
        records appended to an unlinked file would be invisible to every reader."""
        current = os.stat(self.path)
        if (current.st_dev, current.st_ino) != self._identity:
            raise LedgerUnavailableError(f"ledger {self.path} was replaced or removed")

    async def close(self) -> None:
        """Commit pending appends, fsync what is not durable yet (whatever the policy) and close
        the file; idempotent."""
        if self._closed:
            return
        async with self._commits.lock:
            await self._commits.drain()
            self._closed = True
            try:
                if not self.read_only:
                    # Through the same path as appends, so an append still waiting for its
                    # fsync is answered by this one, and none starts after the file is closed.
                    self._durability.written(self._tail.end)
                    await self._durability.through(self._tail.end)
            finally:
                await self._durability.idle()
                if self._fsync_process is not None:
                    self._fsync_process.close()
                self._index.close()
                os.close(self._fd)

    async def __aenter__(self) -> JsonlLedgerSink:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
