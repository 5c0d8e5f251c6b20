"""JSONL sink specifics: torn tails, fsync policies, group commit, several writers, I/O faults."""

from __future__ import annotations

import asyncio
import errno
import fcntl
import logging
import os
import threading
from pathlib import Path
from typing import Any

import pytest

import broker.ledger.jsonl as jsonl_module
from broker.ledger import (
    JsonlLedgerSink,
    LedgerCorruptError,
    LedgerUnavailableError,
    verify,
)
from tests.ledger_entries import make_entry


class FsyncCounter:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        real = os.fsync

        def counting(fd: int) -> None:
            self.calls += 1
            real(fd)

        monkeypatch.setattr(os, "fsync", counting)


async def test_a_torn_last_line_is_cut_on_open_and_the_chain_resumes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "ledger.jsonl"
    async with JsonlLedgerSink(path) as sink:
        for n in range(3):
            await sink.append(make_entry(n))
    intact = path.read_bytes()
    path.write_bytes(intact + b'{"args_hash":"sha256:0123')  # killed mid-append

    with caplog.at_level(logging.WARNING, logger="broker.ledger"):
        sink = JsonlLedgerSink(path)
    assert "torn record" in caplog.text
    assert path.read_bytes() == intact
    assert (await sink.append(make_entry(3))).seq == 4
    assert (await verify(sink)).records == 4
    await sink.close()


async def test_readers_ignore_a_torn_tail_without_touching_the_file(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    async with JsonlLedgerSink(path) as sink:
        await sink.append(make_entry(0))
    torn = path.read_bytes() + b'{"seq":2,'
    path.write_bytes(torn)
    async with JsonlLedgerSink(path, read_only=True) as reader:
        report = await verify(reader)
        assert (report.ok, report.records) == (True, 1)
        assert [record.seq async for record in reader.read()] == [1]
        with pytest.raises(LedgerUnavailableError):
            await reader.append(make_entry(1))
        with pytest.raises(LedgerUnavailableError):
            await reader.ping()
    assert path.read_bytes() == torn


async def test_an_unparseable_last_record_stops_appends_instead_of_forking(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    async with JsonlLedgerSink(path) as sink:
        await sink.append(make_entry(0))
    path.write_bytes(path.read_bytes() + b"not json at all\n")
    sink = JsonlLedgerSink(path)
    with pytest.raises(LedgerCorruptError, match="malformed"):
        await sink.append(make_entry(1))
    assert issubclass(LedgerCorruptError, LedgerUnavailableError)
    await sink.close()


async def test_fsync_always_syncs_every_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = JsonlLedgerSink(tmp_path / "ledger.jsonl", fsync="always", fsync_in="thread")
    fsyncs = FsyncCounter(monkeypatch)
    for n in range(3):
        await sink.append(make_entry(n))
    assert fsyncs.calls == 3
    await sink.close()


async def test_fsync_batch_syncs_once_the_interval_has_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [100.0]
    sink = JsonlLedgerSink(
        tmp_path / "ledger.jsonl",
        fsync="batch",
        fsync_interval_s=1.0,
        monotonic=lambda: now[0],
        fsync_in="thread",
    )
    fsyncs = FsyncCounter(monkeypatch)
    await sink.append(make_entry(0))
    now[0] += 0.5
    await sink.append(make_entry(1))
    assert fsyncs.calls == 0
    now[0] += 0.6
    await sink.append(make_entry(2))
    assert fsyncs.calls == 1
    await sink.append(make_entry(3))
    assert fsyncs.calls == 1
    await sink.sync()
    assert fsyncs.calls == 2
    await sink.append(make_entry(4))
    assert fsyncs.calls == 2
    await sink.close()  # syncs what is not durable yet
    assert fsyncs.calls == 3


async def test_fsync_never_leaves_it_to_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = JsonlLedgerSink(tmp_path / "ledger.jsonl", fsync="never", fsync_in="thread")
    fsyncs = FsyncCounter(monkeypatch)
    for n in range(5):
        await sink.append(make_entry(n))
    assert fsyncs.calls == 0
    await sink.close()
    assert fsyncs.calls == 1


async def test_concurrent_appends_are_group_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = JsonlLedgerSink(tmp_path / "ledger.jsonl", fsync="always", fsync_in="thread")
    fsyncs = FsyncCounter(monkeypatch)
    refs = await asyncio.gather(*(sink.append(make_entry(n)) for n in range(50)))
    assert sorted(ref.seq for ref in refs) == list(range(1, 51))
    assert fsyncs.calls <= 3  # one for the first caller, one for everyone who queued meanwhile
    assert (await verify(sink)).records == 50
    await sink.close()


async def test_a_bad_entry_fails_alone_in_its_batch(tmp_path: Path) -> None:
    sink = JsonlLedgerSink(tmp_path / "ledger.jsonl")
    outcomes = await asyncio.gather(
        sink.append(make_entry(0)),
        sink.append(make_entry(1, tool=42)),
        sink.append(make_entry(2)),
        return_exceptions=True,
    )
    assert isinstance(outcomes[1], ValueError)
    assert [getattr(o, "seq", None) for o in outcomes] == [1, None, 2]
    assert (await verify(sink)).records == 2
    await sink.close()


async def test_two_writers_on_one_file_extend_one_chain(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    first, second = JsonlLedgerSink(path), JsonlLedgerSink(path)
    seqs = []
    for n in range(6):
        seqs.append((await (first if n % 2 else second).append(make_entry(n))).seq)
    assert seqs == [1, 2, 3, 4, 5, 6]
    assert await first.head() == await second.head()
    found = await second.by_proposal("prp_1")
    assert found is not None and found.seq == 2
    assert [r.seq for r in await first.by_trace("trace-0")] == [1, 3, 5]
    report = await verify(first)
    assert (report.ok, report.records) == (True, 6)
    await first.close()
    await second.close()


async def test_a_failed_write_leaves_no_partial_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ledger.jsonl"
    sink = JsonlLedgerSink(path)
    await sink.append(make_entry(0))
    before = path.read_bytes()
    real_write = os.write

    def disk_full(fd: int, data: Any) -> int:
        real_write(fd, bytes(data)[:10])  # the kernel took a little, then the disk filled
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", disk_full)
    with pytest.raises(LedgerUnavailableError, match="No space left"):
        await sink.append(make_entry(1))
    monkeypatch.setattr(os, "write", real_write)
    assert path.read_bytes() == before
    assert (await sink.append(make_entry(2))).seq == 2
    await sink.close()


async def test_an_unopenable_path_is_reported_as_unavailable(tmp_path: Path) -> None:
    (tmp_path / "dir.jsonl").mkdir()
    with pytest.raises(LedgerUnavailableError, match="cannot open ledger"):
        JsonlLedgerSink(tmp_path / "dir.jsonl")
    with pytest.raises(LedgerUnavailableError):
        JsonlLedgerSink(tmp_path / "missing.jsonl", read_only=True)


async def test_ping_notices_the_file_was_replaced_or_removed(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    sink = JsonlLedgerSink(path)
    await sink.ping()
    (tmp_path / "other.jsonl").write_bytes(b"")
    (tmp_path / "other.jsonl").replace(path)
    await asyncio.sleep(0)  # the next turn of the event loop, where pings look again
    with pytest.raises(LedgerUnavailableError, match="replaced or removed"):
        await sink.ping()
    path.unlink()
    with pytest.raises(LedgerUnavailableError, match="No such file"):
        await sink.ping()  # a failed check is never shared: this one looks again at once
    await sink.close()


async def test_pings_in_one_turn_of_the_event_loop_share_one_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = JsonlLedgerSink(tmp_path / "ledger.jsonl")
    looked: list[object] = []
    real_stat = os.stat
    monkeypatch.setattr(os, "stat", lambda *a, **k: looked.append(a) or real_stat(*a, **k))
    await asyncio.gather(*(sink.ping() for _ in range(5)))
    assert len(looked) == 1
    await asyncio.sleep(0)
    await sink.ping()
    assert len(looked) == 2
    await sink.close()


def test_an_unknown_fsync_policy_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="fsync"):
        JsonlLedgerSink(tmp_path / "ledger.jsonl", fsync="sometimes")  # type: ignore[arg-type]


@pytest.mark.parametrize("fsync", ["always", "never"])
async def test_an_append_never_extends_a_file_moved_away_from_its_path(
    tmp_path: Path, fsync: Any
) -> None:
    path = tmp_path / "ledger.jsonl"
    sink = JsonlLedgerSink(path, fsync=fsync)
    await sink.append(make_entry(1))
    path.rename(tmp_path / "moved.jsonl")
    with pytest.raises(LedgerUnavailableError, match="No such file"):
        await sink.append(make_entry(2))
    assert len((tmp_path / "moved.jsonl").read_bytes().splitlines()) == 1
    await sink.close()


async def test_the_next_batch_is_written_while_the_previous_one_is_being_synced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ledger.jsonl"
    sink = JsonlLedgerSink(path, fsync="always", fsync_in="thread")
    release = threading.Event()
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (release.wait(5), real(fd)))

    first = asyncio.ensure_future(sink.append(make_entry(0)))
    while len(path.read_bytes().splitlines()) < 1:
        await asyncio.sleep(0.005)
    second = asyncio.ensure_future(sink.append(make_entry(1)))
    while len(path.read_bytes().splitlines()) < 2:  # written although the first fsync hangs
        await asyncio.sleep(0.005)
    assert not first.done() and not second.done()  # neither returns before its bytes are durable
    release.set()
    assert [(await first).seq, (await second).seq] == [1, 2]
    await sink.close()


async def test_a_failed_fsync_fails_its_appends_and_the_probe_until_one_succeeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = JsonlLedgerSink(tmp_path / "ledger.jsonl", fsync="always", fsync_in="thread")
    real = os.fsync

    def broken(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(LedgerUnavailableError, match="fsync failed"):
        await sink.append(make_entry(0))
    with pytest.raises(LedgerUnavailableError, match="fsync failed"):
        await sink.ping()
    monkeypatch.setattr(os, "fsync", real)
    await sink.ping()
    assert (await sink.append(make_entry(1))).seq == 2  # the unconfirmed record stays: it is true
    assert (await verify(sink)).records == 2
    await sink.close()


async def test_close_answers_an_append_still_waiting_for_its_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = JsonlLedgerSink(tmp_path / "ledger.jsonl", fsync="always", fsync_in="thread")
    release = threading.Event()
    real = os.fsync
    synced_fds: list[int] = []

    def gated(fd: int) -> None:
        release.wait(5)
        real(fd)  # raises on a closed descriptor: the test would see it
        synced_fds.append(fd)

    monkeypatch.setattr(os, "fsync", gated)
    appending = asyncio.ensure_future(sink.append(make_entry(0)))
    await asyncio.sleep(0.05)  # written, waiting for its fsync
    closing = asyncio.create_task(sink.close())
    await asyncio.sleep(0.05)
    release.set()
    assert (await appending).seq == 1
    await closing
    assert synced_fds  # every fsync ran while the file was open


async def test_an_append_waits_for_another_writers_lock_and_gives_up_on_a_stuck_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ledger.jsonl"
    sink = JsonlLedgerSink(path, fsync="never")
    other = os.open(path, os.O_RDWR)  # another open file: its flock conflicts with the sink's
    try:
        fcntl.flock(other, fcntl.LOCK_EX)
        asyncio.get_running_loop().call_later(0.05, fcntl.flock, other, fcntl.LOCK_UN)
        assert (await sink.append(make_entry(0))).seq == 1  # written once the lock was free

        monkeypatch.setattr(jsonl_module, "_LOCK_WAIT_S", 0.2)
        fcntl.flock(other, fcntl.LOCK_EX)  # a writer that stopped while holding it
        with pytest.raises(LedgerUnavailableError, match="stayed locked"):
            await sink.append(make_entry(1))
        fcntl.flock(other, fcntl.LOCK_UN)
        assert (await sink.append(make_entry(1))).seq == 2
    finally:
        os.close(other)
        await sink.close()
    async with JsonlLedgerSink(path, read_only=True) as reader:
        assert (await verify(reader)).records == 2
