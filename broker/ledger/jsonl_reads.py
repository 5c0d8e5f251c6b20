"""The reading side of :class:`~broker.ledger.jsonl.JsonlLedgerSink`: the head, lookups by trace,
session and proposal through the index beside the file, and reads by seq range.

A base class of the sink, which owns the file, its tail, the index and the group commit's lock
read here; kept apart from the appending side it shares them with. Every read first brings the
tail up to date (another process may have appended), under the same lock as appends.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import TypeVar

import msgspec

from broker.ledger.batching import GroupCommit
from broker.ledger.errors import LedgerCorruptError, LedgerUnavailableError
from broker.ledger.jsonl_file import iter_line_batches
from broker.ledger.jsonl_index import LookupIndex, Span
from broker.ledger.jsonl_tail import ChainTail, read_tail
from broker.ledger.model import AuditRef, LedgerEntry, LedgerRecord
from broker.ledger.sink import one_by_one

__all__ = ["JsonlReads"]

_Key = TypeVar("_Key")
_Found = TypeVar("_Found")
_RECORD = msgspec.json.Decoder(LedgerRecord)


class JsonlReads:
    """Reads over the sink's file (the ``RawRecordSource`` and ``RawBatchSource`` sides, and
    ``LedgerSink``'s lookups)."""

    path: Path
    _fd: int
    _tail: ChainTail
    _index: LookupIndex
    _commits: GroupCommit[LedgerEntry, AuditRef]
    _closed: bool

    async def _refresh(self, *, lookups: bool = True) -> ChainTail:
        """The tail as of now, and (with ``lookups``) an index that covers every line before it."""
        if self._closed:
            raise LedgerUnavailableError(f"ledger {self.path} is closed")
        async with self._commits.lock:
            try:
                self._tail = read_tail(self._fd, self._tail, self.path, repair=False)
                if lookups:
                    self._index.catch_up(self._fd, self._tail.end)
            except (OSError, sqlite3.Error) as exc:
                raise LedgerUnavailableError(f"ledger {self.path} read failed: {exc}") from exc
            return self._tail

    async def head(self) -> AuditRef | None:
        return (await self._refresh(lookups=False)).head

    async def by_trace(self, trace_id: str) -> list[LedgerRecord]:
        await self._refresh()
        return self._records_at(self._lookup(self._index.spans_of_trace, trace_id))

    async def by_session(self, session_id: str) -> list[LedgerRecord]:
        await self._refresh()
        return self._records_at(self._lookup(self._index.spans_of_session, session_id))

    async def by_proposal(self, proposal_id: str) -> LedgerRecord | None:
        await self._refresh()
        span = self._lookup(self._index.span_of_proposal, proposal_id)
        found = self._records_at([span] if span is not None else [])
        return found[0] if found else None

    def _lookup(self, find: Callable[[_Key], _Found], key: _Key) -> _Found:
        try:
            return find(key)
        except sqlite3.Error as exc:
            raise LedgerUnavailableError(f"ledger {self.path} index failed: {exc}") from exc

    def _records_at(self, spans: Iterable[Span]) -> list[LedgerRecord]:
        """The records the index places at ``spans``, read back from the file; a span that no
        longer holds its seq (the index is a cache; the file is the truth) is left out."""
        records = []
        for seq, start, stop in spans:
            try:
                record = _RECORD.decode(os.pread(self._fd, stop - start, start))
            except OSError as exc:
                raise LedgerUnavailableError(f"ledger {self.path} read failed: {exc}") from exc
            except msgspec.DecodeError as exc:
                raise LedgerCorruptError(f"ledger {self.path} at byte {start}: {exc}") from exc
            if record.seq == seq:
                records.append(record)
        return records

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

    def read_raw(self, start_seq: int = 1, end_seq: int | None = None) -> AsyncIterator[bytes]:
        return one_by_one(self.read_raw_batches(start_seq, end_seq))

    async def read_raw_batches(
        self, start_seq: int = 1, end_seq: int | None = None
    ) -> AsyncIterator[list[bytes]]:
        # Reading from the start needs no index (what `ledger verify` does over a whole file).
        tail = await self._refresh(lookups=start_seq > 1 or end_seq is not None)
        first = self._lookup(self._index.span_of_seq, start_seq) if start_seq > 1 else None
        if first is not None:
            begin = first[0]
        elif start_seq > 1 and tail.head is not None and start_seq > tail.head.seq:
            begin = tail.end
        else:
            begin = 0  # the start, or an unknown slot (a damaged file): read it all, skip ahead
        last = self._lookup(self._index.span_of_seq, end_seq) if end_seq is not None else None
        stop = last[1] + 1 if last is not None else tail.end
        try:
            for lines in iter_line_batches(self._fd, begin, stop):
                yield lines
        except OSError as exc:
            raise LedgerUnavailableError(f"ledger {self.path} read failed: {exc}") from exc
