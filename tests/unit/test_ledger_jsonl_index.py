"""The JSONL sink's lookup index: kept beside the file, rebuilt from it, bounded in memory."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import sqlite3
import tracemalloc
from pathlib import Path

import pytest

import broker.ledger.jsonl_index as index_module
from broker.ledger import JsonlLedgerSink, LedgerUnavailableError
from tests.ledger_entries import make_entry


def index_of(path: Path) -> Path:
    return path.with_name(path.name + ".index")


def drop_index(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{index_of(path)}{suffix}").unlink(missing_ok=True)


async def fill(path: Path, entries: range, **fields: str) -> None:
    async with JsonlLedgerSink(path, fsync="never") as sink:
        for n in entries:
            await sink.append(make_entry(n, **fields))


async def test_a_restart_indexes_only_what_was_appended_since(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ledger.jsonl"
    await fill(path, range(40))
    async with JsonlLedgerSink(path, fsync="never") as sink:
        assert len(await sink.by_trace("trace-0")) == 20  # indexes the first 40
    indexed = path.stat().st_size
    await fill(path, range(40, 42))

    read_from: list[int] = []
    real = index_module.iter_line_batches

    def spying(fd: int, begin: int, stop: int):  # type: ignore[no-untyped-def]
        read_from.append(begin)
        return real(fd, begin, stop)

    monkeypatch.setattr(index_module, "iter_line_batches", spying)
    async with JsonlLedgerSink(path, fsync="never") as sink:
        assert [r.seq for r in await sink.by_trace("trace-0")] == list(range(1, 43, 2))
        found = await sink.by_proposal("prp_41")
        assert found is not None and found.seq == 42
    assert read_from == [indexed]


async def test_a_missing_index_is_rebuilt_from_the_file(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    await fill(path, range(6))
    async with JsonlLedgerSink(path) as sink:
        assert len(await sink.by_trace("trace-1")) == 3
    drop_index(path)
    async with JsonlLedgerSink(path) as sink:
        assert [r.seq for r in await sink.by_trace("trace-1")] == [2, 4, 6]
        assert (await sink.by_proposal("prp_5")) is not None


async def test_an_index_left_by_another_file_is_not_trusted(tmp_path: Path) -> None:
    """Same path, different history: the old rows would point at the wrong records."""
    path = tmp_path / "ledger.jsonl"
    await fill(path, range(6), trace_id="old")
    async with JsonlLedgerSink(path) as sink:
        assert len(await sink.by_trace("old")) == 6
    kept = tmp_path / "kept.index"
    shutil.copy(index_of(path), kept)

    # A longer history written into the same file (same inode): only the content tells.
    other = tmp_path / "other.jsonl"
    await fill(other, range(9), trace_id="new")
    path.write_bytes(other.read_bytes())
    drop_index(path)
    shutil.copy(kept, index_of(path))
    async with JsonlLedgerSink(path) as sink:
        assert await sink.by_trace("old") == []
        assert [r.seq for r in await sink.by_trace("new")] == list(range(1, 10))


async def test_the_index_follows_appends_without_any_lookup(tmp_path: Path) -> None:
    """Filled in steps as the file grows, so a lookup after a long run has little left to do."""
    path = tmp_path / "ledger.jsonl"
    async with JsonlLedgerSink(path, fsync="never") as sink:
        padding = "x" * 2000
        for n in range(400):  # about 1 MiB of lines
            await sink.append(make_entry(n, reason=padding))
        await asyncio.sleep(0)  # the step runs in a later turn of the loop
        with sqlite3.connect(index_of(path)) as db:
            (rows,) = db.execute("select count(*) from lines").fetchone()
        assert rows >= 100


async def test_memory_stays_flat_however_many_records_are_appended(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    async with JsonlLedgerSink(path, fsync="never") as sink:
        for n in range(300):
            await sink.append(make_entry(n, trace_id=f"trc-{n}"))
        await sink.by_trace("trc-0")  # each lookup indexes everything appended before it
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for n in range(300, 3300):
                await sink.append(make_entry(n, trace_id=f"trc-{n}"))
            found = await sink.by_trace("trc-3299")
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert [r.seq for r in found] == [3300]
    # The index kept in memory grew by about 360 bytes per record; now nothing per record does.
    assert grown < 3000 * 20, grown


async def test_a_read_only_sink_writes_no_index_beside_the_file(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    await fill(path, range(4))
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    copy = evidence / "ledger.jsonl"
    shutil.copy(path, copy)
    async with JsonlLedgerSink(copy, read_only=True) as sink:
        assert [r.seq for r in await sink.by_trace("trace-0")] == [1, 3]
        assert [r.seq async for r in sink.read(3)] == [3, 4]
    assert sorted(p.name for p in evidence.iterdir()) == ["ledger.jsonl"]


async def test_a_damaged_index_file_is_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "ledger.jsonl"
    await fill(path, range(4))
    drop_index(path)
    index_of(path).write_bytes(b"not a database, whatever a power loss left" * 100)
    with caplog.at_level(logging.WARNING, logger="broker.ledger"):
        async with JsonlLedgerSink(path) as sink:
            assert [r.seq for r in await sink.by_trace("trace-1")] == [2, 4]
    assert "rebuilding it" in caplog.text


async def test_the_index_is_no_more_readable_than_the_ledger(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    await fill(path, range(2))
    async with JsonlLedgerSink(path) as sink:
        await sink.by_trace("trace-0")  # the index and its -wal are written
        modes = {p.name: p.stat().st_mode & 0o777 for p in tmp_path.iterdir()}
    assert modes["ledger.jsonl"] == 0o640
    assert {name: mode for name, mode in modes.items() if ".index" in name} == {
        name: 0o640 for name in modes if ".index" in name
    }
    assert "ledger.jsonl.index-wal" in modes


async def test_opening_indexes_what_the_index_lacks_before_any_lookup(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    await fill(path, range(30))
    drop_index(path)
    async with JsonlLedgerSink(path):
        with sqlite3.connect(index_of(path)) as db:
            (rows,) = db.execute("select count(*) from lines").fetchone()
    assert rows == 30


async def test_an_index_locked_by_another_process_fails_lookups_fast_not_appends(
    tmp_path: Path,
) -> None:
    """A stopped process holding the index's write lock costs lookups, never the chain."""
    path = tmp_path / "ledger.jsonl"
    async with JsonlLedgerSink(path, fsync="never") as sink:
        await sink.append(make_entry(0))
        holder = sqlite3.connect(index_of(path), isolation_level=None)
        holder.execute("begin immediate")
        try:
            assert (await sink.append(make_entry(1))).seq == 2
            started = asyncio.get_running_loop().time()
            with pytest.raises(LedgerUnavailableError, match="locked"):
                await sink.by_trace("trace-1")
            assert asyncio.get_running_loop().time() - started < 2.0  # not a 5 s stall
            # Appends past an index step's worth of lines: the steps they schedule find the
            # lock taken and give up at once, not after SQLite's busy wait, once per batch.
            started = asyncio.get_running_loop().time()
            for n in range(2, 402):  # about 1 MiB of lines
                await sink.append(make_entry(n, reason="x" * 2000))
                await asyncio.sleep(0)  # a turn of the loop, where the steps run
            assert asyncio.get_running_loop().time() - started < 1.0
        finally:
            holder.execute("rollback")
            holder.close()
        # Once the lock is gone, lookups catch up on everything appended meanwhile.
        trace_1 = [n + 1 for n in range(402) if make_entry(n).trace_id == "trace-1"]
        assert [r.seq for r in await sink.by_trace("trace-1")] == trace_1
        last = await sink.by_proposal(make_entry(401).proposal_id)
        assert last is not None and last.seq == 402


async def test_a_seq_the_file_repeats_is_found_at_its_later_line(tmp_path: Path) -> None:
    """A damaged or hand-edited file may hold a seq twice: indexing goes on past it, and the
    later line takes the seq's row, as the file's last word on it."""
    path = tmp_path / "ledger.jsonl"
    await fill(path, range(3))
    drop_index(path)
    repeated = path.read_bytes().splitlines(keepends=True)[-1]
    with path.open("ab") as file:
        file.write(repeated)
    later_start = path.stat().st_size - len(repeated)
    async with JsonlLedgerSink(path) as sink:
        found = await sink.by_proposal("prp_2")
        assert found is not None and found.seq == 3
        assert [r.seq for r in await sink.by_trace("trace-0")] == [1, 3]
        with sqlite3.connect(index_of(path)) as db:
            assert db.execute("select start from lines where seq = 3").fetchall() == [
                (later_start,)
            ]


def rows_of(path: Path) -> list[tuple[object, ...]]:
    """The index rows the file's lines call for, in seq order."""
    rows, offset = [], 0
    for line in path.read_bytes().splitlines(keepends=True):
        record = json.loads(line)
        stop = offset + len(line) - 1
        ids = (record["trace_id"], record["session_id"], record["proposal_id"])
        rows.append((record["seq"], offset, stop, *ids))
        offset += len(line)
    return sorted(rows)


async def test_every_line_gets_its_row_whatever_its_session(tmp_path: Path) -> None:
    """Rows are inserted many per statement, lines without a session apart from the others:
    none is lost or mixed up, whether this process wrote the lines or reads them back."""
    path = tmp_path / "ledger.jsonl"
    sessions = [f"s-{n % 3}" if n % 5 else None for n in range(77)]
    async with JsonlLedgerSink(path, fsync="never") as sink:
        for n, session in enumerate(sessions):
            await sink.append(make_entry(n, session_id=session))
        assert [r.seq for r in await sink.by_session("s-1")] == [
            n + 1 for n, session in enumerate(sessions) if session == "s-1"
        ]
    with sqlite3.connect(index_of(path)) as db:
        assert db.execute("select * from lines order by seq").fetchall() == rows_of(path)
    drop_index(path)
    async with JsonlLedgerSink(path) as sink:
        assert len(await sink.by_trace("trace-0")) == 39
    with sqlite3.connect(index_of(path)) as db:
        assert db.execute("select * from lines order by seq").fetchall() == rows_of(path)
