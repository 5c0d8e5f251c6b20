"""Approvals in Redis, shared by every broker process: two hashes in one slot.

``<prefix>:{approvals}:status`` maps id → status and ``<prefix>:{approvals}:body`` id → the
service's record; creation time orders them (``<prefix>:{approvals}:created``, a sorted set).
The compare-and-set of a transition is one script over the three keys (one slot, so it works
on a Cluster too): exactly one process takes each transition.

:class:`RedisApprovals` keeps the hashes; :class:`RedisStoreApprovals` is the store protocol's
approval methods, a base class of :class:`~broker.stores.redis.RedisStore` (as
:class:`~broker.stores.sqlite_approvals.SqliteApprovals` is of the SQLite store).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, cast

import msgspec

from broker.stores.approvals import ApprovalRow
from broker.stores.base import Settlement
from broker.stores.redis_scripts import build_settle, table
from broker.stores.redis_transport import RedisClient, guard

if TYPE_CHECKING:
    from broker.stores.base import DecisionRecord, StoredResponse, Ticket
    from broker.stores.redis_keys import KeySpace
    from broker.stores.redis_transport import Transport

__all__ = ["RedisApprovals", "RedisStoreApprovals"]

# KEYS: status, body, created, tenant. ARGV: id, expected status ("" to create), new status,
# body, created_at, tenant. Returns 1 when the transition was taken.
_SWAP = """
local current = redis.call('HGET', KEYS[1], ARGV[1])
if ARGV[2] == '' then
  if current then return 0 end
  redis.call('ZADD', KEYS[3], ARGV[5], ARGV[1])
  redis.call('HSET', KEYS[4], ARGV[1], ARGV[6])
elseif current ~= ARGV[2] then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[4])
return 1
"""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisApprovals:
    """The approvals' side of :class:`~broker.stores.redis.RedisStore`."""

    def __init__(self, client: RedisClient, prefix: str) -> None:
        self._client = client
        base = f"{prefix}:{{approvals}}"
        self._keys = [f"{base}:status", f"{base}:body", f"{base}:created", f"{base}:tenant"]
        self._swap = client.register_script(_SWAP)

    async def _run(self, row: ApprovalRow, expected: str) -> bool:
        args: list[bytes | str | float] = [
            row.id,
            expected,
            row.status,
            row.body,
            repr(row.created_at),
            row.tenant,
        ]
        return bool(await guard(self._swap(keys=self._keys, args=args)))

    async def put_approval(self, row: ApprovalRow) -> None:
        if not await self._run(row, ""):
            raise ValueError(f"approval {row.id} exists already")

    def creation(self, row: ApprovalRow) -> tuple[tuple[str, ...], tuple[str | bytes, ...]]:
        """The keys and arguments with which ``lua/settle.lua`` creates ``row`` as it settles
        (the same writes as :meth:`put_approval`'s, in the same hashes)."""
        args = (row.id, row.status, row.body, repr(row.created_at), row.tenant)
        return tuple(self._keys), args

    async def swap_approval(self, approval_id: str, expected: str, row: ApprovalRow) -> bool:
        return await self._run(row, expected)

    async def get_approval(self, approval_id: str) -> ApprovalRow | None:
        rows = await self._rows([approval_id])
        return rows[0] if rows else None

    async def list_approvals(self, status: str | None) -> list[ApprovalRow]:
        ids = [_text(i) for i in await guard(self._client.zrange(self._keys[2], 0, -1))]
        rows = await self._rows(ids)
        return [r for r in rows if status is None or r.status == status]

    async def _rows(self, ids: list[str]) -> list[ApprovalRow]:
        if not ids:
            return []
        status_key, body_key, created_key, tenant_key = self._keys
        statuses = await guard(self._client.hmget(status_key, ids))
        bodies = await guard(self._client.hmget(body_key, ids))
        tenants = await guard(self._client.hmget(tenant_key, ids))
        scores = await guard(self._client.zmscore(created_key, ids))
        rows = []
        for approval_id, status, body, tenant, score in zip(
            ids, statuses, bodies, tenants, scores, strict=True
        ):
            if status is None or body is None:
                continue
            rows.append(
                ApprovalRow(
                    id=approval_id,
                    status=_text(status),
                    tenant=_text(tenant or b""),
                    created_at=float(score or 0.0),
                    body=body if isinstance(body, bytes) else body.encode(),
                )
            )
        return rows


class _Settling(Protocol):
    """What :meth:`RedisStoreApprovals.open_approval` uses of the store it is part of."""

    async def settle(
        self,
        ticket: Ticket,
        settlement: Settlement,
        *,
        response: StoredResponse,
        record: DecisionRecord,
        ttl_s: int,
        now: float,
    ) -> bool: ...


class RedisStoreApprovals:
    """The approvals' side of :class:`~broker.stores.redis.RedisStore`, which sets the
    attributes declared here."""

    _approvals: RedisApprovals
    _standalone: bool
    _keys: KeySpace
    _transport: Transport
    _encoder: msgspec.msgpack.Encoder

    async def put_approval(self, row: ApprovalRow) -> None:
        await self._approvals.put_approval(row)

    async def open_approval(
        self,
        row: ApprovalRow,
        ticket: Ticket,
        *,
        response: StoredResponse,
        record: DecisionRecord,
        ttl_s: int,
        now: float,
    ) -> bool:
        """On a standalone Redis one script creates the approval, stores the decision record and
        settles (one round trip, all or nothing); on a Cluster the approval's keys are in a slot
        of their own, so it is written first, then settled."""
        if not self._standalone or ttl_s <= 0:
            await self._approvals.put_approval(row)
            return await cast("_Settling", self).settle(
                ticket, Settlement.SUCCEEDED, response=response, record=record, ttl_s=ttl_s, now=now
            )
        call = build_settle(
            self._keys,
            ticket,
            Settlement.SUCCEEDED,
            response=self._encoder.encode(response),
            ttl_s=ttl_s,
            now=now,
            record=(self._keys.decision(record.proposal_id), self._encoder.encode(record)),
            approval=self._approvals.creation(row),
        )
        return table(await self._transport.script(call)) == [1]

    async def get_approval(self, approval_id: str) -> ApprovalRow | None:
        return await self._approvals.get_approval(approval_id)

    async def list_approvals(self, status: str | None) -> list[ApprovalRow]:
        return await self._approvals.list_approvals(status)

    async def swap_approval(self, approval_id: str, expected: str, row: ApprovalRow) -> bool:
        return await self._approvals.swap_approval(approval_id, expected, row)
