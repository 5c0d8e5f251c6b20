"""Checkpoints shipped to a second place, so whoever can write the ledger's own storage cannot
cut its tail unseen.

A checkpoint beside the records shares their fate: someone who can truncate ``ledger.jsonl`` can
also drop the checkpoints that name the lost records. Each target of ``[service]
checkpoint_copies`` receives every checkpoint too, and ``broker ledger verify
--checkpoints-copy TARGET`` holds the chain to that copy. Targets:

- a directory (``/mnt/audit/broker``): ``<dir>/<ledger name>.checkpoints.jsonl``, appended and
  fsynced like the primary (mount it from elsewhere: another volume, host or account);
- a Redis key (``redis://audit-host:6379/0#broker-checkpoints``): a LIST under the key after
  ``#``, appended with ``RPUSH`` (a Redis the ledger's writers cannot reach).

A checkpoint is written to the primary store first, then to each copy; a copy that cannot be
written fails the checkpoint (:class:`~broker.ledger.errors.LedgerUnavailableError`: the
checkpointer logs it, counts a failure, and writes the next one everywhere again).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import msgspec
import redis.asyncio as redis_asyncio
from redis.exceptions import RedisError

from broker.ledger.checkpoints import (
    Checkpoint,
    CheckpointFormatError,
    CheckpointStore,
    JsonlCheckpointStore,
    checkpoint_path_for,
)
from broker.ledger.errors import LedgerUnavailableError
from broker.taxonomy import ConfigError

if TYPE_CHECKING:
    from broker.config.model import ServiceSettings

__all__ = [
    "AllCheckpoints",
    "CopiedCheckpointStore",
    "RedisKeyCheckpointStore",
    "checkpoint_target",
    "parse_target",
    "with_checkpoint_copies",
]

_DECODER = msgspec.json.Decoder(Checkpoint)


def parse_target(target: str) -> tuple[str, str]:
    """``("redis", url)`` or ``("dir", path)``; :class:`ValueError` says what is wrong."""
    if target.startswith(("redis://", "rediss://", "unix://")):
        parts = urlsplit(target)
        if not parts.fragment:
            raise ValueError(f"{target!r}: name the Redis key after '#' (redis://host:6379/0#key)")
        return "redis", target
    if "://" in target:
        raise ValueError(f"{target!r}: a directory path or a redis:// URL with a #key")
    if not target.strip():
        raise ValueError("an empty checkpoint copy target")
    return "dir", target


class RedisKeyCheckpointStore:
    """Checkpoints in a Redis LIST under an explicit key (a copy, usually on another Redis)."""

    def __init__(self, client: redis_asyncio.Redis, key: str) -> None:
        self.client = client
        self.key = key

    @classmethod
    def from_target(cls, target: str) -> RedisKeyCheckpointStore:
        url, _, key = target.partition("#")
        return cls(redis_asyncio.Redis.from_url(url, socket_timeout=5), key)

    async def append(self, checkpoint: Checkpoint) -> None:
        try:
            await self.client.rpush(self.key, msgspec.json.encode(checkpoint))
        except (RedisError, OSError) as exc:
            raise LedgerUnavailableError(f"checkpoint copy {self.key}: {exc}") from exc

    async def read_all(self) -> list[Checkpoint]:
        try:
            values: list[bytes | str] = await self.client.lrange(self.key, 0, -1)
        except (RedisError, OSError) as exc:
            raise LedgerUnavailableError(f"checkpoint copy {self.key}: {exc}") from exc
        points = []
        for n, value in enumerate(values):
            try:
                points.append(_DECODER.decode(value))
            except msgspec.DecodeError as exc:
                raise CheckpointFormatError(f"malformed checkpoint ({self.key}[{n}])") from exc
        return points

    async def aclose(self) -> None:
        await self.client.aclose()


def checkpoint_target(
    target: str, ledger_path: str | os.PathLike[str]
) -> JsonlCheckpointStore | RedisKeyCheckpointStore:
    """The store behind one target; a directory holds the file named after the ledger's."""
    kind, where = parse_target(target)
    if kind == "redis":
        return RedisKeyCheckpointStore.from_target(where)
    return JsonlCheckpointStore(Path(where) / checkpoint_path_for(ledger_path).name)


class CopiedCheckpointStore:
    """The primary checkpoint store, with every append also written to each copy."""

    def __init__(
        self,
        primary: CheckpointStore,
        copies: Sequence[JsonlCheckpointStore | RedisKeyCheckpointStore],
    ) -> None:
        self.primary = primary
        self.copies = tuple(copies)

    async def append(self, checkpoint: Checkpoint) -> None:
        await self.primary.append(checkpoint)
        for copy in self.copies:
            await copy.append(checkpoint)

    async def read_all(self) -> list[Checkpoint]:
        return await self.primary.read_all()

    async def aclose(self) -> None:
        for copy in self.copies:
            if isinstance(copy, RedisKeyCheckpointStore):
                await copy.aclose()


def with_checkpoint_copies(
    primary: CheckpointStore, service: ServiceSettings
) -> CopiedCheckpointStore:
    """The ledger's checkpoint store with ``[service] checkpoint_copies`` added.

    Raises:
        ConfigError: a target is neither a directory nor a ``redis://...#key`` URL.
    """
    problems: list[tuple[str, str]] = []
    copies: list[JsonlCheckpointStore | RedisKeyCheckpointStore] = []
    for index, target in enumerate(service.checkpoint_copies):
        try:
            copies.append(checkpoint_target(target, service.ledger_path))
        except ValueError as exc:
            problems.append((f"service.checkpoint_copies[{index}]", str(exc)))
    if problems:
        raise ConfigError(problems)
    return CopiedCheckpointStore(primary, copies)


class AllCheckpoints:
    """What a verifier holds the chain to: the primary's checkpoints and every copy's.

    A checkpoint dropped from one place still counts from another; one forged in one place
    fails its signature or disagrees with the chain (verify compares them all)."""

    def __init__(self, stores: Sequence[CheckpointStore]) -> None:
        self.stores = tuple(stores)

    async def append(self, checkpoint: Checkpoint) -> None:
        raise LedgerUnavailableError("verification only reads checkpoints")

    async def read_all(self) -> list[Checkpoint]:
        seen: set[bytes] = set()
        merged: list[Checkpoint] = []
        for store in self.stores:
            for point in await store.read_all():
                encoded = msgspec.json.encode(point)
                if encoded not in seen:
                    seen.add(encoded)
                    merged.append(point)
        return sorted(merged, key=lambda point: point.seq)
