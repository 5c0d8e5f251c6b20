"""Signed checkpoints of the chain head, and the stores that keep them apart from the records."""

from __future__ import annotations

import asyncio
import base64
import os
from pathlib import Path
from typing import Protocol

import msgspec
import redis.asyncio as redis_asyncio
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from redis.exceptions import RedisError

from broker.ledger.canonical import canonical_json
from broker.ledger.errors import LedgerUnavailableError
from broker.ledger.keys import key_id
from broker.ledger.model import GENESIS_HASH, AuditRef
from broker.ledger.redis_sink import ledger_key

__all__ = [
    "Checkpoint",
    "CheckpointFormatError",
    "CheckpointStore",
    "JsonlCheckpointStore",
    "RedisCheckpointStore",
    "checkpoint_path_for",
    "checkpoint_signature_ok",
    "sign_checkpoint",
]


class Checkpoint(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A signed statement "at ``time`` the chain's head was (``seq``, ``hash``)".

    ``seq`` 0 with the genesis hash is the head of an empty ledger. The signature (Ed25519,
    base64) covers the RFC 8785 JSON of ``{"hash", "seq", "time"}``.
    """

    seq: int
    hash: str
    time: str
    key_id: str
    signature: str

    @property
    def payload(self) -> bytes:
        return canonical_json({"hash": self.hash, "seq": self.seq, "time": self.time})


class CheckpointFormatError(ValueError):
    """A stored checkpoint could not be parsed."""


def sign_checkpoint(signer: Ed25519PrivateKey, head: AuditRef | None, time: str) -> Checkpoint:
    """Sign ``head`` (``None`` = empty ledger) as of ``time``."""
    seq, digest = (0, GENESIS_HASH) if head is None else (head.seq, head.hash)
    unsigned = Checkpoint(seq=seq, hash=digest, time=time, key_id=key_id(signer), signature="")
    signature = base64.b64encode(signer.sign(unsigned.payload)).decode()
    return msgspec.structs.replace(unsigned, signature=signature)


def checkpoint_signature_ok(checkpoint: Checkpoint, public_key: Ed25519PublicKey) -> bool:
    """Whether ``checkpoint`` was signed by the private half of ``public_key``."""
    try:
        public_key.verify(base64.b64decode(checkpoint.signature, validate=True), checkpoint.payload)
    except (InvalidSignature, ValueError):
        return False
    return True


def checkpoint_path_for(ledger_path: str | os.PathLike[str]) -> Path:
    """``var/ledger.jsonl`` -> ``var/ledger.checkpoints.jsonl``: beside the ledger, never in it."""
    path = Path(ledger_path)
    stem = path.name[: -len(".jsonl")] if path.name.endswith(".jsonl") else path.name
    return path.with_name(f"{stem}.checkpoints.jsonl")


class CheckpointStore(Protocol):
    """Append-only storage for checkpoints, separate from the records they commit to."""

    async def append(self, checkpoint: Checkpoint) -> None: ...

    async def read_all(self) -> list[Checkpoint]:
        """Every checkpoint, oldest first.

        Raises:
            CheckpointFormatError: a stored checkpoint is malformed.
            LedgerUnavailableError: the store cannot be read.
        """
        ...


_DECODER = msgspec.json.Decoder(Checkpoint)


def _decode(raw: bytes, where: str) -> Checkpoint:
    try:
        return _DECODER.decode(raw)
    except msgspec.DecodeError as exc:
        raise CheckpointFormatError(f"malformed checkpoint ({where}): {exc}") from exc


class JsonlCheckpointStore:
    """Checkpoints as lines of their own file, fsynced on every append (they are rare)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    @classmethod
    def for_ledger(cls, ledger_path: str | os.PathLike[str]) -> JsonlCheckpointStore:
        return cls(checkpoint_path_for(ledger_path))

    def _append_sync(self, line: bytes) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        fd = os.open(self.path, flags, 0o640)
        try:
            os.write(fd, line)  # one small O_APPEND write: never interleaves with another process
            os.fsync(fd)
        finally:
            os.close(fd)

    async def append(self, checkpoint: Checkpoint) -> None:
        try:
            await asyncio.to_thread(self._append_sync, msgspec.json.encode(checkpoint) + b"\n")
        except OSError as exc:
            raise LedgerUnavailableError(f"checkpoint store {self.path}: {exc}") from exc

    async def read_all(self) -> list[Checkpoint]:
        try:
            data = await asyncio.to_thread(self._read_sync)
        except OSError as exc:
            raise LedgerUnavailableError(f"checkpoint store {self.path}: {exc}") from exc
        lines = data.split(b"\n")
        lines.pop()  # "" after the last newline, or a torn line that was never acknowledged
        return [_decode(line, f"{self.path} line {n}") for n, line in enumerate(lines, 1)]

    def _read_sync(self) -> bytes:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return b""


class RedisCheckpointStore:
    """Checkpoints in a Redis LIST of their own (``{prefix}:{ledger}:checkpoints``).

    Same Redis, so the same trust domain as the records: ship them elsewhere too (a SIEM, object
    storage) for protection against whoever controls that Redis.
    """

    def __init__(self, client: redis_asyncio.Redis, *, prefix: str) -> None:
        self.client = client
        self.key = ledger_key(prefix, "checkpoints")

    async def append(self, checkpoint: Checkpoint) -> None:
        try:
            await self.client.rpush(self.key, msgspec.json.encode(checkpoint))
        except (RedisError, OSError) as exc:
            raise LedgerUnavailableError(f"checkpoint store {self.key}: {exc}") from exc

    async def read_all(self) -> list[Checkpoint]:
        try:
            values: list[bytes | str] = await self.client.lrange(self.key, 0, -1)
        except (RedisError, OSError) as exc:
            raise LedgerUnavailableError(f"checkpoint store {self.key}: {exc}") from exc
        return [
            _decode(value.encode() if isinstance(value, str) else value, f"{self.key}[{n}]")
            for n, value in enumerate(values)
        ]
