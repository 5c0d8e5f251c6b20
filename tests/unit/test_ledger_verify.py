"""verify(): anchors, checkpoint signatures, rewrites between checkpoints, splices, other sinks."""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import json
from collections.abc import AsyncIterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import msgspec
import pytest
import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from broker.ledger import (
    GENESIS_HASH,
    AuditRef,
    Checkpoint,
    Checkpointer,
    JsonlCheckpointStore,
    JsonlLedgerSink,
    LedgerEntry,
    LedgerRecord,
    sign_checkpoint,
    verify,
)

# The module, which the package's ``verify`` function shadows as an attribute.
verify_module = importlib.import_module("broker.ledger.verify")
SIGNER = Ed25519PrivateKey.generate()
PUBLIC = SIGNER.public_key()


def make_entry(n: int, tenant: str = "acme") -> LedgerEntry:
    return LedgerEntry(
        time="2026-11-22T10:00:00.000Z",
        trace_id=f"t{n}",
        proposal_id=f"{tenant}_{n}",
        route="billing_help",
        tenant=tenant,
        service_account="sa",
        tool="issue_credit",
        config_hash="sha256:" + "c" * 64,
        args={"order_id": f"O-{n}", "amount": n + 0.5},
        decision="approved",
        decision_us=n,
    )


async def ledger(path: Path, count: int, tenant: str = "acme") -> list[AuditRef]:
    async with JsonlLedgerSink(path) as sink:
        return [await sink.append(make_entry(n, tenant)) for n in range(1, count + 1)]


def rehash_from(lines: list[bytes], index: int) -> list[bytes]:
    prev = json.loads(lines[index - 1])["hash"] if index else GENESIS_HASH
    out = lines[:index]
    for line in lines[index:]:
        stored = json.loads(line)
        del stored["hash"]
        stored["prev_hash"] = prev
        args = rfc8785.dumps(stored["args_redacted"])
        stored["args_hash"] = "sha256:" + hashlib.sha256(args).hexdigest()
        prev = "sha256:" + hashlib.sha256(rfc8785.dumps(stored)).hexdigest()
        out.append(rfc8785.dumps({**stored, "hash": prev}))
    return out


async def check(path: Path, **kwargs: Any) -> tuple[bool, int, int | None, str | None]:
    async with JsonlLedgerSink(path, read_only=True) as sink:
        report = await verify(sink, **kwargs)
    return report.ok, report.records, report.first_bad_seq, report.reason


async def test_from_n_trusts_record_n_minus_1_and_checks_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    await ledger(path, 10)
    lines = path.read_bytes().splitlines()
    lines[2] = lines[2].replace(b'"tool":"issue_credit"', b'"tool":"refund"')
    path.write_bytes(b"\n".join(lines) + b"\n")
    assert await check(path) == (False, 2, 3, "hash mismatch")
    assert await check(path, start_seq=5) == (True, 6, None, None)
    lines[6] = lines[6].replace(b'"tool":"issue_credit"', b'"tool":"refund"')
    path.write_bytes(b"\n".join(lines) + b"\n")
    assert await check(path, start_seq=5) == (False, 2, 7, "hash mismatch")


async def test_from_n_needs_its_anchor(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    await ledger(path, 3)
    assert await check(path, start_seq=9) == (
        False,
        0,
        8,
        "anchor record at seq 8 not found",
    )


async def test_a_forged_checkpoint_signature_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    refs = await ledger(path, 4)
    good = sign_checkpoint(SIGNER, refs[1], "2026-11-22T10:00:00.000Z")
    forged = sign_checkpoint(Ed25519PrivateKey.generate(), refs[3], "2026-11-22T10:01:00.000Z")
    ok, _, first_bad, reason = await check(path, checkpoints=[good, forged], public_key=PUBLIC)
    assert (ok, first_bad) == (False, 4)
    assert reason is not None and reason.startswith("checkpoint signature invalid (seq 4, ")
    assert f"signed by key {forged.key_id}" in reason
    # Without the public key, only consistency is checked (and here it is consistent).
    assert (await check(path, checkpoints=[good, forged]))[0] is True


async def test_a_rewrite_is_pinned_between_the_checkpoints_around_it(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    refs = await ledger(path, 10)
    points = [sign_checkpoint(SIGNER, refs[i - 1], f"2026-11-22T10:0{i}:00.000Z") for i in (4, 8)]
    lines = path.read_bytes().splitlines()
    stored = json.loads(lines[5])
    stored["args_redacted"]["amount"] = 1000
    lines[5] = json.dumps(stored).encode()
    path.write_bytes(b"\n".join(rehash_from(lines, 5)) + b"\n")
    ok, records, first_bad, reason = await check(path, checkpoints=points, public_key=PUBLIC)
    assert (ok, records, first_bad) == (False, 7, 8)
    assert reason == (
        "record at seq 8 differs from signed checkpoint (2026-11-22T10:08:00.000Z): "
        "the chain was rewritten between seq 5 and 8"
    )


async def test_another_tenants_chain_spliced_in_does_not_link(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "acme.jsonl", tmp_path / "globex.jsonl"
    await ledger(ours, 6)
    await ledger(theirs, 6, tenant="globex")
    spliced = ours.read_bytes().splitlines()[:3] + theirs.read_bytes().splitlines()[3:]
    ours.write_bytes(b"\n".join(spliced) + b"\n")
    assert await check(ours) == (False, 3, 4, "prev_hash does not link to seq 3")


async def test_an_inserted_well_forged_record_shows_up_as_a_duplicate(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    await ledger(path, 5)
    lines = path.read_bytes().splitlines()
    stored = json.loads(lines[2])
    stored["tool"] = "delete_everything"
    forged = rehash_from([*lines[:2], json.dumps(stored).encode()], 2)[2]  # links to seq 2
    lines.insert(2, forged)
    path.write_bytes(b"\n".join(lines) + b"\n")
    assert await check(path) == (
        False,
        3,
        4,
        "duplicate seq: 3 appears again where 4 was expected",
    )


async def test_an_unanchored_tail_is_only_as_safe_as_the_next_heartbeat(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    store = JsonlCheckpointStore.for_ledger(path)
    sink = JsonlLedgerSink(path)
    checkpointer = Checkpointer(sink, SIGNER, store)
    for n in range(1, 6):
        await sink.append(make_entry(n))
    await checkpointer.checkpoint()
    for n in range(6, 9):
        await sink.append(make_entry(n))
    await sink.close()
    lines = path.read_bytes().splitlines()
    path.write_bytes(b"\n".join(lines[:6]) + b"\n")  # cut 7 and 8: no checkpoint covers them yet
    assert (await check(path, checkpoints=store, public_key=PUBLIC))[0] is True
    path.write_bytes(b"\n".join(lines) + b"\n")
    sink = JsonlLedgerSink(path)
    await Checkpointer(sink, SIGNER, store).checkpoint()  # the next heartbeat
    await sink.close()
    path.write_bytes(b"\n".join(lines[:6]) + b"\n")
    assert await check(path, checkpoints=store, public_key=PUBLIC) == (
        False,
        6,
        7,
        "truncated: checkpoint at seq 8 (" + (await store.read_all())[-1].time + ") "
        "but the chain ends at seq 6",
    )


async def test_a_garbled_checkpoint_store_fails_verification(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    await ledger(path, 2)
    store = JsonlCheckpointStore.for_ledger(path)
    store.path.write_bytes(b"{}\n")
    ok, _, first_bad, reason = await check(path, checkpoints=store)
    assert (ok, first_bad) == (False, None)
    assert reason is not None and reason.startswith("malformed checkpoint")


async def test_an_empty_ledger_heartbeat_must_commit_to_genesis(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    path.touch()
    empty = sign_checkpoint(SIGNER, None, "2026-11-22T10:00:00.000Z")
    assert (await check(path, checkpoints=[empty], public_key=PUBLIC))[0] is True
    wrong = sign_checkpoint(SIGNER, AuditRef(0, "sha256:" + "1" * 64), "2026-11-22T10:00:00.000Z")
    assert (await check(path, checkpoints=[wrong], public_key=PUBLIC))[2] == 0


class ListSink:
    """A sink that cannot hand out stored bytes: verify falls back to re-encoding records."""

    def __init__(self, records: list[LedgerRecord]) -> None:
        self.records = records

    async def read(self, start_seq: int = 1, end_seq: int | None = None) -> AsyncIterator[Any]:
        for record in self.records:
            if record.seq >= start_seq and (end_seq is None or record.seq <= end_seq):
                yield record

    async def append(self, entry: LedgerEntry) -> AuditRef:
        raise NotImplementedError

    async def head(self) -> AuditRef | None:
        return self.records[-1].ref if self.records else None

    async def by_trace(self, trace_id: str) -> list[LedgerRecord]:
        return [r for r in self.records if r.trace_id == trace_id]

    async def by_session(self, session_id: str) -> list[LedgerRecord]:
        return [r for r in self.records if r.session_id == session_id]

    async def by_proposal(self, proposal_id: str) -> LedgerRecord | None:
        return next((r for r in self.records if r.proposal_id == proposal_id), None)

    async def ping(self) -> None:
        return None

    async def close(self) -> None:
        return None


async def test_sinks_without_raw_access_are_verified_from_their_records(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    await ledger(path, 4)
    records = [
        msgspec.json.decode(line, type=LedgerRecord) for line in path.read_bytes().splitlines()
    ]
    report = await verify(ListSink(records))
    assert (report.ok, report.records, report.head) == (True, 4, records[-1].hash)
    records[2] = msgspec.structs.replace(records[2], tool="refund")
    report = await verify(ListSink(records))
    assert (report.first_bad_seq, report.reason) == (3, "hash mismatch")


@pytest.mark.parametrize("start", [1, 2, 4])
async def test_verify_counts_what_it_checked(tmp_path: Path, start: int) -> None:
    path = tmp_path / "ledger.jsonl"
    refs = await ledger(path, 4)
    async with JsonlLedgerSink(path, read_only=True) as sink:
        report = await verify(sink, start_seq=start)
    assert (report.ok, report.records, report.head) == (True, 5 - start, refs[-1].hash)


def test_checkpoint_struct_is_strict() -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(
            b'{"seq":1,"hash":"x","time":"t","key_id":"k","signature":"s","x":1}', type=Checkpoint
        )


@pytest.mark.parametrize("damage", ["none", "flip", "delete", "swap", "truncate"])
async def test_checking_in_worker_processes_gives_the_same_report(
    tmp_path: Path, damage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs_sent: list[int] = []

    class CountingPool(ProcessPoolExecutor):
        def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            jobs_sent.append(len(args[0]))
            return super().submit(fn, *args, **kwargs)

    monkeypatch.setattr(verify_module, "ProcessPoolExecutor", CountingPool)
    path = tmp_path / "ledger.jsonl"
    async with JsonlLedgerSink(path, fsync="never") as sink:
        await asyncio.gather(*(sink.append(make_entry(n)) for n in range(1, 4501)))
    lines = path.read_bytes().splitlines(keepends=True)
    bad = 3100  # past the first chunk of lines a worker checks
    if damage == "flip":
        lines[bad] = lines[bad].replace(b'"O-', b'"X-', 1)
    elif damage == "delete":
        del lines[bad]
    elif damage == "swap":
        lines[bad], lines[bad + 1] = lines[bad + 1], lines[bad]
    elif damage == "truncate":
        del lines[bad:]
    path.write_bytes(b"".join(lines))
    checkpoints = []
    if damage == "truncate":  # cut at a record boundary: only a later checkpoint can tell
        head = AuditRef(4500, "sha256:" + "0" * 64)
        checkpoints = [sign_checkpoint(SIGNER, head, "2026-11-22T10:00:00.000Z")]
    async with JsonlLedgerSink(path, read_only=True) as sink:
        alone = await verify(sink, checkpoints=checkpoints)
        in_workers = await verify(sink, checkpoints=checkpoints, jobs=2)
    assert in_workers == alone
    assert len(jobs_sent) >= 2 and max(jobs_sent) == 2000  # the lines went to the workers
    assert alone.ok is (damage == "none"), alone
    if damage != "none":
        assert alone.first_bad_seq == bad + 1
