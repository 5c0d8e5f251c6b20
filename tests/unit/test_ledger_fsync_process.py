"""The fsync child process: answers in order, reports failures, survives its own death."""

from __future__ import annotations

import asyncio
import errno
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from broker.ledger import JsonlLedgerSink, verify
from broker.ledger.fsync_process import FsyncProcess
from broker.ledger.jsonl import FsyncPolicy
from tests.ledger_entries import make_entry


async def test_each_call_is_one_fsync_in_the_child(tmp_path: Path) -> None:
    fd = os.open(tmp_path / "file", os.O_RDWR | os.O_CREAT)
    syncer = FsyncProcess(fd, name="file")
    try:
        for _ in range(3):
            os.write(fd, b"line\n")
            await syncer.fsync()
        child = syncer.pid
        assert child is not None
        await asyncio.gather(*(syncer.fsync() for _ in range(5)))  # answered in order
        assert syncer.pid == child  # one child for every call
        assert not syncer._answers  # every request got its answer, none is left owed
    finally:
        syncer.close()
        os.close(fd)


async def test_a_failing_fsync_raises_its_errno(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()  # fsync on a pipe fails with EINVAL
    syncer = FsyncProcess(read_end, name="pipe")
    try:
        with pytest.raises(OSError) as failure:
            await syncer.fsync()
        assert failure.value.errno == errno.EINVAL
    finally:
        syncer.close()
        os.close(read_end)
        os.close(write_end)


async def test_a_dead_child_fails_what_it_owed_and_the_next_call_starts_another(
    tmp_path: Path,
) -> None:
    fd = os.open(tmp_path / "file", os.O_RDWR | os.O_CREAT)
    syncer = FsyncProcess(fd, name="file")
    try:
        await syncer.fsync()
        first = syncer.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        with pytest.raises(OSError, match="fsync process"):
            await syncer.fsync()
        await syncer.fsync()  # a new child
        assert syncer.pid not in (None, first)
    finally:
        syncer.close()
        os.close(fd)


async def test_the_file_ledger_syncs_through_the_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int | None] = []
    real = FsyncProcess.fsync

    async def counted(self: FsyncProcess) -> None:
        await real(self)
        calls.append(self.pid)

    monkeypatch.setattr(FsyncProcess, "fsync", counted)
    sink = JsonlLedgerSink(tmp_path / "ledger.jsonl", fsync="always")
    refs = await asyncio.gather(*(sink.append(make_entry(n)) for n in range(20)))
    assert sorted(ref.seq for ref in refs) == list(range(1, 21))
    assert calls and all(pid is not None for pid in calls)  # answered by a child process
    assert (await verify(sink)).records == 20
    await sink.close()


async def test_close_stops_the_child(tmp_path: Path) -> None:
    fd = os.open(tmp_path / "file", os.O_RDWR | os.O_CREAT)
    syncer = FsyncProcess(fd, name="file")
    await syncer.fsync()
    pid = syncer.pid
    assert pid is not None
    syncer.close()
    os.close(fd)
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # exited and already reaped by close
    assert syncer.pid is None


@pytest.mark.parametrize("policy", ["batch", "never"])
async def test_no_child_is_started_unless_fsync_is_always(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policy: FsyncPolicy
) -> None:
    started: list[int] = []
    real_start = FsyncProcess._start

    def spying(self: FsyncProcess, loop: asyncio.AbstractEventLoop) -> Any:
        child = real_start(self, loop)
        started.append(child.pid)
        return child

    monkeypatch.setattr(FsyncProcess, "_start", spying)
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    sink = JsonlLedgerSink(tmp_path / "ledger.jsonl", fsync=policy, fsync_interval_s=0.0)
    await asyncio.gather(*(sink.append(make_entry(n)) for n in range(20)))
    await sink.sync()
    await sink.close()
    assert synced  # the records were made durable, in this process (a worker thread)
    assert started == []


async def test_fsync_always_runs_a_live_child_while_the_ledger_is_open(tmp_path: Path) -> None:
    sink = JsonlLedgerSink(tmp_path / "ledger.jsonl", fsync="always")
    await sink.append(make_entry(0))
    pid = sink._fsync_process.pid if sink._fsync_process is not None else None
    assert pid is not None
    os.kill(pid, 0)  # alive: raises ProcessLookupError otherwise
    await sink.close()
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # stopped and reaped by close
