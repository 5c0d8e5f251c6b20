"""The approvals' side of every store (memory, SQLite, Redis): rows kept and listed in order, and
the compare-and-set each transition of an approval is taken by, exactly once under a race."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import cast

from broker.stores import SqliteStore, Store
from broker.stores.approvals import ApprovalRow, ApprovalStore


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
