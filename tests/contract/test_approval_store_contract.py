"""The approvals' side of every store (memory, SQLite, Redis): rows kept and listed in order, and
the compare-and-set each transition of an approval is taken by, exactly once under a race."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import cast

import pytest

from broker.stores import Replay, SqliteStore, Store, StoredResponse
from broker.stores.approvals import ApprovalRow, ApprovalStore
from broker.stores.redis import RedisStore
from broker.stores.redis_scripts import ScriptCall
from broker.stores.sqlite_writer import Batch
from broker.taxonomy import StoreUnavailableError
from tests.contract.test_store_contract import (
    DAY,
    adm,
    admit,
    budget,
    claim,
    record,
    room,
    ticket_of,
)


def _row(
    approval_id: str, status: str = "pending", at: float = 1.0, body: bytes = b"{}"
) -> ApprovalRow:
    return ApprovalRow(id=approval_id, status=status, tenant="acme", created_at=at, body=body)


def approvals(store: Store) -> ApprovalStore:
    return cast(ApprovalStore, store)


async def test_rows_are_kept_read_back_and_listed_oldest_first(store: Store) -> None:
    kept = approvals(store)
    assert await kept.get_approval("apr_none") is None
    assert await kept.list_approvals(None) == []
    await kept.put_approval(_row("apr_b", at=2.0, body=b'{"n": 2}'))
    await kept.put_approval(_row("apr_a", at=1.5, body=b'{"n": 1}'))
    await kept.put_approval(_row("apr_c", status="denied", at=3.0))
    assert await kept.get_approval("apr_b") == _row("apr_b", at=2.0, body=b'{"n": 2}')
    assert [r.id for r in await kept.list_approvals(None)] == ["apr_a", "apr_b", "apr_c"]
    assert [r.id for r in await kept.list_approvals("pending")] == ["apr_a", "apr_b"]
    assert [r.id for r in await kept.list_approvals("denied")] == ["apr_c"]


async def test_a_swap_happens_only_from_the_expected_status(store: Store) -> None:
    kept = approvals(store)
    await kept.put_approval(_row("apr_1"))
    approved = _row("apr_1", status="approved", body=b'{"by": "x"}')
    assert not await kept.swap_approval("apr_1", "approved", approved)  # it is pending
    assert await kept.get_approval("apr_1") == _row("apr_1")
    assert await kept.swap_approval("apr_1", "pending", approved)
    assert await kept.get_approval("apr_1") == approved
    assert not await kept.swap_approval("apr_1", "pending", _row("apr_1", status="denied"))
    assert not await kept.swap_approval("apr_missing", "pending", _row("apr_missing"))
    assert await kept.get_approval("apr_missing") is None


async def test_of_many_racing_swaps_exactly_one_wins(store: Store) -> None:
    kept = approvals(store)
    await kept.put_approval(_row("apr_race"))
    results = await asyncio.gather(
        *(
            kept.swap_approval(
                "apr_race", "pending", _row("apr_race", status="approved", body=str(i).encode())
            )
            for i in range(32)
        )
    )
    assert results.count(True) == 1
    winner = results.index(True)
    found = await kept.get_approval("apr_race")
    assert found is not None and found.body == str(winner).encode()


async def test_sqlite_keeps_approvals_across_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    first = SqliteStore(path)
    await first.put_approval(_row("apr_k"))
    assert await first.swap_approval("apr_k", "pending", _row("apr_k", status="expired"))
    await first.close()
    second = SqliteStore(path)
    try:
        assert await second.get_approval("apr_k") == _row("apr_k", status="expired")
        assert [r.id for r in await second.list_approvals("expired")] == ["apr_k"]
    finally:
        await second.close()


async def test_opening_an_approval_creates_it_and_completes_the_key_holding_the_charges(
    store: Store,
) -> None:
    """The pending path's one store step: the approval, the key completed with the 202 (its
    retry replays it), the decision record, and the budget charge kept (held for a person)."""
    held, now = budget(4), time.time()  # the memory store reads records back by the wall clock
    c = claim("key-approval")
    ticket = ticket_of(await admit(store, adm(c, charges=(held,)), now))
    pending = StoredResponse(202, b'{"decision":"pending_approval"}')
    row = _row("apr_open", at=now)
    opened = await approvals(store).open_approval(
        row,
        ticket,
        response=pending,
        record=record("prp_open", pending),
        ttl_s=DAY,
        now=now + 1,
    )
    assert opened is True
    assert await approvals(store).get_approval("apr_open") == row
    assert [r.id for r in await approvals(store).list_approvals("pending")] == ["apr_open"]
    assert await store.lookup(c, now=now + 2) == Replay(pending)
    assert await store.load_decision("prp_open") == record("prp_open", pending)
    assert await room(store, held, now + 2) == 6  # 4 of 10 held until someone decides


@pytest.mark.parametrize("store", ["redis"], indirect=True)
async def test_on_a_standalone_redis_opening_is_one_script_call(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pending path's store step costs one round trip: no separate approval write."""
    assert isinstance(store, RedisStore)
    calls: list[str] = []
    transport = store._transport
    script = transport.script

    async def counted(call: ScriptCall) -> object:
        calls.append(call.script)
        return await script(call)

    async def no_separate_write(row: ApprovalRow, expected: str) -> bool:
        raise AssertionError("the approval was written apart from the settlement")

    monkeypatch.setattr(transport, "script", counted)
    monkeypatch.setattr(store._approvals, "_run", no_separate_write)
    now = time.time()
    c = claim("key-one-trip")
    ticket = ticket_of(await admit(store, adm(c), now))
    calls.clear()
    pending = StoredResponse(202, b"{}")
    await store.open_approval(
        _row("apr_trip", at=now),
        ticket,
        response=pending,
        record=record("prp_trip", pending),
        ttl_s=DAY,
        now=now,
    )
    assert calls == ["settle"]
    monkeypatch.undo()
    assert await store.get_approval("apr_trip") == _row("apr_trip", at=now)


async def test_on_sqlite_opening_is_one_commit_that_outlives_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The approval is written in the commit that completes the key (nothing on the approvals'
    own connection): the pending path waits for one commit, and a restart finds both. The
    claim's row is the 202's decision record too (no second copy in the decision table)."""
    path = tmp_path / "state.db"
    store = SqliteStore(path)
    now = time.time()
    c = claim("key-one-commit")
    ticket = ticket_of(await admit(store, adm(c), now))
    committed: list[tuple[list[str], list[str], int]] = []
    commit = store._writer._commit

    def counted(batch: Batch) -> None:
        committed.append((list(batch.approval), list(batch.decision), len(batch.claims)))
        commit(batch)

    async def no_separate_write(row: ApprovalRow, *, previous: ApprovalRow | None) -> None:
        raise AssertionError("the approval was written apart from the settlement")

    monkeypatch.setattr(store._writer, "_commit", counted)
    monkeypatch.setattr(store, "_keep", no_separate_write)
    pending = StoredResponse(202, b"{}")
    row = _row("apr_commit", at=now)
    opened = await store.open_approval(
        row, ticket, response=pending, record=record("prp_commit", pending), ttl_s=DAY, now=now
    )
    assert opened is True
    assert committed == [(["apr_commit"], [], 1)]
    monkeypatch.undo()
    await store.close()
    again = SqliteStore(path)
    try:
        assert await again.get_approval("apr_commit") == row
        assert await again.lookup(c, now=now + 1) == Replay(pending)
        found = await again.load_decision("prp_commit")
        assert found is not None and found.response == pending
    finally:
        await again.close()


async def test_on_sqlite_a_failed_opening_leaves_no_approval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """All or nothing: when the commit fails, neither memory nor the file holds the approval,
    and the key is not completed (the caller answers 503; a retry proposes it again)."""
    store = SqliteStore(tmp_path / "state.db")
    try:
        now = time.time()
        c = claim("key-failed-open")
        ticket = ticket_of(await admit(store, adm(c), now))

        def failing(batch: Batch) -> None:
            raise sqlite3.OperationalError("disk I/O error")

        monkeypatch.setattr(store._writer, "_commit", failing)
        pending = StoredResponse(202, b"{}")
        with pytest.raises(StoreUnavailableError):
            await store.open_approval(
                _row("apr_failed", at=now),
                ticket,
                response=pending,
                record=record("prp_failed", pending),
                ttl_s=DAY,
                now=now,
            )
        monkeypatch.undo()
        assert await store.get_approval("apr_failed") is None
        assert await store.list_approvals(None) == []
        assert await store.lookup(c, now=now + 1) != Replay(pending)
    finally:
        await store.close()
