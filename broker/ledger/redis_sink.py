"""RedisLedgerSink: the hash chain in Redis, extended by one compare-and-append Lua script.

Keys (one hash tag, so the script runs on Redis Cluster)::

    <prefix>:{ledger}:records       HASH  seq -> stored record (the JSONL line, no newline)
    <prefix>:{ledger}:head          STRING "<seq> <hash>" of the last record
    <prefix>:{ledger}:proposals     HASH  proposal_id -> seq
    <prefix>:{ledger}:trace:<id>    LIST  seqs of a trace, in append order
    <prefix>:{ledger}:session:<id>  LIST  seqs of a session, in append order (records with a
                                          session_id only)
    <prefix>:{ledger}:checkpoints   LIST  signed checkpoints (RedisCheckpointStore)

The chain hash is computed client-side (Redis Lua has no SHA-256), so appends are optimistic: the
client seals a batch against the head it believes in; the script appends only if the head is still
that one, otherwise it returns the current head and the client re-seals and retries. Several
processes can therefore append concurrently without forking the chain or losing a record.

Durability is Redis's: run it with ``appendonly yes`` (and ``appendfsync always`` for the
``"always"`` guarantee of the file sink); a record is acknowledged once the script returned.
If the connection drops after the script ran but before its reply arrived, ``append`` raises
``LedgerUnavailableError`` although the record exists: the ledger then holds one record more
than the broker acknowledged, never one less.

A dead pooled connection (after a Redis restart every pooled socket is) is not a dead Redis: on
a connection fault the pool's idle sockets are dropped, the ``proposals`` index says whether the
batch landed, and only if it did not is it appended once more. Without that, the first appends
after a restart failed although Redis was up, and their proposals were answered unrecorded
(``tests/integration/test_ledger_redis_restart.py``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import msgspec
import redis.asyncio as redis_asyncio
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, ResponseError

from broker.ledger.batching import GroupCommit
from broker.ledger.errors import LedgerCorruptError, LedgerUnavailableError
from broker.ledger.model import AuditRef, LedgerEntry, LedgerRecord
from broker.ledger.sealing import seal
from broker.ledger.sink import one_by_one

__all__ = ["RedisLedgerSink", "ledger_key"]

_log = logging.getLogger("broker.ledger")
_RECORD = msgspec.json.Decoder(LedgerRecord)
_T = TypeVar("_T")
_READ_CHUNK = 1000
_YIELD_EVERY = 100  # lines handed out between event-loop turns in read_raw_batches
_MAX_BATCH = 256

# KEYS: records, head, proposals, then one trace list per record, then one session list per record
# that has a session_id. ARGV: expected head ("" for an empty chain), first seq, then (record,
# head after it, proposal id, KEYS index of its session list or 0 for none) per record. Checks
# everything before writing anything: a script that errors half-way keeps its earlier writes.
_APPEND_LUA = """
local head = redis.call('GET', KEYS[2]) or ''
if head ~= ARGV[1] then
  return {0, head}
end
local first = tonumber(ARGV[2])
local n = (#ARGV - 2) / 4
for i = 0, n - 1 do
  if redis.call('HEXISTS', KEYS[1], first + i) == 1 then
    return redis.error_reply('LEDGER_CORRUPT seq ' .. (first + i) .. ' exists beyond the head')
  end
end
for i = 0, n - 1 do
  local seq = first + i
  redis.call('HSET', KEYS[1], seq, ARGV[3 + 4 * i])
  redis.call('HSET', KEYS[3], ARGV[5 + 4 * i], seq)
  redis.call('RPUSH', KEYS[4 + i], seq)
  local session = tonumber(ARGV[6 + 4 * i])
  if session > 0 then
    redis.call('RPUSH', KEYS[session], seq)
  end
end
redis.call('SET', KEYS[2], ARGV[4 + 4 * (n - 1)])
return {1, first + n - 1}
"""


def ledger_key(prefix: str, name: str) -> str:
    """The key ``name`` of the ledger under ``prefix`` (hash-tagged ``{ledger}``)."""
    return f"{prefix}:{{ledger}}:{name}"


def _head_value(ref: AuditRef) -> str:
    return f"{ref.seq} {ref.hash}"


def _parse_head(value: bytes | str | None) -> AuditRef | None:
    if not value:
        return None
    text = value.decode() if isinstance(value, bytes) else value
    seq, _, digest = text.partition(" ")
    return AuditRef(int(seq), digest)


def _as_bytes(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else value


class RedisLedgerSink:
    """A ``LedgerSink`` (and ``RawRecordSource``, ``RawBatchSource``) over Redis.

    Args:
        client: a ``redis.asyncio.Redis`` (either ``decode_responses`` setting works).
        prefix: key namespace; must not contain braces (the hash tag is ``{ledger}``).
        max_cas_retries: re-seal attempts when other writers keep moving the head.

    Attributes:
        cas_retries: how many times an append had to re-seal because the head moved (a metric).
    """

    def __init__(
        self, client: redis_asyncio.Redis, *, prefix: str, max_cas_retries: int = 100
    ) -> None:
        if "{" in prefix or "}" in prefix:
            raise ValueError(f"ledger prefix must not contain braces: {prefix!r}")
        self.client = client
        self.prefix = prefix
        self.max_cas_retries = max_cas_retries
        self.cas_retries = 0
        self.records_key = ledger_key(prefix, "records")
        self.head_key = ledger_key(prefix, "head")
        self.proposals_key = ledger_key(prefix, "proposals")
        self._append_script = client.register_script(_APPEND_LUA)
        self._head: AuditRef | None = None
        self._head_known = False
        self._commits = GroupCommit(
            self._append_batch, name=f"redis ledger {prefix}", max_batch=_MAX_BATCH
        )
        self._closed = False

    def trace_key(self, trace_id: str) -> str:
        return ledger_key(self.prefix, f"trace:{trace_id}")

    def session_key(self, session_id: str) -> str:
        return ledger_key(self.prefix, f"session:{session_id}")

    async def _call(self, action: Callable[[], Awaitable[_T]]) -> _T:
        if self._closed:
            raise LedgerUnavailableError("redis ledger is closed")
        try:
            return await action()
        except ResponseError as exc:
            if "LEDGER_CORRUPT" in str(exc):
                raise LedgerCorruptError(f"redis ledger {self.prefix}: {exc}") from exc
            raise LedgerUnavailableError(f"redis ledger {self.prefix}: {exc}") from exc
        except (TimeoutError, RedisError, OSError) as exc:
            raise LedgerUnavailableError(f"redis ledger {self.prefix}: {exc}") from exc

    # -- appending -----------------------------------------------------------------------------

    async def _landed(self, proposal_ids: list[str]) -> bool:
        """Whether an append of these proposals happened (the script indexes each, atomically
        with its record: all of them or none)."""
        seqs = await self._call(lambda: self.client.hmget(self.proposals_key, proposal_ids))
        return all(seq is not None for seq in seqs)

    def append(self, entry: LedgerEntry) -> asyncio.Future[AuditRef]:
        """``LedgerSink.append``: the future the group commit answers, awaited as it is."""
        if self._closed:
            raise LedgerUnavailableError("redis ledger is closed")
        return self._commits.submit(entry)

    async def _append_batch(self, entries: list[LedgerEntry]) -> list[AuditRef | Exception]:
        head = self._head
        refreshed = False
        for _ in range(self.max_cas_retries + 1):
            outcomes: list[AuditRef | Exception] = []
            batch: list[tuple[bytes, AuditRef, LedgerEntry]] = []
            sealed = head
            for entry in entries:
                try:
                    line, sealed = seal(entry, sealed)
                except Exception as exc:  # this entry's own fault: fail it, not its batch
                    outcomes.append(exc)
                    continue
                outcomes.append(sealed)
                batch.append((line, sealed, entry))
            if not batch:
                return outcomes
            keys = [self.records_key, self.head_key, self.proposals_key]
            keys.extend(self.trace_key(entry.trace_id) for _, _, entry in batch)
            args: list[str | bytes | int] = ["" if head is None else _head_value(head)]
            args.append(1 if head is None else head.seq + 1)
            for line, ref, entry in batch:
                session = 0
                if entry.session_id is not None:
                    keys.append(self.session_key(entry.session_id))
                    session = len(keys)  # its index in Lua's 1-based KEYS
                args.extend((line[:-1], _head_value(ref), entry.proposal_id, session))
            try:
                reply: list[Any] = await self._call(
                    lambda: self._append_script(keys=keys, args=args)  # noqa: B023
                )
            except LedgerUnavailableError as exc:
                if not isinstance(exc.__cause__, RedisConnectionError) or refreshed:
                    raise
                # A dead pooled connection (Redis restarted, or a proxy dropped it): Redis
                # itself may be fine. Drop the idle sockets; if the batch landed before the
                # reply was lost, it is done, else it is appended once more (never twice).
                refreshed = True
                await self.client.connection_pool.disconnect(inuse_connections=False)
                if await self._landed([entry.proposal_id for _, _, entry in batch]):
                    self._head_known = False  # learn the head at the next append
                    return outcomes
                continue
            if int(reply[0]) == 1:
                self._head, self._head_known = sealed, True
                return outcomes
            head = _parse_head(reply[1])
            if self._head_known:  # the first append of a sink merely learns the head
                self.cas_retries += 1
            self._head_known = True
        raise LedgerUnavailableError(
            f"redis ledger {self.prefix}: head kept moving, gave up after "
            f"{self.max_cas_retries} retries"
        )

    # -- reading -------------------------------------------------------------------------------

    async def head(self) -> AuditRef | None:
        return _parse_head(await self._call(lambda: self.client.get(self.head_key)))

    async def _fetch(self, seqs: list[int]) -> list[bytes | None]:
        if not seqs:
            return []
        values: list[bytes | str | None] = await self._call(
            lambda: self.client.hmget(self.records_key, seqs)
        )
        return [None if value is None else _as_bytes(value) for value in values]

    @staticmethod
    def _decode(raw: bytes) -> LedgerRecord:
        try:
            return _RECORD.decode(raw)
        except msgspec.DecodeError as exc:
            raise LedgerCorruptError(f"malformed ledger record: {exc}") from exc

    def read_raw(self, start_seq: int = 1, end_seq: int | None = None) -> AsyncIterator[bytes]:
        return one_by_one(self.read_raw_batches(start_seq, end_seq))

    async def read_raw_batches(
        self, start_seq: int = 1, end_seq: int | None = None
    ) -> AsyncIterator[list[bytes]]:
        if end_seq is None:
            head = await self.head()
            count: int = await self._call(lambda: self.client.hlen(self.records_key))
            end_seq = max(head.seq if head else 0, count)
        chunks = [
            list(range(first, min(first + _READ_CHUNK, end_seq + 1)))
            for first in range(max(start_seq, 1), end_seq + 1, _READ_CHUNK)
        ]
        if not chunks:
            return
        # Fetch the next chunk while the caller works through this one (verify is CPU-bound).
        ahead = asyncio.ensure_future(self._fetch(chunks[0]))
        try:
            for following in [*chunks[1:], None]:
                values = await ahead
                if following is not None:
                    ahead = asyncio.ensure_future(self._fetch(following))
                for start in range(0, len(values), _YIELD_EVERY):
                    # Handing out lines never suspends, and redis-py takes several loop turns to
                    # send a command and read its reply: without a turn now and then, the fetch
                    # of the next chunk would only start at the next ``await ahead`` and the
                    # caller would wait for it instead of checking while Redis answers.
                    await asyncio.sleep(0)
                    lines = [raw for raw in values[start : start + _YIELD_EVERY] if raw is not None]
                    if lines:
                        yield lines
        finally:
            if not ahead.done():
                ahead.cancel()
            elif not ahead.cancelled():
                ahead.exception()  # the caller stopped early: a late failure is not news

    async def read(
        self, start_seq: int = 1, end_seq: int | None = None
    ) -> AsyncIterator[LedgerRecord]:
        async for raw in self.read_raw(start_seq, end_seq):
            yield self._decode(raw)

    async def by_trace(self, trace_id: str) -> list[LedgerRecord]:
        return await self._by_list(self.trace_key(trace_id))

    async def by_session(self, session_id: str) -> list[LedgerRecord]:
        return await self._by_list(self.session_key(session_id))

    async def _by_list(self, key: str) -> list[LedgerRecord]:
        """The records whose seqs the LIST ``key`` holds, in its order."""
        members: list[bytes | str] = await self._call(lambda: self.client.lrange(key, 0, -1))
        seqs = [int(member) for member in members]
        raws = await self._fetch(seqs)
        records = [self._decode(raw) for raw in raws if raw is not None]
        wanted = set(seqs)
        return [record for record in records if record.seq in wanted]

    async def by_proposal(self, proposal_id: str) -> LedgerRecord | None:
        seq = await self._call(lambda: self.client.hget(self.proposals_key, proposal_id))
        if seq is None:
            return None
        (raw,) = await self._fetch([int(seq)])
        return None if raw is None else self._decode(raw)

    # -- health and lifecycle ------------------------------------------------------------------

    async def ping(self) -> None:
        """A real write, so a read-only replica or an OOM ``noeviction`` Redis is reported."""
        await self._call(lambda: self.client.set(ledger_key(self.prefix, "ping"), "1", px=60_000))

    async def sync(self) -> None:
        """Nothing to do: a record is as durable as Redis once the script returned."""

    async def close(self) -> None:
        """Flush pending appends; the client belongs to the caller and stays open."""
        async with self._commits.lock:
            await self._commits.drain()
            self._closed = True

    async def __aenter__(self) -> RedisLedgerSink:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
