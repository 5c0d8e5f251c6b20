"""An ``outcome_unknown`` key survives restarts of the embedded store, never expires, is counted
from the file, and its resolution is durable too (the SQLite store reopened on its file)."""

from __future__ import annotations

from pathlib import Path

from broker.stores import (
    Admission,
    Admitted,
    ClaimRequest,
    Conflict,
    DecisionRecord,
    Replay,
    Resolution,
    Settlement,
    SqliteStore,
    StoredResponse,
)

T0 = 1_700_006_400.0
YEAR = 365 * 86_400
OK = StoredResponse(200, b'{"ok":true}')


def claim(key: str, *, lease_s: float = 30.0) -> ClaimRequest:
    return ClaimRequest(
        tenant="acme", route="ops", key=key, fingerprint="fp", lease_s=lease_s, idempotent=False
    )


async def test_unknown_keys_outlive_restarts_and_their_resolution_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    store = SqliteStore(path, clock=lambda: T0)
    settled, abandoned = claim("settled-unknown"), claim("abandoned", lease_s=5)
    admitted = await store.admit(Admission(tenant="acme", claim=settled), now=T0, dry_run=False)
    assert isinstance(admitted, Admitted)
    record = DecisionRecord(proposal_id="prp_1", tenant="acme", route="ops", response=OK)
    await store.settle(
        admitted.ticket, Settlement.UNKNOWN, response=OK, record=record, ttl_s=600, now=T0 + 1
    )
    second = await store.admit(Admission(tenant="acme", claim=abandoned), now=T0, dry_run=False)
    assert isinstance(second, Admitted)  # its call is sent, and the process "dies" mid-call
    assert await store.dispatch(second.ticket, proposal_id="prp_2", now=T0)
    await store.close()

    later = T0 + YEAR
    store = SqliteStore(path, clock=lambda: later)
    try:
        assert await store.unknown_keys() == 2  # the abandoned claim counts from the start
        for c in (settled, abandoned):
            verdict = await store.admit(Admission(tenant="acme", claim=c), now=later, dry_run=False)
            assert verdict == Conflict("outcome_unknown")
        assert (
            await store.resolve(settled, Resolution.SUCCEEDED, response=OK, ttl_s=600, now=later)
            == "resolved"
        )
        assert (
            await store.resolve(
                abandoned, Resolution.NOT_EXECUTED, response=None, ttl_s=600, now=later
            )
            == "resolved"
        )
    finally:
        await store.close()

    store = SqliteStore(path, clock=lambda: later + 1)
    try:
        assert await store.unknown_keys() == 0
        replay = await store.admit(
            Admission(tenant="acme", claim=settled), now=later + 1, dry_run=False
        )
        assert replay == Replay(OK)
        again = await store.admit(
            Admission(tenant="acme", claim=abandoned), now=later + 1, dry_run=False
        )
        assert isinstance(again, Admitted)  # released: the retry runs
    finally:
        await store.close()
