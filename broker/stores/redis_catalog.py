"""Registered tools in Redis: one slot (``{registry}``), a version bumped by every write, and a
pub/sub announcement of each new version so other broker processes reload at once.

The scripts (``lua/tool_*.lua``) keep the record, its secret and the version in step; the
version poll (:meth:`RedisCatalog.version`) is the fallback when an announcement is missed, and
the only mechanism on a Cluster, whose asyncio client has no pub/sub.

:class:`RedisCatalog` keeps the tools; :class:`RedisStoreCatalog` is the store protocol's
registered-tool methods, a base class of :class:`~broker.stores.redis.RedisStore`.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import msgspec
from redis.asyncio.cluster import RedisCluster

from broker.stores.base import RegisteredTool, ToolSnapshot, ToolWrite
from broker.stores.redis_keys import KeySpace
from broker.stores.redis_replies import as_str
from broker.stores.redis_scripts import ScriptCall, table
from broker.stores.redis_transport import REDIS_FAULTS, RedisClient, Transport, guard, unavailable
from broker.taxonomy import StoreUnavailableError

__all__ = ["RedisCatalog", "RedisStoreCatalog"]


class _ToolRecord(msgspec.Struct, frozen=True, array_like=True):
    """A registered tool as kept in Redis; its secret lives in a hash of its own."""

    spec: bytes
    updated_at: float
    updated_by: str


class RedisCatalog:
    """The registered-tool half of :class:`~broker.stores.redis.RedisStore`."""

    def __init__(self, client: RedisClient, keys: KeySpace, transport: Transport) -> None:
        self._client = client
        self._keys = keys
        self._transport = transport
        self._records = msgspec.msgpack.Decoder(_ToolRecord)
        self._encoder = msgspec.msgpack.Encoder()
        self._pubsub: Any = None

    async def put(self, tool: RegisteredTool, *, keep_secret: bool) -> ToolWrite:
        record = self._encoder.encode(_ToolRecord(tool.spec, tool.updated_at, tool.updated_by))
        args = (
            tool.name,
            record,
            tool.signing_secret,
            "1" if keep_secret else "0",
            self._keys.registry_channel(),
        )
        reply = await self._transport.script(ScriptCall("tool_put", self._keys.registry(), args))
        version, created, kept = (int(x) for x in reply)
        return ToolWrite(version=version, created=bool(created), secret_kept=bool(kept))

    async def get(self, name: str) -> RegisteredTool | None:
        _, tools = await self._read(name)
        return tools[0] if tools else None

    async def delete(self, name: str) -> int | None:
        call = ScriptCall(
            "tool_delete", self._keys.registry(), (name, self._keys.registry_channel())
        )
        version = int(table(await self._transport.script(call))[0])
        return version or None

    async def snapshot(self) -> ToolSnapshot:
        version, tools = await self._read("")
        return ToolSnapshot(version, tools)

    async def version(self) -> int:
        raw = await guard(self._client.get(self._keys.registry()[2]))
        return int(as_str(raw)) if raw is not None else 0

    async def wait_changed(self, timeout_s: float) -> None:
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
        except REDIS_FAULTS as exc:
            await self.close()
            raise unavailable(exc) from exc

    async def close(self) -> None:
        pubsub, self._pubsub = self._pubsub, None
        if pubsub is not None:
            with contextlib.suppress(*REDIS_FAULTS):
                await pubsub.aclose()

    async def _read(self, name: str) -> tuple[int, tuple[RegisteredTool, ...]]:
        call = ScriptCall("tool_list", self._keys.registry(), (name,))
        reply = await self._transport.script(call)
        version, flat = int(reply[0]), reply[1]
        tools: list[RegisteredTool] = []
        for i in range(0, len(flat), 3):
            try:
                record = self._records.decode(flat[i + 1])
            except (msgspec.DecodeError, TypeError) as exc:
                raise StoreUnavailableError("unreadable tool record in Redis") from exc
            tools.append(
                RegisteredTool(
                    name=as_str(flat[i]),
                    spec=record.spec,
                    signing_secret=as_str(flat[i + 2]),
                    updated_at=record.updated_at,
                    updated_by=record.updated_by,
                )
            )
        return version, tuple(tools)


class RedisStoreCatalog:
    """The registered-tool methods of :class:`~broker.stores.redis.RedisStore`, which sets
    ``_catalog``."""

    _catalog: RedisCatalog

    async def put_tool(self, tool: RegisteredTool, *, keep_secret: bool) -> ToolWrite:
        return await self._catalog.put(tool, keep_secret=keep_secret)

    async def get_tool(self, name: str) -> RegisteredTool | None:
        return await self._catalog.get(name)

    async def delete_tool(self, name: str) -> int | None:
        return await self._catalog.delete(name)

    async def list_tools(self) -> ToolSnapshot:
        return await self._catalog.snapshot()

    async def tools_version(self) -> int:
        return await self._catalog.version()

    async def wait_tools_changed(self, timeout_s: float) -> None:
        await self._catalog.wait_changed(timeout_s)
