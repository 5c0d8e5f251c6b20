"""One contract for every LedgerSink: the JSONL file and Redis behave the same, tampering included.

Each tamper probe edits the storage directly (file lines / Redis hash fields) the way an attacker
with write access would, and verify must name the exact first bad seq and the reason.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as redis_asyncio
import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from broker.ledger import (
    GENESIS_HASH,
    Checkpointer,
    CheckpointStore,
    JsonlCheckpointStore,
    JsonlLedgerSink,
    LedgerEntry,
    LedgerSink,
    LedgerUnavailableError,
    RedisCheckpointStore,
    RedisLedgerSink,
    ValidatorVerdict,
    export_jsonl,
    verify,
)
from tests.redis_helpers import own_prefix

CANARY = "canary-7f3a91"
SIGNER = Ed25519PrivateKey.generate()


def make_entry(n: int, *, trace: str | None = None, **overrides: Any) -> LedgerEntry:
    fields: dict[str, Any] = {
        "time": f"2026-11-22T10:00:{n % 60:02d}.000Z",
        "trace_id": trace or f"trace-{n % 3}",
        "session_id": "chat-881",
        "proposal_id": f"prp_{n:04d}",
        "route": "billing_help",
        "tenant": "acme",
        "service_account": "sa-billing",
        "tool": "issue_credit",
        "tool_id": "tool_1",
        "config_hash": "sha256:" + "c" * 64,
        "args": {"order_id": f"O-{55000 + n}", "amount": 25 + n / 4, "currency": "USD"},
        "result": {"credit_id": f"CR-{1000 + n}", "status": "issued"},
        "sensitive_keys": frozenset({"card_number", "password"}),
        "decision": "approved",
        "validators": (ValidatorVerdict("schema", "pass", 40 + n),),
        "execution_status": "succeeded",
        "attempts": 1,
        "decision_us": 800 + n,
        "execution_us": 12_000,
    }
    fields.update(overrides)
    return LedgerEntry(**fields)


@dataclass
class Backend:
    """A sink's storage, seen both through the sink and directly (as an attacker would)."""

    open_sink: Callable[[], JsonlLedgerSink | RedisLedgerSink]
    checkpoints: CheckpointStore
    lines: Callable[[], Awaitable[list[bytes]]]
    replace_lines: Callable[[list[bytes]], Awaitable[None]]
    raw_bytes: Callable[[], Awaitable[bytes]]


async def jsonl_backend(tmp_path: Path) -> AsyncIterator[Backend]:
    path = tmp_path / "ledger.jsonl"

    async def lines() -> list[bytes]:
        return path.read_bytes().splitlines()

    async def replace_lines(new: list[bytes]) -> None:
        path.write_bytes(b"".join(line + b"\n" for line in new))

    async def raw_bytes() -> bytes:
        return path.read_bytes()

    yield Backend(
        open_sink=lambda: JsonlLedgerSink(path),
        checkpoints=JsonlCheckpointStore.for_ledger(path),
        lines=lines,
        replace_lines=replace_lines,
        raw_bytes=raw_bytes,
    )


async def redis_backend() -> AsyncIterator[Backend]:
    async with own_prefix() as (client, prefix):
        yield _redis_backend(client, prefix)


def _redis_backend(client: redis_asyncio.Redis, prefix: str) -> Backend:
    records = f"{prefix}:{{ledger}}:records"

    async def lines() -> list[bytes]:
        stored = await client.hgetall(records)
        return [stored[key] for key in sorted(stored, key=int)]

    async def replace_lines(new: list[bytes]) -> None:
        await client.delete(records)
        if new:
            await client.hset(records, mapping={str(i): line for i, line in enumerate(new, 1)})
            last = json.loads(new[-1])
            await client.set(f"{prefix}:{{ledger}}:head", f"{last['seq']} {last['hash']}")

    async def raw_bytes() -> bytes:
        dump = []
        async for key in client.scan_iter(match=f"{prefix}:*"):
            kind = (await client.type(key)).decode()
            if kind == "hash":
                dump.extend(v for kv in (await client.hgetall(key)).items() for v in kv)
            elif kind == "list":
                dump.extend(await client.lrange(key, 0, -1))
            else:
                dump.append(await client.get(key))
        return b"\n".join(dump)

    return Backend(
        open_sink=lambda: RedisLedgerSink(client, prefix=prefix),
        checkpoints=RedisCheckpointStore(client, prefix=prefix),
        lines=lines,
        replace_lines=replace_lines,
        raw_bytes=raw_bytes,
    )


@pytest.fixture(params=["jsonl", pytest.param("redis", marks=pytest.mark.redis)])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    factory = jsonl_backend(tmp_path) if request.param == "jsonl" else redis_backend()
    async for made in factory:
        yield made


async def fill(sink: LedgerSink, count: int, start: int = 1) -> list[Any]:
    return [await sink.append(make_entry(n)) for n in range(start, start + count)]


async def records_of(sink: LedgerSink, start: int = 1, end: int | None = None) -> list[Any]:
    return [record async for record in sink.read(start, end)]


# -- behaviour --------------------------------------------------------------------------------


async def test_appends_get_contiguous_seqs_linked_by_prev_hash(backend: Backend) -> None:
    sink = backend.open_sink()
    refs = await fill(sink, 5)
    assert [ref.seq for ref in refs] == [1, 2, 3, 4, 5]
    records = await records_of(sink)
    assert [record.ref for record in records] == refs
    assert records[0].prev_hash == GENESIS_HASH
    assert all(later.prev_hash == earlier.hash for earlier, later in itertools.pairwise(records))
    assert await sink.head() == refs[-1]
    await sink.close()


async def test_read_returns_an_inclusive_range(backend: Backend) -> None:
    sink = backend.open_sink()
    await fill(sink, 6)
    assert [r.seq for r in await records_of(sink, 2, 4)] == [2, 3, 4]
    assert [r.seq for r in await records_of(sink, 5)] == [5, 6]
    assert await records_of(sink, 7) == []
    await sink.close()


async def test_records_are_found_by_trace_and_by_proposal(backend: Backend) -> None:
    sink = backend.open_sink()
    await fill(sink, 7)
    trace = await sink.by_trace("trace-1")
    assert [(r.seq, r.proposal_id) for r in trace] == [
        (1, "prp_0001"),
        (4, "prp_0004"),
        (7, "prp_0007"),
    ]
    found = await sink.by_proposal("prp_0005")
    assert found is not None and found.seq == 5 and found.args_redacted["order_id"] == "O-55005"
    assert await sink.by_trace("nope") == []
    assert await sink.by_proposal("nope") is None
    await sink.close()


SESSIONS = {1: "chat-a", 2: "chat-b", 3: None, 4: "chat-a", 5: None, 6: "chat-b", 7: "chat-a"}


async def fill_sessions(sink: LedgerSink, seqs: range) -> None:
    for n in seqs:
        await sink.append(make_entry(n, session_id=SESSIONS[n]))


async def sessions_of(sink: LedgerSink) -> dict[str, list[tuple[int, str, str | None]]]:
    found = {}
    for session in ("chat-a", "chat-b", "chat-881", "nope", ""):
        found[session] = [
            (r.seq, r.proposal_id, r.session_id) for r in await sink.by_session(session)
        ]
    return found


EXPECTED_SESSIONS: dict[str, list[tuple[int, str, str | None]]] = {
    "chat-a": [(1, "prp_0001", "chat-a"), (4, "prp_0004", "chat-a"), (7, "prp_0007", "chat-a")],
    "chat-b": [(2, "prp_0002", "chat-b"), (6, "prp_0006", "chat-b")],
    "chat-881": [],
    "nope": [],
    "": [],
}


async def test_records_are_found_by_session_and_sessionless_ones_are_in_none(
    backend: Backend,
) -> None:
    sink = backend.open_sink()
    await fill_sessions(sink, range(1, 8))
    assert await sessions_of(sink) == EXPECTED_SESSIONS
    by_session = await sink.by_session("chat-a")
    assert by_session[1].args_redacted["order_id"] == "O-55004"
    assert by_session == [r for r in await records_of(sink) if r.session_id == "chat-a"]
    # Sessionless records are still found by trace and proposal, just by no session.
    assert [r.seq for r in await sink.by_trace("trace-0")] == [3, 6]
    sessionless = await sink.by_proposal("prp_0005")
    assert sessionless is not None and sessionless.session_id is None
    await sink.close()


async def test_sessions_survive_reopening_and_grow_in_the_new_sink(backend: Backend) -> None:
    first = backend.open_sink()
    await fill_sessions(first, range(1, 5))
    await first.close()

    second = backend.open_sink()
    assert await second.by_session("chat-a") == [
        r for r in await records_of(second) if r.session_id == "chat-a"
    ]
    await fill_sessions(second, range(5, 8))
    assert await sessions_of(second) == EXPECTED_SESSIONS
    await second.close()

    third = backend.open_sink()
    assert await sessions_of(third) == EXPECTED_SESSIONS
    assert (await verify(third)).ok
    await third.close()


async def test_sessions_batched_in_one_append_are_each_indexed(backend: Backend) -> None:
    sink = backend.open_sink()
    await asyncio.gather(*(sink.append(make_entry(n, session_id=SESSIONS[n])) for n in range(1, 8)))
    found = await sessions_of(sink)
    assert {session: [seq for seq, _, _ in rows] for session, rows in found.items()} == {
        session: sorted(r.seq for r in await records_of(sink) if r.session_id == session)
        for session in EXPECTED_SESSIONS
    }
    assert sum(len(rows) for rows in found.values()) == 5
    await sink.close()


async def test_an_empty_ledger_has_no_head_and_verifies(backend: Backend) -> None:
    sink = backend.open_sink()
    assert await sink.head() is None
    assert await records_of(sink) == []
    report = await verify(sink, checkpoints=backend.checkpoints)
    assert (report.ok, report.records, report.head) == (True, 0, None)
    # With a key, a signed checkpoint is required: an empty ledger has one too, at seq 0.
    signed = await verify(sink, checkpoints=backend.checkpoints, public_key=SIGNER.public_key())
    assert (signed.ok, signed.reason or "") == (False, signed.reason)
    assert "no signed checkpoint" in (signed.reason or "")
    await Checkpointer(sink, SIGNER, backend.checkpoints).checkpoint()
    report = await verify(sink, checkpoints=backend.checkpoints, public_key=SIGNER.public_key())
    assert (report.ok, report.records, report.head) == (True, 0, None)
    await sink.close()


async def test_sensitive_values_never_reach_storage_yet_the_chain_verifies(
    backend: Backend,
) -> None:
    sink = backend.open_sink()
    await fill(sink, 2)
    secret_args = {"order_id": "O-1", "card_number": CANARY, "auth": {"PassWord": CANARY}}
    await sink.append(make_entry(3, args=secret_args, result={"echo": {"card_number": CANARY}}))
    checkpointer = Checkpointer(sink, SIGNER, backend.checkpoints)
    await checkpointer.checkpoint()

    assert CANARY.encode() not in await backend.raw_bytes()
    record = await sink.by_proposal("prp_0003")
    assert record is not None
    assert record.args_redacted == {
        "order_id": "O-1",
        "card_number": "[REDACTED]",
        "auth": {"PassWord": "[REDACTED]"},
    }
    assert record.result_redacted == {"echo": {"card_number": "[REDACTED]"}}
    report = await verify(sink, checkpoints=backend.checkpoints, public_key=SIGNER.public_key())
    assert report.ok and report.records == 3
    await sink.close()


async def test_stored_hashes_follow_the_documented_definition(backend: Backend) -> None:
    sink = backend.open_sink()
    await fill(sink, 4)
    for line in await backend.lines():
        stored = json.loads(line)
        claimed = stored.pop("hash")
        assert claimed == "sha256:" + hashlib.sha256(rfc8785.dumps(stored)).hexdigest()
        digest = hashlib.sha256(rfc8785.dumps(stored["args_redacted"])).hexdigest()
        assert stored["args_hash"] == "sha256:" + digest
    await sink.close()


async def test_concurrent_appends_in_one_process_neither_fork_nor_lose(backend: Backend) -> None:
    sink = backend.open_sink()
    refs = await asyncio.gather(*(sink.append(make_entry(n)) for n in range(1, 201)))
    assert sorted(ref.seq for ref in refs) == list(range(1, 201))
    records = await records_of(sink)
    assert len({record.prev_hash for record in records}) == 200
    assert {record.proposal_id for record in records} == {f"prp_{n:04d}" for n in range(1, 201)}
    assert (await verify(sink)).ok
    await sink.close()


async def test_a_reopened_sink_resumes_the_chain(backend: Backend) -> None:
    first = backend.open_sink()
    await fill(first, 3)
    await first.close()
    second = backend.open_sink()
    assert (await second.head()) is not None
    refs = await fill(second, 2, start=4)
    assert [ref.seq for ref in refs] == [4, 5]
    report = await verify(second)
    assert (report.ok, report.records, report.head) == (True, 5, refs[-1].hash)
    await second.close()


async def test_ping_passes_while_open_and_fails_once_closed(backend: Backend) -> None:
    sink = backend.open_sink()
    await sink.ping()
    await sink.close()
    with pytest.raises(LedgerUnavailableError):
        await sink.ping()
    with pytest.raises(LedgerUnavailableError):
        await sink.append(make_entry(1))


async def test_export_writes_stored_records_that_verify_elsewhere(
    backend: Backend, tmp_path: Path
) -> None:
    sink = backend.open_sink()
    await fill(sink, 6)
    out = io.BytesIO()
    assert await export_jsonl(sink, 2, 5, out) == 4
    assert out.getvalue().splitlines() == (await backend.lines())[1:5]
    everything = io.BytesIO()
    await export_jsonl(sink, 1, None, everything)
    siem_copy = tmp_path / "siem.jsonl"
    siem_copy.write_bytes(everything.getvalue())
    async with JsonlLedgerSink(siem_copy, read_only=True) as copy:
        assert (await verify(copy)).records == 6
    await sink.close()


# -- tamper probes ----------------------------------------------------------------------------


async def verify_fresh(
    backend: Backend, *, with_checkpoints: bool = True
) -> tuple[bool, int, int | None, str | None]:
    async with backend.open_sink() as sink:
        report = await verify(
            sink,
            checkpoints=backend.checkpoints if with_checkpoints else None,
            public_key=SIGNER.public_key(),
        )
    return report.ok, report.records, report.first_bad_seq, report.reason


def rehash_from(lines: list[bytes], index: int) -> list[bytes]:
    """What an attacker does after rewriting record index+1: recompute every later hash."""
    prev = json.loads(lines[index - 1])["hash"] if index else GENESIS_HASH
    out = lines[:index]
    for line in lines[index:]:
        stored = json.loads(line)
        stored.pop("hash")
        stored["prev_hash"] = prev
        stored["args_hash"] = (
            "sha256:" + hashlib.sha256(rfc8785.dumps(stored["args_redacted"])).hexdigest()
        )
        prev = "sha256:" + hashlib.sha256(rfc8785.dumps(stored)).hexdigest()
        out.append(rfc8785.dumps({**stored, "hash": prev}))
    return out


def flip_tool(lines: list[bytes]) -> list[bytes]:
    edited = list(lines)
    edited[4] = edited[4].replace(b'"tool":"issue_credit"', b'"tool":"issue_crediT"')
    return edited


def flip_args(lines: list[bytes]) -> list[bytes]:
    edited = list(lines)
    edited[5] = edited[5].replace(b'"order_id":"O-55006"', b'"order_id":"O-55007"')
    return edited


def flip_prev_hash(lines: list[bytes]) -> list[bytes]:
    edited = list(lines)
    stored = json.loads(edited[7])
    wrong = stored["prev_hash"][:-1] + ("0" if stored["prev_hash"][-1] != "0" else "1")
    edited[7] = edited[7].replace(stored["prev_hash"].encode(), wrong.encode())
    return edited


def rewrite_and_rehash(lines: list[bytes]) -> list[bytes]:
    edited = list(lines)
    stored = json.loads(edited[3])
    stored["args_redacted"]["amount"] = 999
    edited[3] = json.dumps(stored).encode()
    return rehash_from(edited, 3)


PROBES: dict[str, tuple[Callable[[list[bytes]], list[bytes]], int, str]] = {
    "flip-a-byte": (flip_tool, 5, "hash mismatch"),
    "flip-an-args-byte": (flip_args, 6, "args_hash mismatch"),
    "break-prev-hash": (flip_prev_hash, 8, "prev_hash does not link to seq 7"),
    "delete-a-record": (lambda ls: ls[:4] + ls[5:], 5, "seq gap: expected 5 got 6"),
    "swap-two-records": (
        lambda ls: [*ls[:4], ls[5], ls[4], *ls[6:]],
        5,
        "seq gap: expected 5 got 6",
    ),
    "duplicate-a-record": (
        lambda ls: [*ls[:5], ls[4], *ls[5:]],
        6,
        "duplicate seq: 5 appears again",
    ),
    "rewrite-and-rehash": (
        rewrite_and_rehash,
        12,
        "record at seq 12 differs from signed checkpoint",
    ),
    "truncate-the-tail": (lambda ls: ls[:9], 10, "truncated: checkpoint at seq 12"),
    "garble-a-record": (lambda ls: [*ls[:2], ls[2][:40], *ls[3:]], 3, "malformed record"),
}


@pytest.mark.parametrize("probe", list(PROBES))
async def test_tampering_is_detected_at_the_exact_first_bad_seq(
    backend: Backend, probe: str
) -> None:
    tamper, first_bad, reason = PROBES[probe]
    sink = backend.open_sink()
    await fill(sink, 12)
    await Checkpointer(sink, SIGNER, backend.checkpoints).checkpoint()
    await sink.close()
    assert await verify_fresh(backend) == (True, 12, None, None)

    await backend.replace_lines(tamper(await backend.lines()))

    async with backend.open_sink() as fresh:
        report = await verify(
            fresh, checkpoints=backend.checkpoints, public_key=SIGNER.public_key()
        )
    assert not report.ok
    assert report.first_bad_seq == first_bad, report
    assert report.reason is not None and report.reason.startswith(reason), report.reason
    assert report.records == first_bad - 1 or probe == "rewrite-and-rehash"


async def test_a_rewrite_is_invisible_without_checkpoints(backend: Backend) -> None:
    """Why checkpoints exist: a recomputed chain is internally consistent."""
    sink = backend.open_sink()
    await fill(sink, 12)
    await sink.close()
    await backend.replace_lines(rewrite_and_rehash(await backend.lines()))
    async with backend.open_sink() as sink:
        report = await verify(sink)  # neither checkpoints nor a key: nothing to hold it to
    assert (report.ok, report.records, report.unsigned_tail) == (True, 12, 12)
    # A key given means a signed checkpoint is required: deleting them does not pass.
    ok, _, _, reason = await verify_fresh(backend, with_checkpoints=False)
    assert not ok
    assert "no signed checkpoint" in (reason or "")
