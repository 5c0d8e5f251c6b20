"""The shared store: Redis (standalone or Cluster), one Lua script per admission and settlement.

Semantics are those of :class:`~broker.stores.memory.MemoryStore`, decided inside Redis so that
every broker process sharing the store sees one state:

* ``admit`` is one ``EVALSHA`` of ``lua/admit.lua``: idempotency claim, budget reservations and
  rate-limit hits, all checked before the first write and then all taken, or nothing.
* ``settle`` is one ``EVALSHA`` of ``lua/settle.lua`` (compare-and-set on the owner token,
  refunds, stored response), with the decision record ``SET`` pipelined behind it (one round
  trip; on a Cluster the two are sent concurrently, as they live in different slots).
* ``lookup`` is one script; ``save_decision`` and ``load_decision`` one command each.

Transport. With a standalone ``redis.asyncio.Redis`` these go over connections of the store's
own (:mod:`broker.stores.redis_wire`: hiredis packing, a plain free list, the exchanges of one
turn of the event loop sent as one pipeline under one timeout, replies matched to their callers
in the connection's protocol callback), because redis-py's per-command path, and a write, a read
and a wake-up per command, cost more CPU than the rest of a proposal's store work. Registry and
pub/sub calls, and every call on a Cluster, use the redis-py client itself. After NOSCRIPT (a
restarted or failed-over Redis) a script is sent once as ``EVAL``.

Time: every decision uses the caller's ``now`` (an exact 17-digit decimal, so Lua's ``tonumber``
gives back the same double) against timestamps stored in the values; the scripts derive every
other instant from it (``now`` plus a lease or TTL, added in the same double arithmetic as
Python's, see ``lua/clock.lua``). Redis TTLs (``PEXPIRE``, relative, plus a margin for clock skew
between brokers) only collect garbage. Retries: none. A timed-out script may still have run, so
sending it again could charge twice; the caller sees :class:`~broker.taxonomy.StoreUnavailableError`
instead and fails closed.

Keys. All keys of one script call carry the same ``{tenant}`` hash tag, so each call touches one
Cluster slot. Client-supplied strings never become key material: the idempotency key is a
SHA-256 of ``route \\x1f key``, budget and rate names/scopes are hashed, and a tenant that is not
a plain identifier is hashed into its tag::

    <prefix>:{<tenant>}:idem:<sha256(route \\x1f key)>          hash (see lua/idem.lua)
    <prefix>:{<tenant>}:bud:<sha256(name \\x1f scope)>:<window>  integer counter
    <prefix>:{<tenant>}:rate:<sha256(name \\x1f scope)>          ZSET sliding log
    <prefix>:{d.<sha256(proposal_id)>}:decision                 msgpack DecisionRecord
    <prefix>:{registry}:tools      hash: tool name -> msgpack record (no secret)
    <prefix>:{registry}:secrets    hash: tool name -> signing secret
    <prefix>:{registry}:version    the catalog version, bumped by every registration write

Registered tools share one slot (they are few, and a write must bump the version atomically);
every write also ``PUBLISH``es the new version on ``<prefix>:registry:changed``.

Decision records are read by proposal id alone (``GET /v1/proposals/{id}`` for an admin has no
tenant), so their key is derived from the proposal id only and tagged by its hash: that spreads
them over the cluster and keeps ``load_decision`` one ``GET``. A tenant-tagged copy inside the
settle script would need a pid -> tenant index in another slot anyway (a second write *and* a
second read). Writing the decision outside the script loses nothing: the reference store saves
it unconditionally, before and independently of the owner compare-and-set.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
from collections.abc import Awaitable, Sequence
from importlib import resources
from typing import Any, Protocol, TypeVar, cast

import msgspec
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError, RedisClusterException, RedisError, ResponseError

from broker.ids import new_lease_owner
from broker.remembered import Remembered
from broker.stores.base import (
    UNKNOWN_HOLD_S,
    Admission,
    AdmitResult,
    Admitted,
    BudgetCharge,
    ClaimRequest,
    Conflict,
    DecisionRecord,
    Limited,
    RegisteredTool,
    Replay,
    Settlement,
    StoredResponse,
    Ticket,
    ToolSnapshot,
    ToolWrite,
)
from broker.stores.redis_wire import Command, Wire
from broker.taxonomy import StoreUnavailableError

__all__ = [
    "KeySpace",
    "RedisStore",
    "ScriptCall",
    "build_admit",
    "build_lookup",
    "build_settle",
    "check_redis_safety",
]

RedisClient = Redis | RedisCluster
"""Either client works; a Cluster client routes each script by its (single) slot."""

_GC_MARGIN_S = 60
"""Added to every PEXPIRE. Decisions use timestamps stored in the values, TTLs only collect
garbage; the margin keeps a key alive for brokers whose clocks lag the writer's by up to this."""

_MAX_REMEMBERED_TENANTS = 4096
"""A bound on KeySpace's memory of tenant prefixes, whatever tokens a deployment mints."""

_MAX_REMEMBERED_STEMS = 16_384
"""A bound on KeySpace's memory of budget and rate-limit key stems (scopes may be per customer)."""

_SAFE_TAG = re.compile(r"[A-Za-z0-9_.-]{1,128}")
_SAFE_PREFIX = re.compile(r"[A-Za-z0-9_.:-]{1,64}")

_T = TypeVar("_T")


class ScriptCall(msgspec.Struct, frozen=True):
    """One script invocation: which script, with which KEYS and ARGV."""

    script: str
    keys: tuple[str, ...]
    args: tuple[str | bytes, ...]


class _Script(Protocol):
    sha: str

    async def __call__(
        self,
        keys: Sequence[str] | None = None,
        args: Sequence[str | bytes] | None = None,
        client: Any = None,
    ) -> Any: ...


def _lua(name: str) -> str:
    return (resources.files("broker.stores") / "lua" / name).read_text(encoding="utf-8")


def _sources() -> dict[str, str]:
    # The scripts' constants come from here, so that Python and Lua cannot disagree on them.
    constants = f"local GC_MARGIN_S, UNKNOWN_HOLD_S = {_GC_MARGIN_S}, {UNKNOWN_HOLD_S}\n"
    clock = constants + _lua("clock.lua")
    idem = clock + "\n" + _lua("idem.lua")
    return {
        "admit": idem + "\n" + _lua("admit.lua"),
        "lookup": idem + "\n" + _lua("lookup.lua"),
        "settle": clock + "\n" + _lua("settle.lua"),
        "tool_put": _lua("tool_put.lua"),
        "tool_delete": _lua("tool_delete.lua"),
        "tool_list": _lua("tool_list.lua"),
    }


def _num(value: float) -> str:
    """An exact decimal for a float: Lua's ``tonumber`` and Redis' ``strtod`` read it back bit-exact.

    Seventeen significant digits identify every double; ``repr``'s shortest such decimal costs
    half as much again (bignum digit generation). Each call sends ``now`` this way and its script
    derives every other instant from it (``lua/clock.lua``): one costly conversion per call.
    """
    return format(value, ".17g")


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()


def _as_str(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, str):
        return value
    raise StoreUnavailableError(f"unexpected reply from Redis: {value!r:.80}")


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    raise StoreUnavailableError(f"unexpected reply from Redis: {value!r:.80}")


def _table(reply: Any) -> list[Any]:
    """A script's reply as a list: admit and lookup answer with a table, settle with 1 or 0."""
    if isinstance(reply, int) and not isinstance(reply, bool):
        return [reply]
    if isinstance(reply, list):
        return reply
    raise StoreUnavailableError(f"unexpected script reply from Redis: {reply!r:.80}")


def _unavailable(exc: BaseException) -> StoreUnavailableError:
    return StoreUnavailableError(f"redis: {type(exc).__name__}: {exc}")


_REDIS_FAULTS = (RedisError, RedisClusterException, OSError)
"""Everything the client raises for an unreachable, loading, full, read-only or failing server
(OSError covers socket faults and ``asyncio.TimeoutError``)."""


class KeySpace:
    """Builds every key; one ``{tag}`` per tenant, client strings hashed."""

    def __init__(self, prefix: str) -> None:
        if not _SAFE_PREFIX.fullmatch(prefix):
            raise ValueError(f"prefix must match {_SAFE_PREFIX.pattern}, got {prefix!r}")
        self.prefix = prefix
        # Remembered: every proposal builds two or three keys of its tenant, and tenants and
        # (name, scope) pairs are few (from the config and authenticated tokens, never from a
        # request body).
        self._tenant_prefixes: Remembered[str, str] = Remembered(
            self._make_tenant_prefix, _MAX_REMEMBERED_TENANTS
        )
        self._stems: Remembered[tuple[str, str, str, str], str] = Remembered(
            self._make_stem, _MAX_REMEMBERED_STEMS
        )

    def tag(self, tenant: str) -> str:
        """The hash tag: the tenant itself when it is a plain identifier, else its hash."""
        if _SAFE_TAG.fullmatch(tenant):
            return tenant
        return "~" + _digest(tenant)[:32]

    def tenant_prefix(self, tenant: str) -> str:
        """``<prefix>:{<tag>}:``, which starts every key of the tenant (remembered)."""
        return self._tenant_prefixes[tenant]

    def _make_tenant_prefix(self, tenant: str) -> str:
        return f"{self.prefix}:{{{self.tag(tenant)}}}:"

    def idem(self, claim: ClaimRequest) -> str:
        return f"{self.tenant_prefix(claim.tenant)}idem:{_digest(claim.route, claim.key)}"

    def budget(self, tenant: str, charge: BudgetCharge, window: int) -> str:
        return f"{self._stems['bud', tenant, charge.name, charge.scope]}:{window}"

    def rate(self, tenant: str, name: str, scope: str) -> str:
        return self._stems["rate", tenant, name, scope]

    def _make_stem(self, stem: tuple[str, str, str, str]) -> str:
        """``<tenant prefix><kind>:<sha256(name \\x1f scope)[:32]>``: remembered, since a budget
        is keyed at admission and again at settlement and a rate limit at every admission, so
        a lookup replaces a SHA-256 and three string builds."""
        kind, tenant, name, scope = stem
        return f"{self.tenant_prefix(tenant)}{kind}:{_digest(name, scope)[:32]}"

    def decision(self, proposal_id: str) -> str:
        return f"{self.prefix}:{{d.{_digest(proposal_id)[:32]}}}:decision"

    def registry(self) -> tuple[str, str, str]:
        """The registered tools, their secrets and the catalog version (one slot)."""
        base = f"{self.prefix}:{{registry}}"
        return f"{base}:tools", f"{base}:secrets", f"{base}:version"

    def registry_channel(self) -> str:
        return f"{self.prefix}:registry:changed"


class _ToolRecord(msgspec.Struct, frozen=True, array_like=True):
    """A registered tool as kept in Redis; its secret lives in a hash of its own."""

    spec: bytes
    updated_at: float
    updated_by: str


def _check_charge(charge: BudgetCharge) -> None:
    """Counters are Redis integers: refuse what would be truncated rather than round it."""
    if not (
        isinstance(charge.amount, int)
        and isinstance(charge.limit, int)
        and isinstance(charge.window_s, int)
        and charge.window_s >= 1
    ):
        raise ValueError(
            f"budget {charge.name!r}: amount and limit must be integers (micro-units) and "
            "window_s an integer >= 1"
        )


def build_admit(
    keys: KeySpace, admission: Admission, *, now: float, dry_run: bool, owner: str
) -> tuple[ScriptCall, tuple[tuple[BudgetCharge, int], ...]]:
    """The admit script call, and each charge with the window it would be taken in."""
    claim = admission.claim
    if claim is not None and claim.tenant != admission.tenant:
        raise ValueError("admission.claim.tenant must equal admission.tenant (one slot per call)")
    tenant = admission.tenant
    now_s = _num(now)  # the one decimal conversion, reused in every rate-limit entry's name
    dry = "1" if dry_run else "0"
    counts = (str(len(admission.charges)), str(len(admission.hits)))
    key_list: list[str]
    args: list[str | bytes]
    if claim is not None:
        key_list = [keys.idem(claim)]
        idempotent = "1" if claim.idempotent else "0"
        lease_s = _num(claim.lease_s)
        args = [now_s, dry, "1", claim.fingerprint, owner, lease_s, idempotent, *counts]
    else:
        key_list = []
        args = [now_s, dry, "0", "", "", "0", "0", *counts]

    windows: list[tuple[BudgetCharge, int]] = []
    for charge in admission.charges:
        _check_charge(charge)
        window = int(now // charge.window_s)
        windows.append((charge, window))
        key_list.append(keys.budget(tenant, charge, window))
        end = (window + 1) * charge.window_s
        args += [str(charge.amount), str(charge.limit), str(end)]
    for i, hit in enumerate(admission.hits):
        if not (isinstance(hit.limit, int) and hit.limit >= 1 and hit.window_s > 0):
            raise ValueError(f"rate limit {hit.name!r}: limit must be an int >= 1, window_s > 0")
        key_list.append(keys.rate(tenant, hit.name, hit.scope))
        args += [_num(hit.window_s), str(hit.limit), f"{owner}:{i}:{now_s}"]
    return ScriptCall("admit", tuple(key_list), tuple(args)), tuple(windows)


def build_settle(
    keys: KeySpace,
    ticket: Ticket,
    settlement: Settlement,
    *,
    response: bytes,
    ttl_s: int,
    now: float,
) -> ScriptCall:
    claim = ticket.claim
    if claim is not None and claim.tenant != ticket.tenant:
        raise ValueError("ticket.claim.tenant must equal ticket.tenant (one slot per call)")
    key_list: list[str] = [] if claim is None else [keys.idem(claim)]
    key_list += [keys.budget(ticket.tenant, charge, window) for charge, window in ticket.charges]
    args: list[str | bytes] = [
        settlement.value,
        "0" if claim is None else "1",
        ticket.owner or "",
        response,
        _num(now),
        str(ttl_s),
        str(len(ticket.charges)),
    ]
    for charge, _ in ticket.charges:
        _check_charge(charge)
        args.append(str(charge.amount))
    return ScriptCall("settle", tuple(key_list), tuple(args))


def build_lookup(keys: KeySpace, claim: ClaimRequest, *, now: float) -> ScriptCall:
    return ScriptCall("lookup", (keys.idem(claim),), (_num(now), claim.fingerprint))


class RedisStore:
    """Redis implementation of :class:`~broker.stores.Store`.

    Args:
        client: a ``redis.asyncio.Redis`` or ``RedisCluster`` with ``decode_responses=False``.
            Give it a ``socket_timeout`` and no retries (see :meth:`from_url`): a resent script
            may run twice.
        prefix: the first segment of every key, so several brokers can share one Redis.
    """

    def __init__(self, client: RedisClient, *, prefix: str = "broker") -> None:
        if client.get_encoder().decode_responses:
            raise ValueError("RedisStore needs a client with decode_responses=False")
        self._client = client
        self._keys = KeySpace(prefix)
        self._owns_client = False
        self._sources = _sources()
        self._scripts: dict[str, _Script] = {
            name: cast(_Script, client.register_script(source))
            for name, source in self._sources.items()
        }
        # A standalone client's hot path bypasses redis-py's per-command machinery (see
        # redis_wire); a Cluster client routes by slot, so it keeps redis-py's own path.
        self._wire = Wire(client.connection_pool) if isinstance(client, Redis) else None
        self._responses = msgspec.msgpack.Decoder(StoredResponse)
        self._decisions = msgspec.msgpack.Decoder(DecisionRecord)
        self._tool_records = msgspec.msgpack.Decoder(_ToolRecord)
        self._encoder = msgspec.msgpack.Encoder()
        self._pubsub: Any = None

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

        No command is retried by the client (a timed-out script may have run), every socket
        operation is bounded by ``socket_timeout``; :meth:`close` releases the pool.
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
        call, windows = build_admit(self._keys, admission, now=now, dry_run=dry_run, owner=owner)
        reply = await self._run(call)
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
            oldest = float(_as_str(reply[2]))
            return Limited("rate", hit.name, max(oldest + hit.window_s - now, 0.001))
        return self._verdict(reply, now)

    async def lookup(self, claim: ClaimRequest, *, now: float) -> Replay | Conflict | None:
        reply = await self._run(build_lookup(self._keys, claim, now=now))
        if not reply:
            return None
        return self._verdict(reply, now)

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
        call = build_settle(
            self._keys,
            ticket,
            settlement,
            response=self._encoder.encode(response),
            ttl_s=ttl_s,
            now=now,
        )
        if self._wire is not None and ttl_s > 0:
            # The settlement and its decision record in one round trip (one write, one read).
            return await self._run(call, self._set_decision(record, ttl_s)) == [1]
        # On a Cluster the record lives in another slot (and an expired one is only deleted):
        # the two go concurrently.
        settled, _ = await self._gather(self._run(call), self.save_decision(record, ttl_s=ttl_s))
        return settled == [1]

    async def save_decision(self, record: DecisionRecord, *, ttl_s: int) -> None:
        key = self._keys.decision(record.proposal_id)
        if ttl_s <= 0:  # already expired, as in the reference store: nothing to read back
            await self._guard(self._client.delete(key))
            return
        if self._wire is not None:
            (stored,) = await self._guard(self._wire.exchange(self._set_decision(record, ttl_s)))
            if isinstance(stored, Exception):
                raise _unavailable(stored) from stored
            return
        await self._guard(self._client.set(key, self._encoder.encode(record), px=ttl_s * 1000))

    async def load_decision(self, proposal_id: str) -> DecisionRecord | None:
        key = self._keys.decision(proposal_id)
        if self._wire is not None:
            (raw,) = await self._guard(self._wire.exchange(("GET", key)))
            if isinstance(raw, Exception):
                raise _unavailable(raw) from raw
        else:
            raw = await self._guard(self._client.get(key))
        if raw is None:
            return None
        try:
            return self._decisions.decode(_as_bytes(raw))
        except msgspec.DecodeError as exc:
            raise StoreUnavailableError("unreadable decision record in Redis") from exc

    # -- registered tools -----------------------------------------------------------------------

    async def put_tool(self, tool: RegisteredTool, *, keep_secret: bool) -> ToolWrite:
        record = self._encoder.encode(_ToolRecord(tool.spec, tool.updated_at, tool.updated_by))
        args = (
            tool.name,
            record,
            tool.signing_secret,
            "1" if keep_secret else "0",
            self._keys.registry_channel(),
        )
        reply = await self._run(ScriptCall("tool_put", self._keys.registry(), args))
        version, created, kept = (int(x) for x in reply)
        return ToolWrite(version=version, created=bool(created), secret_kept=bool(kept))

    async def get_tool(self, name: str) -> RegisteredTool | None:
        _, tools = await self._read_tools(name)
        return tools[0] if tools else None

    async def delete_tool(self, name: str) -> int | None:
        call = ScriptCall(
            "tool_delete", self._keys.registry(), (name, self._keys.registry_channel())
        )
        version = int((await self._run(call))[0])
        return version or None

    async def list_tools(self) -> ToolSnapshot:
        version, tools = await self._read_tools("")
        return ToolSnapshot(version, tools)

    async def tools_version(self) -> int:
        raw = await self._guard(self._client.get(self._keys.registry()[2]))
        return int(_as_str(raw)) if raw is not None else 0

    async def wait_tools_changed(self, timeout_s: float) -> None:
        """Wait for a catalog announcement on the channel (or the timeout).

        The subscription is opened on first use and kept; a Cluster client (whose asyncio
        flavour has no pub/sub) simply waits, and the caller's version poll does the rest.
        """
        if isinstance(self._client, RedisCluster):
            await asyncio.sleep(timeout_s)
            return
        try:
            if self._pubsub is None:
                pubsub = self._client.pubsub(ignore_subscribe_messages=True)
                self._pubsub = pubsub
                await pubsub.subscribe(self._keys.registry_channel())
            message = await self._pubsub.get_message(timeout=timeout_s)
            while message is not None:  # drain a burst: one reload covers them all
                message = await self._pubsub.get_message(timeout=0)
        except _REDIS_FAULTS as exc:
            await self._close_pubsub()
            raise _unavailable(exc) from exc

    async def _read_tools(self, name: str) -> tuple[int, tuple[RegisteredTool, ...]]:
        reply = await self._run(ScriptCall("tool_list", self._keys.registry(), (name,)))
        version, flat = int(reply[0]), reply[1]
        tools: list[RegisteredTool] = []
        for i in range(0, len(flat), 3):
            try:
                record = self._tool_records.decode(_as_bytes(flat[i + 1]))
            except msgspec.DecodeError as exc:
                raise StoreUnavailableError("unreadable tool record in Redis") from exc
            tools.append(
                RegisteredTool(
                    name=_as_str(flat[i]),
                    spec=record.spec,
                    signing_secret=_as_str(flat[i + 2]),
                    updated_at=record.updated_at,
                    updated_by=record.updated_by,
                )
            )
        return version, tuple(tools)

    async def _close_pubsub(self) -> None:
        pubsub, self._pubsub = self._pubsub, None
        if pubsub is not None:
            with contextlib.suppress(*_REDIS_FAULTS):
                await pubsub.aclose()

    async def ping(self) -> None:
        await self._guard(self._client.ping())

    async def close(self) -> None:
        await self._close_pubsub()
        if self._wire is not None:
            await self._wire.close()
        if self._owns_client:
            await self._guard(self._client.aclose())

    # -- internals ------------------------------------------------------------------------------

    def _verdict(self, reply: Sequence[Any], now: float) -> Replay | Conflict:
        tag = _as_str(reply[0])
        if tag == "replay":
            try:
                return Replay(self._responses.decode(_as_bytes(reply[1])))
            except msgspec.DecodeError as exc:
                raise StoreUnavailableError("unreadable stored response in Redis") from exc
        if tag == "conflict":
            kind = _as_str(reply[1])
            if kind == "in_progress":
                lease_until = float(_as_str(reply[2]))
                return Conflict("in_progress", max(lease_until - now, 0.001))
            if kind == "reused":
                return Conflict("reused")
            if kind == "outcome_unknown":
                return Conflict("outcome_unknown")
        raise StoreUnavailableError(f"unexpected script reply from Redis: {tag!r:.40}")

    async def _run(self, call: ScriptCall, *after: Command) -> list[Any]:
        """One script call; admit and lookup reply with a table, settle with 1 or 0.

        ``after``: commands sent behind the script in the same exchange (the wire only), whose
        error replies are raised.
        """
        # Faults are caught here, and the wire is awaited directly, rather than through helper
        # coroutines: on the path every proposal takes, each one more is created and then
        # resumed after every reply.
        try:
            if self._wire is None:
                if after:
                    raise TypeError("commands pipelined behind a script need the wire")
                reply = await self._scripts[call.script](keys=call.keys, args=call.args)
            else:
                reply, *replies_after = await self._wire.exchange(self._evalsha(call), *after)
                for extra in replies_after:
                    if isinstance(extra, Exception):
                        raise extra
                if isinstance(reply, Exception):
                    reply = await self._after_error(self._wire, call, reply)
        except _REDIS_FAULTS as exc:
            raise _unavailable(exc) from exc
        return _table(reply)

    def _evalsha(self, call: ScriptCall) -> Command:
        return ("EVALSHA", self._scripts[call.script].sha, len(call.keys), *call.keys, *call.args)

    async def _after_error(self, wire: Wire, call: ScriptCall, error: Exception) -> Any:
        """The script's reply after an error reply: raise it, unless it was NOSCRIPT.

        A Redis that restarted or failed over has forgotten the script (NOSCRIPT: it did not
        run). Then the script alone goes again as EVAL, which carries the source and caches it.
        """
        if not isinstance(error, NoScriptError):
            raise error
        source = self._sources[call.script]
        (reply,) = await wire.exchange(("EVAL", source, len(call.keys), *call.keys, *call.args))
        if isinstance(reply, Exception):
            raise reply
        return reply

    def _set_decision(self, record: DecisionRecord, ttl_s: int) -> Command:
        key = self._keys.decision(record.proposal_id)
        return ("SET", key, self._encoder.encode(record), "PX", ttl_s * 1000)

    @staticmethod
    async def _guard(awaitable: Awaitable[_T]) -> _T:
        """Await one Redis command; any Redis fault becomes StoreUnavailableError."""
        try:
            return await awaitable
        except _REDIS_FAULTS as exc:
            raise _unavailable(exc) from exc

    @staticmethod
    async def _gather(first: Awaitable[_T], second: Awaitable[Any]) -> tuple[_T, Any]:
        """Run both to completion (neither is abandoned half-way), then raise the first fault."""
        results = await asyncio.gather(first, second, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return cast(_T, results[0]), results[1]


async def check_redis_safety(client: RedisClient) -> list[str]:
    """Warnings about a Redis that could lose idempotency records (call at startup).

    * no persistence (``appendonly no`` and no ``save`` points): a restart forgets every claim,
      so a retried non-idempotent call could run twice;
    * an evicting ``maxmemory-policy`` (anything but ``noeviction``): Redis may silently drop
      records under memory pressure. With ``noeviction`` a full Redis refuses writes (OOM),
      which the store turns into StoreUnavailableError: it fails closed.

    A server that refuses ``CONFIG`` (renamed or ACL-denied) yields a warning, not an error.
    """
    try:
        names = ("appendonly", "save", "maxmemory-policy")
        raw: Any
        if isinstance(client, RedisCluster):  # every node: each one holds some tenants
            raw = await client.config_get(*names, target_nodes=RedisCluster.ALL_NODES)
        else:
            raw = await client.config_get(*names)
    except ResponseError as exc:
        return [
            f"could not read the Redis configuration ({exc}); persistence and "
            "maxmemory-policy are unchecked"
        ]
    except _REDIS_FAULTS as exc:
        raise _unavailable(exc) from exc
    configs = _config_dicts(raw)
    if not configs:
        return [
            "the Redis configuration came back empty; persistence and maxmemory-policy "
            "are unchecked"
        ]
    warnings: list[str] = []
    for where, config in configs:
        appendonly = config.get("appendonly", "")
        save = config.get("save", "").strip()
        if appendonly != "yes" and not save:
            warnings.append(
                f"Redis{where} has no persistence (appendonly {appendonly or '?'}, no save "
                "points): a restart loses idempotency records, and a retried call may run twice"
            )
        policy = config.get("maxmemory-policy", "")
        if policy != "noeviction":
            warnings.append(
                f"Redis{where} maxmemory-policy is {policy or '?'!s}: it may evict idempotency "
                "records and budget counters; use noeviction"
            )
    return warnings


def _config_dicts(raw: Any) -> list[tuple[str, dict[str, str]]]:
    """CONFIG GET replies: one dict (standalone) or one per node (cluster, by node name)."""

    def text(value: Any) -> str:
        return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)

    if not isinstance(raw, dict) or not raw:
        return []
    if all(isinstance(value, dict) for value in raw.values()):
        return [
            (f" node {text(node)}", {text(k): text(v) for k, v in value.items()})
            for node, value in raw.items()
        ]
    return [("", {text(k): text(v) for k, v in raw.items()})]
