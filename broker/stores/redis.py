"""The shared store: Redis (standalone or Cluster), one Lua script per admission and settlement.

Semantics are those of :class:`~broker.stores.memory.MemoryStore`, decided inside Redis so that
every broker process sharing the store sees one state:

* ``admit`` is one script (``lua/admit.lua``): idempotency claim, budget reservations and
  rate-limit hits, all checked before the first write and then all taken, or nothing.
* ``settle`` is one script (``lua/settle.lua``: compare-and-set on the owner token, refunds,
  stored response), which on a standalone Redis also stores the decision record; on a Cluster
  the record lives in another slot, and its ``SET`` is sent concurrently with the script.
* ``dispatch`` is one script (``lua/dispatch.lua``): the mark, compare-and-set on the owner.
* ``lookup`` is one script; ``save_decision`` and ``load_decision`` one command each.

A claim past its lease that a script cannot complete alone (one never dispatched holds budget
counters it was not given as keys; a dispatched one may have a ledger record to settle from) is
answered ``lapsed``, untouched: the store reads the ledger if it should, completes the claim with
``lua/recover.lua`` (its counters declared: :mod:`~broker.stores.redis_recovery`) and sends the
first call again. Only keys whose process died mid-call take that path.

The parts, each in a module of its own: where keys live (:mod:`~broker.stores.redis_keys`), the
scripts and their arguments (:mod:`~broker.stores.redis_scripts`), their replies read
(:mod:`~broker.stores.redis_replies`), how calls reach Redis and how faults become
:class:`~broker.taxonomy.StoreUnavailableError` (:mod:`~broker.stores.redis_transport`:
redis-py's public API), and the startup safety check (:mod:`~broker.stores.redis_safety`). The
approvals (:mod:`~broker.stores.redis_approvals`), the registered tools
(:mod:`~broker.stores.redis_catalog`) and the expiring values
(:mod:`~broker.stores.redis_expiring`) bring their store methods as base classes of
:class:`RedisStore`; this module holds admission, settlement and the decision records.

Decision records are keyed by proposal id alone (see :mod:`~broker.stores.redis_keys`), not in
the tenant's slot, hence the separate ``SET`` on a Cluster. Either way the record is saved
whatever the owner compare-and-set finds, as the reference store saves it unconditionally.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any, TypeVar, cast

import msgspec
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from broker.ids import new_lease_owner
from broker.stores.base import (
    Admission,
    AdmitResult,
    Admitted,
    ClaimRequest,
    Conflict,
    DecisionRecord,
    Limited,
    OutcomeSource,
    Replay,
    Resolution,
    ResolveVerdict,
    Settlement,
    StoredResponse,
    StuckClaims,
    Ticket,
    rate_retry_after,
)
from broker.stores.redis_approvals import RedisApprovals, RedisStoreApprovals
from broker.stores.redis_catalog import RedisCatalog, RedisStoreCatalog
from broker.stores.redis_expiring import RedisExpiring, RedisStoreExpiring
from broker.stores.redis_keys import KeySpace
from broker.stores.redis_recovery import LapsedClaims
from broker.stores.redis_replies import as_bytes, as_str, idem_verdict
from broker.stores.redis_safety import check_redis_safety  # re-exported: the startup check
from broker.stores.redis_scripts import (
    ScriptCall,
    build_admit,
    build_dispatch,
    build_lookup,
    build_resolve,
    build_settle,
    num,
    script_sources,
    table,
)
from broker.stores.redis_transport import (
    REDIS_FAULTS,
    RedisClient,
    StockTransport,
    Transport,
    guard,
    unavailable,
)
from broker.taxonomy import StoreUnavailableError

__all__ = ["RedisStore", "check_redis_safety"]


_T = TypeVar("_T")

_UNKNOWN = Conflict("outcome_unknown")
_RESOLVE_VERDICTS = frozenset({"resolved", "absent", "reused", "in_progress", "settled"})


async def _both(first: Awaitable[_T], second: Awaitable[Any]) -> tuple[_T, Any]:
    """Run both to completion (neither is abandoned half-way), then raise the first fault."""
    results = await asyncio.gather(first, second, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return cast(_T, results[0]), results[1]


class RedisStore(RedisStoreApprovals, RedisStoreCatalog, RedisStoreExpiring):
    """Redis implementation of :class:`~broker.stores.Store`.

    Args:
        client: a ``redis.asyncio.Redis`` or ``RedisCluster`` with ``decode_responses=False``.
            Give it a ``socket_timeout`` and no retries (see :meth:`from_url`): a resent script
            may run twice. On a standalone Redis the store's calls go over connections of their
            own, opened with the client's settings, and each batch of calls as a whole is
            bounded by that ``socket_timeout``.
        prefix: the first segment of every key, so several brokers can share one Redis.
    """

    def __init__(self, client: RedisClient, *, prefix: str = "broker") -> None:
        if client.get_encoder().decode_responses:
            raise ValueError("RedisStore needs a client with decode_responses=False")
        self._client = client
        self._standalone = isinstance(client, Redis)
        self._keys = KeySpace(prefix)
        self._unknown_index = f"{prefix}:unknown"
        """A set of the idempotency keys of unknown outcome (for the gauge, see resolve)."""
        self._owns_client = False
        self._transport: Transport = StockTransport(client, script_sources())
        self._catalog = RedisCatalog(client, self._keys, self._transport)
        self._approvals = RedisApprovals(client, prefix)
        self._expiring = RedisExpiring(client, self._transport, self._keys)
        self._decisions = msgspec.msgpack.Decoder(DecisionRecord)
        self._encoder = msgspec.msgpack.Encoder()
        self._lapsed = LapsedClaims(self._transport, self._index_unknown)

    def recover_from(self, outcomes: OutcomeSource | None) -> None:
        self._lapsed.outcomes = outcomes

    @property
    def prefix(self) -> str:
        """The first segment of every key this store writes."""
        return self._keys.prefix

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        prefix: str = "broker",
        socket_timeout: float = 0.5,
        cluster: bool = False,
    ) -> RedisStore:
        """Build the store with its own connection pool; call it once per process, at startup.

        No command is retried by the client (a timed-out script may have run), every exchange
        with Redis is bounded by ``socket_timeout``; :meth:`close` releases the pool.
        """
        no_retry = Retry(NoBackoff(), 0)
        client: RedisClient
        if cluster:
            client = RedisCluster.from_url(
                url,
                socket_timeout=socket_timeout,
                socket_connect_timeout=socket_timeout,
                retry=no_retry,
            )
        else:
            client = Redis.from_url(
                url,
                socket_timeout=socket_timeout,
                socket_connect_timeout=socket_timeout,
                retry=no_retry,
            )
        store = cls(client, prefix=prefix)
        store._owns_client = True
        return store

    @property
    def keys(self) -> KeySpace:
        return self._keys

    @property
    def client(self) -> RedisClient:
        """The client this store talks through (for startup checks such as the safety check)."""
        return self._client

    # -- Store protocol -------------------------------------------------------------------------

    async def admit(self, admission: Admission, *, now: float, dry_run: bool) -> AdmitResult:
        owner = new_lease_owner()
        call, windows = build_admit(
            self._keys,
            admission,
            now=now,
            dry_run=dry_run,
            owner=owner,
            consult=self._lapsed.consult,
        )
        reply = await self._lapsed.run(call, now)
        if not reply:
            raise StoreUnavailableError("empty admit reply from Redis")
        tag = reply[0]  # compared as bytes: the common replies need no decoding
        if tag == b"admitted":
            if dry_run:
                return Admitted(Ticket(tenant=admission.tenant, claim=None, owner=None, charges=()))
            return Admitted(
                Ticket(
                    tenant=admission.tenant,
                    claim=admission.claim,
                    owner=owner if admission.claim is not None else None,
                    charges=windows,
                    used=tuple(map(int, reply[1:])),
                )
            )
        if tag == b"budget":
            charge, window = windows[int(reply[1]) - 1]
            return Limited("budget", charge.name, (window + 1) * charge.window_s - now)
        if tag == b"rate":
            hit = admission.hits[int(reply[1]) - 1]
            oldest = float(as_str(reply[2]))
            return Limited("rate", hit.name, rate_retry_after(oldest, hit.window_s, now))
        verdict = idem_verdict(reply, now)
        if admission.claim is not None and verdict == _UNKNOWN:
            await self._index_unknown(admission.claim)
        return verdict

    async def lookup(self, claim: ClaimRequest, *, now: float) -> Replay | Conflict | None:
        call = build_lookup(self._keys, claim, now=now, consult=self._lapsed.consult)
        reply = await self._lapsed.run(call, now)
        if not reply:
            return None
        verdict = idem_verdict(reply, now)
        if verdict == _UNKNOWN:
            await self._index_unknown(claim)
        return verdict

    async def resolve(
        self,
        claim: ClaimRequest,
        resolution: Resolution,
        *,
        response: StoredResponse | None,
        ttl_s: int,
        now: float,
    ) -> ResolveVerdict:
        stored = b"" if response is None else self._encoder.encode(response)
        call = build_resolve(
            self._keys,
            claim,
            resolution,
            response=stored,
            ttl_s=ttl_s,
            now=now,
            consult=self._lapsed.consult,
        )
        found = await self._lapsed.run(call, now)
        verdict = as_str(found[0]) if len(found) == 1 else ""
        if verdict not in _RESOLVE_VERDICTS:
            raise StoreUnavailableError(f"unexpected resolve reply from Redis: {verdict!r:.40}")
        if verdict == "resolved":
            await guard(self._client.srem(self._unknown_index, self._keys.idem(claim)))
        return cast(ResolveVerdict, verdict)

    async def unknown_keys(self) -> int:
        return int(await guard(self._client.scard(self._unknown_index)))

    async def _index_unknown(self, claim: ClaimRequest | str) -> None:
        """Add the key to the set the gauge counts. Apart from the scripts (the set has its own
        slot on a Cluster) and only on this rare path; best effort: the record itself is what
        keeps the key from running again, and the next look at it adds it again."""
        key = claim if isinstance(claim, str) else self._keys.idem(claim)
        with contextlib.suppress(StoreUnavailableError):
            await guard(self._client.sadd(self._unknown_index, key))

    async def dispatch(self, ticket: Ticket, *, proposal_id: str, now: float) -> bool:
        call = build_dispatch(self._keys, ticket, proposal_id=proposal_id)
        if call is None:
            return True
        return table(await self._transport.script(call)) == [1]

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
        stored = self._encoder.encode(response)
        if ttl_s <= 0:  # the record is already expired: only deleted, as save_decision does
            call = build_settle(
                self._keys, ticket, settlement, response=stored, ttl_s=ttl_s, now=now
            )
            settled = await self._transport.script(call)
            await self.save_decision(record, ttl_s=ttl_s)
            return table(settled) == [1]
        key, value = self._keys.decision(record.proposal_id), self._encoder.encode(record)
        # On a standalone Redis the script stores the record too (one command); on a Cluster
        # the record's key is in another slot, so its SET goes at the same time as the script.
        call = build_settle(
            self._keys,
            ticket,
            settlement,
            response=stored,
            ttl_s=ttl_s,
            now=now,
            record=(key, value) if self._standalone else None,
        )
        if self._standalone:
            settled = await self._transport.script(call)
        else:
            settled, _ = await _both(
                self._transport.script(call), self._transport.set(key, value, ttl_s * 1000)
            )
        ours = table(settled) == [1]
        if ours and settlement is Settlement.UNKNOWN and ticket.claim is not None:
            await self._index_unknown(ticket.claim)
        return ours

    async def complete_stuck(self, *, now: float, limit: int) -> StuckClaims:
        """One ``SCAN`` pass over this prefix's idempotency records, each resolved by
        ``lua/complete.lua`` (a record may have been settled between the scan and the script,
        which then leaves it alone). A pass reads the whole prefix: it runs every
        ``completer_interval_s``, not per proposal, and a page at a time."""
        released = unknown = settled = 0
        at, consult = num(now), "1" if self._lapsed.consult else "0"
        pattern = f"{self._keys.prefix}:*:idem:*"
        try:
            async for key in self._client.scan_iter(match=pattern, count=500):
                idem_key = as_str(key)
                call = ScriptCall("complete", (idem_key,), (at, consult))
                reply = await self._transport.script(call)
                if isinstance(reply, list):  # lapsed: recovered here
                    done = await self._lapsed.recover(idem_key, reply, now)
                else:
                    done = as_str(reply)
                    if done == "unknown":
                        await self._index_unknown(idem_key)
                released += done == "released"
                unknown += done == "unknown"
                settled += done == "settled"
                if released + unknown + settled >= limit:
                    break
        except REDIS_FAULTS as exc:
            raise unavailable(exc) from exc
        return StuckClaims(released=released, unknown=unknown, settled=settled)

    async def save_decision(self, record: DecisionRecord, *, ttl_s: int) -> None:
        key = self._keys.decision(record.proposal_id)
        if ttl_s <= 0:  # already expired, as in the reference store: nothing to read back
            await guard(self._client.delete(key))
            return
        await self._transport.set(key, self._encoder.encode(record), ttl_s * 1000)

    async def load_decision(self, proposal_id: str) -> DecisionRecord | None:
        raw = await self._transport.get(self._keys.decision(proposal_id))
        if raw is None:
            return None
        try:
            return self._decisions.decode(as_bytes(raw))
        except msgspec.DecodeError as exc:
            raise StoreUnavailableError("unreadable decision record in Redis") from exc

    # -- lifecycle ------------------------------------------------------------------------------

    async def ping(self) -> None:
        await guard(self._client.ping())

    async def close(self) -> None:
        await self._catalog.close()
        await self._transport.close()
        if self._owns_client:
            await guard(self._client.aclose())
