"""JsonlLedgerSink: the hash chain in an append-only JSONL file, safe across threads and processes.

One record per line, ``\\n``-terminated, written with a single ``os.write`` on an ``O_APPEND`` fd
while holding an exclusive ``flock``; under that lock the sink first reads whatever other processes
appended since it last looked, so the chain it extends is the file's real head and never forks.
Appends racing in one process are group-committed: the first to take the asyncio lock writes
every pending entry in one write (and one fsync).

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
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Literal

import msgspec

from broker.ledger.errors import LedgerCorruptError, LedgerUnavailableError
from broker.ledger.jsonl_index import LineIndex
from broker.ledger.model import AuditRef, LedgerEntry, LedgerRecord
from broker.ledger.sealing import seal

__all__ = ["FsyncPolicy", "JsonlLedgerSink"]

FsyncPolicy = Literal["always", "batch", "never"]

_log = logging.getLogger("broker.ledger")
_CHUNK = 1 << 20
_RECORD = msgspec.json.Decoder(LedgerRecord)


class JsonlLedgerSink:
    """A ``LedgerSink`` (and ``RawRecordSource``) over one JSONL file.

    Args:
        path: the ledger file; created (with its directory) if missing.
        fsync: durability policy, see the module docstring.
        fsync_interval_s: the ``"batch"`` policy's fsync interval.
        read_only: open without writing, locking or repairing anything (what ``verify`` uses).
        monotonic: clock for the ``"batch"`` policy, injectable for tests.

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
    ) -> None:
        if fsync not in ("always", "batch", "never"):
            raise ValueError(f"fsync must be 'always', 'batch' or 'never', not {fsync!r}")
        self.path = Path(path)
        self.fsync_policy: FsyncPolicy = fsync
        self.read_only = read_only
        self._fsync_interval_s = fsync_interval_s
        self._monotonic = monotonic
        self._last_fsync = monotonic()
        self._lock = asyncio.Lock()
        self._thread_lock = threading.Lock()
        self._pending: list[tuple[LedgerEntry, asyncio.Future[AuditRef]]] = []
        self._index = LineIndex()
        self._closed = False
        self._fd = self._open()

    # -- opening and catching up -------------------------------------------------------------

    def _open(self) -> int:
        try:
            if self.read_only:
                fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
                self._fd = fd
                self._catch_up(repair=False)
                return fd
            self.path.parent.mkdir(parents=True, exist_ok=True)
            existed = self.path.exists()
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o640)
            self._fd = fd
            if not existed:
                _fsync_dir(self.path.parent)
            with self._file_lock():
                self._catch_up(repair=True)
            return fd
        except OSError as exc:
            raise LedgerUnavailableError(f"cannot open ledger {self.path}: {exc}") from exc

    def _file_lock(self) -> _Flock:
        return _Flock(self._fd)

    def _catch_up(self, *, repair: bool) -> None:
        """Index lines appended (by anyone) since we last looked; cut a torn tail if ``repair``.

        ``repair`` is only safe while holding the exclusive flock: then no writer is mid-line.
        """
        size = os.fstat(self._fd).st_size
        if size < self._index.end:
            _log.warning("ledger %s shrank to %d bytes; re-indexing it", self.path, size)
            self._index = LineIndex()
        pos = self._index.end
        carry = b""
        while pos < size:
            chunk = os.pread(self._fd, min(_CHUNK, size - pos), pos)
            if not chunk:
                break
            pos += len(chunk)
            buffer = carry + chunk if carry else chunk
            consumed = self._index.consume(buffer, self._index.end)
            carry = buffer[consumed:]
        if carry and repair:
            _log.warning(
                "ledger %s ends with a torn record (%d bytes without newline); truncating it",
                self.path,
                len(carry),
            )
            os.ftruncate(self._fd, self._index.end)
            os.fsync(self._fd)

    # -- appending -----------------------------------------------------------------------------

    async def append(self, entry: LedgerEntry) -> AuditRef:
        if self._closed or self.read_only:
            raise LedgerUnavailableError(f"ledger {self.path} is closed or read-only")
        future: asyncio.Future[AuditRef] = asyncio.get_running_loop().create_future()
        self._pending.append((entry, future))
        async with self._lock:
            if not future.done():
                batch, self._pending = self._pending, []
                await asyncio.shield(self._flush(batch))
        return await future

    async def _flush(self, batch: list[tuple[LedgerEntry, asyncio.Future[AuditRef]]]) -> None:
        outcomes: list[AuditRef | Exception]
        try:
            outcomes = await asyncio.to_thread(self._write_batch, [entry for entry, _ in batch])
        except OSError as exc:
            error = LedgerUnavailableError(f"ledger {self.path} write failed: {exc}")
            outcomes = [error] * len(batch)
        except LedgerUnavailableError as exc:
            outcomes = [exc] * len(batch)
        except Exception as exc:  # a bug must not leave the batch's callers waiting forever
            _log.exception("ledger %s: unexpected failure while appending", self.path)
            outcomes = [LedgerUnavailableError(f"ledger {self.path} append failed: {exc!r}")]
            outcomes *= len(batch)
        for (_, future), outcome in zip(batch, outcomes, strict=True):
            if future.done():
                continue
            if isinstance(outcome, Exception):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)

    def _write_batch(self, entries: list[LedgerEntry]) -> list[AuditRef | Exception]:
        with self._thread_lock, self._file_lock():
            self._catch_up(repair=True)
            if self._index.tail_malformed:
                raise LedgerCorruptError(
                    f"the last line of {self.path} is malformed, so its head is unknown; "
                    "run `ledger verify` and repair the file before appending"
                )
            head = self._index.head
            lines: list[bytes] = []
            outcomes: list[AuditRef | Exception] = []
            for entry in entries:
                try:
                    line, head = seal(entry, head)
                except Exception as exc:  # this entry's own fault: fail it, not its batch
                    outcomes.append(exc)
                    continue
                lines.append(line)
                outcomes.append(head)
            if lines:
                data = b"".join(lines)
                start = self._index.end
                try:
                    _write_all(self._fd, data)
                    if self._fsync_due():
                        os.fsync(self._fd)
                        self._last_fsync = self._monotonic()
                except OSError:
                    os.ftruncate(self._fd, start)  # never leave a torn or unconfirmed tail
                    raise
                self._index.consume(data, start)
            return outcomes

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
        async with self._lock:
            try:
                await asyncio.to_thread(os.fsync, self._fd)
            except OSError as exc:
                raise LedgerUnavailableError(f"ledger {self.path} fsync failed: {exc}") from exc
            self._last_fsync = self._monotonic()

    # -- reading -------------------------------------------------------------------------------

    async def _refresh(self) -> LineIndex:
        if self._closed:
            raise LedgerUnavailableError(f"ledger {self.path} is closed")
        async with self._lock:
            try:
                with self._thread_lock:
                    self._catch_up(repair=False)
            except OSError as exc:
                raise LedgerUnavailableError(f"ledger {self.path} read failed: {exc}") from exc
            return self._index

    async def head(self) -> AuditRef | None:
        return (await self._refresh()).head

    def _record_at(self, index: LineIndex, seq: int) -> LedgerRecord | None:
        line_no = index.line_of(seq)
        if line_no is None:
            return None
        start, stop = index.span(line_no)
        try:
            record = _RECORD.decode(os.pread(self._fd, stop - start, start))
        except OSError as exc:
            raise LedgerUnavailableError(f"ledger {self.path} read failed: {exc}") from exc
        except msgspec.DecodeError as exc:
            raise LedgerCorruptError(f"ledger {self.path} line {line_no + 1}: {exc}") from exc
        return record if record.seq == seq else None

    async def by_trace(self, trace_id: str) -> list[LedgerRecord]:
        index = await self._refresh()
        records = (self._record_at(index, seq) for seq in index.traces.get(trace_id, ()))
        return [record for record in records if record is not None]

    async def by_proposal(self, proposal_id: str) -> LedgerRecord | None:
        index = await self._refresh()
        seq = index.proposals.get(proposal_id)
        return None if seq is None else self._record_at(index, seq)

    async def read(
        self, start_seq: int = 1, end_seq: int | None = None
    ) -> AsyncIterator[LedgerRecord]:
        async for line in self.read_raw(start_seq, end_seq):
            try:
                record = _RECORD.decode(line)
            except msgspec.DecodeError as exc:
                raise LedgerCorruptError(f"ledger {self.path}: malformed record: {exc}") from exc
            if record.seq < start_seq:
                continue
            if end_seq is not None and record.seq > end_seq:
                return
            yield record

    async def read_raw(
        self, start_seq: int = 1, end_seq: int | None = None
    ) -> AsyncIterator[bytes]:
        index = await self._refresh()
        first = index.line_of(start_seq) if start_seq > 1 else 0
        if first is not None and first < len(index):
            begin = index.starts[first]
        elif index.head is not None and start_seq > index.head.seq:
            begin = index.end
        else:
            begin = 0  # unknown slot (a damaged file): read it all, the reader skips
        last = index.line_of(end_seq) if end_seq is not None else None
        stop = index.span(last)[1] + 1 if last is not None else index.end
        try:
            for line in self._lines(begin, stop):
                yield line
        except OSError as exc:
            raise LedgerUnavailableError(f"ledger {self.path} read failed: {exc}") from exc

    def _lines(self, begin: int, stop: int) -> Iterator[bytes]:
        carry = b""
        pos = begin
        while pos < stop:
            chunk = os.pread(self._fd, min(_CHUNK, stop - pos), pos)
            if not chunk:
                break
            pos += len(chunk)
            lines = (carry + chunk).split(b"\n")
            carry = lines.pop()
            yield from lines

    # -- health and lifecycle ------------------------------------------------------------------

    async def ping(self) -> None:
        if self._closed or self.read_only:
            raise LedgerUnavailableError(f"ledger {self.path} is closed or read-only")
        try:
            opened, current = os.fstat(self._fd), os.stat(self.path)
            if (opened.st_dev, opened.st_ino) != (current.st_dev, current.st_ino):
                raise LedgerUnavailableError(f"ledger {self.path} was replaced or removed")
            if os.fstatvfs(self._fd).f_bavail == 0:
                raise LedgerUnavailableError(f"no space left for ledger {self.path}")
        except OSError as exc:
            raise LedgerUnavailableError(f"ledger {self.path} is unavailable: {exc}") from exc

    async def close(self) -> None:
        if self._closed:
            return
        async with self._lock:
            if self._pending:
                batch, self._pending = self._pending, []
                await asyncio.shield(self._flush(batch))
            self._closed = True
            try:
                if not self.read_only:
                    await asyncio.to_thread(os.fsync, self._fd)
            except OSError as exc:
                raise LedgerUnavailableError(f"ledger {self.path} fsync failed: {exc}") from exc
            finally:
                os.close(self._fd)

    async def __aenter__(self) -> JsonlLedgerSink:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


class _Flock:
    """Exclusive ``flock`` on a file descriptor for the duration of a ``with`` block."""

    __slots__ = ("_fd",)

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def __enter__(self) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def __exit__(self, *exc_info: object) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
