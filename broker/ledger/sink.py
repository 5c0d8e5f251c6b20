"""The LedgerSink protocol every backend implements, and the optional raw-read extension."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Protocol, TypeVar, runtime_checkable

from broker.ledger.model import AuditRef, LedgerEntry, LedgerRecord

__all__ = [
    "LedgerSink",
    "RawBatchSource",
    "RawRecordSource",
    "SupportsSync",
    "closing",
    "one_by_one",
]

_Iterator = TypeVar("_Iterator", bound=AsyncIterator[object])


class LedgerSink(Protocol):
    """Where sealed records go: append-only, hash-chained, one record per proposal."""

    def append(self, entry: LedgerEntry) -> Awaitable[AuditRef]:
        """Seal ``entry`` (assign seq, prev_hash, hash) and store it, durable per the sink's policy.

        Awaitable rather than necessarily a coroutine: a sink may hand out a future as it is.

        Raises:
            LedgerUnavailableError: nothing was confirmed written; the broker must fail closed.
            ValueError: the entry itself is malformed (a caller bug).
        """
        ...

    async def head(self) -> AuditRef | None:
        """The last record's (seq, hash), or ``None`` for an empty ledger."""
        ...

    def read(self, start_seq: int = 1, end_seq: int | None = None) -> AsyncIterator[LedgerRecord]:
        """Records ``start_seq``..``end_seq`` (inclusive; ``None`` = to the head), in seq order."""
        ...

    async def by_trace(self, trace_id: str) -> list[LedgerRecord]:
        """Every record of a trace, in seq order."""
        ...

    async def by_session(self, session_id: str) -> list[LedgerRecord]:
        """Every record of a session, in seq order (records without a session_id are in none)."""
        ...

    async def by_proposal(self, proposal_id: str) -> LedgerRecord | None:
        """The record of a proposal (the latest, should a proposal id be appended twice)."""
        ...

    async def ping(self) -> None:
        """Return if the ledger can be written now; raise ``LedgerUnavailableError`` otherwise."""
        ...

    async def close(self) -> None:
        """Flush what the policy deferred and release resources; idempotent."""
        ...


@runtime_checkable
class RawRecordSource(Protocol):
    """Sinks that can hand out stored bytes, one line at a time: what verify and export read
    when the sink is not also a ``RawBatchSource``, so nothing is re-encoded."""

    def read_raw(self, start_seq: int = 1, end_seq: int | None = None) -> AsyncIterator[bytes]:
        """Stored records (no trailing newline) in STORAGE order, starting at ``start_seq``'s slot.

        Storage order is not trusted: the verifier checks it, so a tampered store yields what it
        holds (gaps, duplicates, swapped records) rather than what the index believes.
        """
        ...


@runtime_checkable
class RawBatchSource(Protocol):
    """Sinks that hand out stored bytes a list at a time: verify's reader, one await per list.

    Per line, an async iterator costs about as much as a tenth of checking the line.
    """

    def read_raw_batches(
        self, start_seq: int = 1, end_seq: int | None = None
    ) -> AsyncIterator[list[bytes]]:
        """What ``read_raw`` yields, in the same order, in lists of one read from storage each."""
        ...


@runtime_checkable
class SupportsSync(Protocol):
    """Sinks whose durability policy may defer work: ``sync`` makes every appended record durable."""

    async def sync(self) -> None: ...


async def one_by_one(batches: AsyncIterator[list[bytes]]) -> AsyncGenerator[bytes, None]:
    """The lines of ``batches``, one at a time: ``read_raw`` of a ``RawBatchSource``.

    ``batches`` is closed with this generator, so a reader that stops early leaves no read (and
    no prefetch) pending.
    """
    async with closing(batches):
        async for lines in batches:
            for line in lines:
                yield line


@asynccontextmanager
async def closing(iterator: _Iterator) -> AsyncGenerator[_Iterator, None]:
    """Close ``iterator`` on the way out when it can be closed (async generators, e.g. a sink's
    reads; ``contextlib.aclosing`` insists on it): a reader that stops early, or at a bad
    record, must not leave a read (and its prefetch) pending."""
    try:
        yield iterator
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            await aclose()
