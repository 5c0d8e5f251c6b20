"""Checkpoints: heartbeats without sleeping, signatures, separate storage, key management."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from broker.ledger import (
    GENESIS_HASH,
    Checkpoint,
    Checkpointer,
    CheckpointFormatError,
    JsonlCheckpointStore,
    JsonlLedgerSink,
    LedgerUnavailableError,
    checkpoint_path_for,
    checkpoint_signature_ok,
    export_public_key,
    key_id,
    load_or_create_signing_key,
    load_public_key,
    load_signing_key,
    sign_checkpoint,
    utc_now,
)
from tests.ledger_entries import make_entry


class Ticks:
    """Stands in for asyncio.sleep: the heartbeat advances only when the test says so."""

    def __init__(self) -> None:
        self.waiting = asyncio.Queue[float]()
        self.release = asyncio.Queue[None]()

    async def __call__(self, seconds: float) -> None:
        await self.waiting.put(seconds)
        await self.release.get()

    async def tick(self) -> None:
        """Let one period pass and wait until the checkpointer is waiting again."""
        await self.release.put(None)
        await self.waiting.get()


class Times:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> str:
        self.n += 1
        return f"2026-11-22T10:{self.n:02d}:00.000Z"


async def test_heartbeats_are_written_even_when_nothing_is_appended(tmp_path: Path) -> None:
    sink = JsonlLedgerSink(tmp_path / "ledger.jsonl")
    store = JsonlCheckpointStore.for_ledger(sink.path)
    ticks, signer = Ticks(), Ed25519PrivateKey.generate()
    checkpointer = Checkpointer(sink, signer, store, interval_s=30, clock=Times(), wait=ticks)
    checkpointer.start()
    assert await ticks.waiting.get() == 30
    await ticks.tick()  # idle: a heartbeat of the empty ledger
    ref = await sink.append(make_entry(1))
    await ticks.tick()
    await ticks.tick()  # idle again: same head, new time
    await checkpointer.close()  # the shutdown checkpoint

    points = await store.read_all()
    assert [(p.seq, p.hash, p.time) for p in points] == [
        (0, GENESIS_HASH, "2026-11-22T10:01:00.000Z"),  # at start, before the first wait
        (0, GENESIS_HASH, "2026-11-22T10:02:00.000Z"),
        (1, ref.hash, "2026-11-22T10:03:00.000Z"),
        (1, ref.hash, "2026-11-22T10:04:00.000Z"),
        (1, ref.hash, "2026-11-22T10:05:00.000Z"),
    ]
    assert all(checkpoint_signature_ok(p, signer.public_key()) for p in points)
    assert checkpointer.written == 5 and checkpointer.last == points[-1]
    assert store.path == tmp_path / "ledger.checkpoints.jsonl"
    assert b"signature" not in sink.path.read_bytes()  # kept apart from the records
    await sink.close()


async def test_a_failed_heartbeat_is_counted_and_the_next_one_still_runs(tmp_path: Path) -> None:
    class FlakyStore(JsonlCheckpointStore):
        fail_next = True

        async def append(self, checkpoint: Checkpoint) -> None:
            if self.fail_next:
                self.fail_next = False
                raise LedgerUnavailableError("checkpoint disk gone")
            await super().append(checkpoint)

    sink = JsonlLedgerSink(tmp_path / "ledger.jsonl")
    store = FlakyStore(tmp_path / "cp.jsonl")
    ticks = Ticks()
    checkpointer = Checkpointer(sink, Ed25519PrivateKey.generate(), store, wait=ticks)
    checkpointer.start()
    await ticks.waiting.get()  # the one at start failed
    await ticks.tick()
    await ticks.tick()
    assert (checkpointer.failures, checkpointer.written) == (1, 2)
    await checkpointer.close()
    await sink.close()


async def test_the_head_is_made_durable_before_it_is_signed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = JsonlLedgerSink(tmp_path / "ledger.jsonl", fsync="never", fsync_in="thread")
    await sink.append(make_entry(1))
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[-1])
    store = JsonlCheckpointStore(tmp_path / "cp.jsonl")
    await Checkpointer(sink, Ed25519PrivateKey.generate(), store).checkpoint()
    assert len(synced) == 2  # the ledger, then the checkpoint file
    await sink.close()


def test_a_signature_covers_seq_hash_and_time() -> None:
    signer, other = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    point = sign_checkpoint(signer, None, "2026-11-22T10:00:00.000Z")
    assert (point.seq, point.hash, point.key_id) == (0, GENESIS_HASH, key_id(signer))
    assert checkpoint_signature_ok(point, signer.public_key())
    assert not checkpoint_signature_ok(point, other.public_key())
    for change in (
        {"seq": 1},
        {"hash": "sha256:" + "1" * 64},
        {"time": "2026-11-22T10:00:01.000Z"},
    ):
        forged = Checkpoint(**{**_fields(point), **change})
        assert not checkpoint_signature_ok(forged, signer.public_key())
    garbled = Checkpoint(**{**_fields(point), "signature": "not base64!"})
    assert not checkpoint_signature_ok(garbled, signer.public_key())


def _fields(point: Checkpoint) -> dict[str, Any]:
    return {name: getattr(point, name) for name in point.__struct_fields__}


async def test_a_torn_checkpoint_line_is_ignored_and_a_garbled_one_reported(tmp_path: Path) -> None:
    store = JsonlCheckpointStore(tmp_path / "cp.jsonl")
    await store.append(sign_checkpoint(Ed25519PrivateKey.generate(), None, utc_now()))
    store.path.write_bytes(store.path.read_bytes() + b'{"seq":')
    assert len(await store.read_all()) == 1
    store.path.write_bytes(store.path.read_bytes() + b"1}\n")
    with pytest.raises(CheckpointFormatError, match="line 2"):
        await store.read_all()


async def test_a_missing_checkpoint_file_means_no_checkpoints(tmp_path: Path) -> None:
    assert await JsonlCheckpointStore(tmp_path / "none.jsonl").read_all() == []


def test_checkpoints_live_beside_the_ledger() -> None:
    assert checkpoint_path_for("var/ledger.jsonl") == Path("var/ledger.checkpoints.jsonl")
    assert checkpoint_path_for("/x/audit.log") == Path("/x/audit.log.checkpoints.jsonl")


def test_utc_now_is_rfc3339_with_milliseconds() -> None:
    assert len(utc_now()) == len("2026-11-22T10:00:00.000Z") and utc_now().endswith("Z")


def test_a_signing_key_is_created_once_private_and_reused(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "ledger.key"
    key = load_or_create_signing_key(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    again = load_or_create_signing_key(path)
    assert key_id(again) == key_id(key)
    assert list(path.parent.iterdir()) == [path]  # no temporary file left behind


def test_the_public_key_round_trips_through_pem(tmp_path: Path) -> None:
    key = load_or_create_signing_key(tmp_path / "ledger.key")
    pem = export_public_key(key)
    assert pem.startswith(b"-----BEGIN PUBLIC KEY-----")
    public = load_public_key(pem)
    assert key_id(public) == key_id(key)
    assert export_public_key(public) == pem
    point = sign_checkpoint(key, None, utc_now())
    assert checkpoint_signature_ok(point, public)


def test_a_key_of_another_kind_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ec.key"
    ec_key = ec.generate_private_key(ec.SECP256R1())
    path.write_bytes(
        ec_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)
    with pytest.raises(ValueError, match="not an Ed25519"):
        load_signing_key(path)
    public_pem = ec_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    with pytest.raises(ValueError, match="not an Ed25519"):
        load_public_key(public_pem)


def test_a_world_readable_key_is_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "ledger.key"
    load_or_create_signing_key(path)
    path.chmod(0o644)
    load_signing_key(path)
    assert "readable by group or others" in caplog.text
