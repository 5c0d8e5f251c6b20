"""Group commit gathers calls that arrive a loop turn or two apart (the MCP SDK's dispatcher hands
requests to the chain one every other turn) into one commit, and still commits a stream that
never pauses."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from broker.ledger.batching import GroupCommit
from broker.quiet_turns import MAX_WAIT_TURNS
from broker.stores.sqlite_writer import Writer


def _recording_group() -> tuple[GroupCommit[int, int], list[list[int]]]:
    batches: list[list[int]] = []

    async def commit(items: list[int]) -> list[int | Exception]:
        batches.append(list(items))
        return list(items)

    return GroupCommit(commit, name="test"), batches


async def _turns(count: int) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


@pytest.mark.parametrize("apart", [1, 2])
async def test_appends_turns_apart_share_a_commit(apart: int) -> None:
    group, batches = _recording_group()
    futures = []
    for n in range(4):
        futures.append(group.submit(n))
        await _turns(apart)  # the next append comes that many turns of the loop later
    assert await asyncio.gather(*futures) == [0, 1, 2, 3]
    assert batches == [[0, 1, 2, 3]]


async def test_appends_that_never_pause_are_committed_all_the_same() -> None:
    group, batches = _recording_group()
    futures = []
    for n in range(3 * MAX_WAIT_TURNS):
        futures.append(group.submit(n))
        await asyncio.sleep(0)
    assert await asyncio.gather(*futures) == list(range(3 * MAX_WAIT_TURNS))
    assert len(batches) > 1
    assert max(len(batch) for batch in batches) <= MAX_WAIT_TURNS + 1


@pytest.mark.parametrize("apart", [1, 2])
async def test_sqlite_calls_turns_apart_share_a_commit(tmp_path: Path, apart: int) -> None:
    path = tmp_path / "writer.sqlite3"
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    db.execute("CREATE TABLE tool (name TEXT PRIMARY KEY, n INTEGER)")
    statements: list[str] = []
    db.set_trace_callback(statements.append)
    writer = Writer(db, path, clock=lambda: 0.0, on_failure=lambda: None)
    try:
        waits = []
        for n in range(4):
            batch = writer.batch()
            batch.tool[f"t{n}"] = (f"t{n}", n)
            waits.append(batch.wait())
            await _turns(apart)  # the next call comes that many turns of the loop later
        await asyncio.gather(*waits)
    finally:
        writer.close()
    assert statements.count("COMMIT") == 1
    assert db.execute("SELECT count(*) FROM tool").fetchone() == (4,)
    db.close()
