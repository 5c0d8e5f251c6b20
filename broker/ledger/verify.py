"""verify(): walk the chain and the signed checkpoints; report the first bad seq and why."""

from __future__ import annotations

import asyncio
import multiprocessing
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Iterable
from concurrent.futures import ProcessPoolExecutor
from contextlib import aclosing

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from broker.ledger.checkpoints import (
    Checkpoint,
    CheckpointFormatError,
    CheckpointStore,
    checkpoint_signature_ok,
)
from broker.ledger.keys import key_id
from broker.ledger.line_check import LineCheck, check_line
from broker.ledger.model import GENESIS_HASH, AuditRef, LedgerRecord
from broker.ledger.sealing import decode_seq
from broker.ledger.sink import (
    LedgerSink,
    RawBatchSource,
    RawRecordSource,
    closing,
    one_by_one,
)

__all__ = ["VerifyReport", "verify"]

_CHUNK = 2000
"""Lines per job when checking in worker processes: big enough that shipping a chunk costs far
less than checking it, small enough that a failure early in the file stops the walk soon."""
_BATCH = 500
"""Lines per list from sinks that hand out one line at a time."""
_CHECKS_ENCODER = msgspec.msgpack.Encoder()
_CHECKS_DECODER = msgspec.msgpack.Decoder(list[LineCheck])


class VerifyReport(msgspec.Struct, frozen=True, kw_only=True):
    """The verdict, shaped like ``GET /v1/audit/verify``.

    ``records`` counts records that verified; ``head`` is the hash of the last of them.
    """

    ok: bool
    records: int
    head: str | None
    first_bad_seq: int | None
    reason: str | None
    unsigned_tail: int = 0
    """Records that verified but no signature covers yet: those after the last checkpoint whose
    signature was checked (every record when no public key was given). A tail can be cut off
    unseen until the next checkpoint signs it."""


def stored_lines(sink: LedgerSink, start_seq: int = 1) -> AsyncGenerator[bytes, None]:
    """Stored bytes in storage order; re-encoded records for sinks that cannot hand out bytes."""
    return one_by_one(stored_batches(sink, start_seq))


async def stored_batches(sink: LedgerSink, start_seq: int = 1) -> AsyncGenerator[list[bytes], None]:
    """``stored_lines`` in lists: the sink's own when it has them, else up to ``_BATCH`` lines."""
    if isinstance(sink, RawBatchSource):
        async with closing(sink.read_raw_batches(start_seq)) as own_batches:
            async for own_batch in own_batches:
                yield own_batch
        return
    batch: list[bytes] = []
    async with closing(_one_line_at_a_time(sink, start_seq)) as lines:
        async for line in lines:
            batch.append(line)
            if len(batch) >= _BATCH:
                yield batch
                batch = []
    if batch:
        yield batch


def _one_line_at_a_time(sink: LedgerSink, start_seq: int) -> AsyncIterator[bytes]:
    if isinstance(sink, RawRecordSource):
        return sink.read_raw(start_seq)
    return _encoded(sink.read(start_seq))


async def _encoded(records: AsyncIterator[LedgerRecord]) -> AsyncGenerator[bytes, None]:
    async with closing(records):
        async for record in records:
            yield msgspec.json.encode(record)


async def verify(
    sink: LedgerSink,
    *,
    checkpoints: Iterable[Checkpoint] | CheckpointStore | None = None,
    public_key: Ed25519PublicKey | None = None,
    start_seq: int = 1,
    jobs: int = 1,
    expect_records: bool = False,
) -> VerifyReport:
    """Check the chain from ``start_seq`` to its end against itself and the checkpoints.

    With ``jobs`` > 1 the per-record work (decoding, re-canonicalizing, hashing) runs in that
    many worker processes, a chunk of lines each, while this process reads ahead and walks the
    chain in order over their verdicts: same checks, same report, faster on several cores.

    Checks, in order: checkpoint signatures (when ``public_key`` is given; without it checkpoints
    are still compared, which catches accidents but not an attacker who forges checkpoints),
    then per record: well-formed, seq contiguous, prev_hash linkage, args/result hashes, record
    hash, equality with every checkpoint at that seq; finally that the chain reaches the latest
    checkpoint. With ``start_seq`` N > 1, record N-1's hash is trusted as the anchor.

    ``first_bad_seq`` is the seq at which the chain stops being trustworthy: the slot where the
    expected record is missing, wrong or duplicated; for a rewrite with recomputed hashes, the
    first checkpoint that no longer matches; for truncation, one past the last record.

    With ``public_key`` at least one checkpoint is required (all of them correctly signed):
    without one, a chain rewritten with recomputed hashes would verify. With ``expect_records``
    a ledger with neither records nor checkpoints fails (a wrong path or key prefix reads as an
    empty ledger).
    """
    walk = _Walk(start_seq)
    try:
        points = await _load(checkpoints)
    except CheckpointFormatError as exc:
        return walk.fail(None, str(exc))
    if public_key is not None and not points:
        return walk.fail(
            None,
            "no signed checkpoint: a public key was given, so at least one is required (were "
            "the checkpoints deleted, or is this the wrong checkpoint store?)",
        )
    if public_key is not None:
        expected_key = key_id(public_key)
        for point in points:
            if not checkpoint_signature_ok(point, public_key):
                why = "" if point.key_id == expected_key else f", signed by key {point.key_id}"
                return walk.fail(
                    point.seq,
                    f"checkpoint signature invalid (seq {point.seq}, {point.time}{why})",
                )
    by_seq: dict[int, list[Checkpoint]] = {}
    for point in points:
        by_seq.setdefault(point.seq, []).append(point)
    walk.checkpoints = by_seq

    # The head the sink claims, read before the walk (appends racing it only extend the
    # chain): the chain must reach it. A sink that keeps its head apart from its records
    # (Redis) would otherwise hide a deleted last record from a verifier without checkpoints.
    claimed = await sink.head()
    if claimed is not None and claimed.seq >= start_seq:
        walk.claimed_head = claimed
    async with aclosing(stored_batches(sink, max(start_seq - 1, 1))) as batches:
        failure = await _walk_chain(walk, batches, start_seq, jobs)
    if failure is not None:
        return failure
    latest = max(points, key=lambda point: point.seq, default=None)
    last = walk.expected - 1
    if walk.claimed_head is not None and walk.claimed_head.seq > last:
        return walk.fail(
            last + 1,
            f"truncated: the ledger's head names seq {walk.claimed_head.seq} "
            f"but the chain ends at seq {last}",
        )
    if latest is not None and latest.seq > last:
        return walk.fail(
            last + 1,
            f"truncated: checkpoint at seq {latest.seq} ({latest.time}) "
            f"but the chain ends at seq {last}",
        )
    if expect_records and claimed is None and walk.records == 0 and not points:
        return walk.fail(
            start_seq,
            "empty ledger: no records, no head and no checkpoints where a ledger was expected "
            "(wrong path or key prefix?)",
        )
    signed_up_to = walk.last_matched if public_key is not None else start_seq - 1
    return VerifyReport(
        ok=True,
        records=walk.records,
        head=walk.head,
        first_bad_seq=None,
        reason=None,
        unsigned_tail=max(last - max(signed_up_to, start_seq - 1), 0),
    )


async def _walk_chain(
    walk: _Walk, batches: AsyncIterator[list[bytes]], start_seq: int, jobs: int
) -> VerifyReport | None:
    """Walk every stored line from ``start_seq`` (after its anchor); the first failure, if any."""
    first: list[bytes] = []
    if start_seq > 1:
        failure, first = await walk.anchor(batches)
        if failure is not None:
            return failure
    elif (mismatch := walk.against_checkpoints(0, GENESIS_HASH)) is not None:
        return mismatch
    async with aclosing(_chained(first, batches)) as chained:
        if jobs > 1:
            return await _walk_checked_in_workers(walk, chained, jobs)
        # The hot loop of a verify: no async step, no list per line, between two records.
        step = walk.step
        async for batch in chained:
            for line in batch:
                if (failure := step(check_line(line))) is not None:
                    return failure
    return None


async def _chained(
    first: list[bytes], rest: AsyncIterator[list[bytes]]
) -> AsyncGenerator[list[bytes], None]:
    if first:
        yield first
    async for batch in rest:
        yield batch


async def _walk_checked_in_workers(
    walk: _Walk, batches: AsyncIterator[list[bytes]], jobs: int
) -> VerifyReport | None:
    """``_walk_chain`` with ``check_line`` run in ``jobs`` worker processes, ``_CHUNK`` lines each.

    This process reads ahead while the workers check, and walks their verdicts in order.
    """
    loop = asyncio.get_running_loop()
    # "spawn": a worker needs only the line-checking code, never a copy of this process's loop,
    # threads and connections.
    pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"))
    in_flight: deque[asyncio.Future[bytes]] = deque()

    def walk_through(checks: bytes) -> VerifyReport | None:
        for found in _CHECKS_DECODER.decode(checks):
            if (failure := walk.step(found)) is not None:
                return failure
        return None

    try:
        chunk: list[bytes] = []
        async for batch in batches:
            chunk += batch
            while len(chunk) >= _CHUNK:
                in_flight.append(loop.run_in_executor(pool, _check_lines, chunk[:_CHUNK]))
                del chunk[:_CHUNK]
            while len(in_flight) > 2 * jobs:  # read ahead a little, never the whole file
                if (failure := walk_through(await in_flight.popleft())) is not None:
                    return failure
        if chunk:
            in_flight.append(loop.run_in_executor(pool, _check_lines, chunk))
        while in_flight:
            if (failure := walk_through(await in_flight.popleft())) is not None:
                return failure
        return None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _check_lines(lines: list[bytes]) -> bytes:
    # As msgpack: pickling the LineCheck structs one by one cost a worker a tenth of its time.
    return _CHECKS_ENCODER.encode([check_line(line) for line in lines])


async def _load(checkpoints: Iterable[Checkpoint] | CheckpointStore | None) -> list[Checkpoint]:
    if checkpoints is None:
        return []
    if isinstance(checkpoints, Iterable):
        return list(checkpoints)
    return await checkpoints.read_all()


class _Walk:
    """The verifier's state between records."""

    __slots__ = (
        "checkpoints",
        "claimed_head",
        "expected",
        "head",
        "last_matched",
        "prev_hash",
        "records",
    )

    def __init__(self, start_seq: int) -> None:
        self.claimed_head: AuditRef | None = None
        self.expected = start_seq
        self.prev_hash = GENESIS_HASH
        self.head: str | None = None
        self.records = 0
        self.checkpoints: dict[int, list[Checkpoint]] = {}
        self.last_matched = start_seq - 1

    def fail(self, seq: int | None, reason: str) -> VerifyReport:
        return VerifyReport(
            ok=False, records=self.records, head=self.head, first_bad_seq=seq, reason=reason
        )

    async def anchor(
        self, batches: AsyncIterator[list[bytes]]
    ) -> tuple[VerifyReport | None, list[bytes]]:
        """Take the hash of the record before ``expected`` on trust; the lines after it."""
        anchor_seq = self.expected - 1
        async for batch in batches:
            for index, line in enumerate(batch):
                try:
                    view = decode_seq(line)
                except msgspec.DecodeError:
                    continue
                if view.seq == anchor_seq:
                    self.prev_hash = self.head = view.hash
                    return self.against_checkpoints(anchor_seq, view.hash), batch[index + 1 :]
        return self.fail(anchor_seq, f"anchor record at seq {anchor_seq} not found"), []

    def against_checkpoints(self, seq: int, digest: str) -> VerifyReport | None:
        for point in self.checkpoints.get(seq, ()):
            if point.hash != digest:
                return self.fail(
                    seq,
                    f"record at seq {seq} differs from signed checkpoint ({point.time}): "
                    f"the chain was rewritten between seq {self.last_matched + 1} and {seq}",
                )
        if seq in self.checkpoints:
            self.last_matched = seq
        return None

    def step(self, found: LineCheck) -> VerifyReport | None:
        expected = self.expected
        if found.seq is None or found.problem == "malformed record":
            return self.fail(expected, "malformed record")
        if found.seq < expected:
            return self.fail(
                expected, f"duplicate seq: {found.seq} appears again where {expected} was expected"
            )
        if found.seq > expected:
            return self.fail(expected, f"seq gap: expected {expected} got {found.seq}")
        if found.prev_hash != self.prev_hash:
            return self.fail(expected, f"prev_hash does not link to seq {expected - 1}")
        if found.problem is not None:
            return self.fail(expected, found.problem)
        if expected in self.checkpoints and (
            mismatch := self.against_checkpoints(expected, found.hash)
        ):
            return mismatch
        claimed = self.claimed_head
        if claimed is not None and claimed.seq == expected and claimed.hash != found.hash:
            return self.fail(expected, f"record at seq {expected} differs from the ledger's head")
        self.prev_hash = self.head = found.hash
        self.expected = expected + 1
        self.records += 1
        return None
