"""SQLite-store specifics the shared contract suite cannot reach: what a reopened file holds,
files it must refuse, one process per file, bounded sweeps, failed commits, and store choice."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from pathlib import Path

import httpx
import msgspec
import pytest

from broker.config import BrokerConfig
from broker.state import open_store, store_path, warn_about_store
from broker.stores import (
    Admission,
    Admitted,
    BudgetCharge,
    ClaimRequest,
    Conflict,
    DecisionRecord,
    Limited,
    MemoryStore,
    RateHit,
    RegisteredTool,
    Replay,
    Settlement,
    SqliteStore,
    StoredResponse,
)
from broker.stores.memory import _SWEEP_EVERY as _MEMORY_SWEEP_EVERY
from broker.stores.sqlite_file import (
    SCHEMA_VERSION,
    WAL_RESTART_FRAMES,
    Checkpointer,
    open_database,
)
from broker.stores.sqlite_writer import _SWEEP_BATCH, _SWEEP_EVERY
from broker.taxonomy import ConfigError, StoreUnavailableError
from tests.conftest import Clock

T0 = 1_700_006_400.0
OK = StoredResponse(200, b'{"ok":true}')
CHARGE = BudgetCharge(name="credits", scope="tenant:acme", amount=30, limit=100, window_s=86_400)
HIT = RateHit(name="calls", scope="tenant:acme", limit=2, window_s=60.0)


def claim(key: str, *, idempotent: bool = False, lease_s: float = 5.0) -> ClaimRequest:
    return ClaimRequest(
        tenant="acme",
        route="billing_help",
        key=key,
        fingerprint="fp",
        lease_s=lease_s,
        idempotent=idempotent,
    )


def record(proposal_id: str) -> DecisionRecord:
    return DecisionRecord(proposal_id=proposal_id, tenant="acme", route="billing_help", response=OK)


async def admitted(store: SqliteStore, admission: Admission, now: float) -> Admitted:
    result = await store.admit(admission, now=now, dry_run=False)
    assert isinstance(result, Admitted), result
    return result


async def test_a_reopened_file_holds_keys_budgets_rates_decisions_and_tools(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    store = SqliteStore(path, clock=lambda: T0)
    running = claim("in-flight")
    flying = await admitted(store, Admission(tenant="acme", claim=running, charges=(CHARGE,)), T0)
    assert await store.dispatch(flying.ticket, proposal_id="prp_0", now=T0)
    unsent = claim("never-sent")  # claimed and charged, then its process died before the call
    await admitted(store, Admission(tenant="acme", claim=unsent, charges=(CHARGE,)), T0)
    done = await admitted(
        store, Admission(tenant="acme", claim=claim("done"), charges=(CHARGE,), hits=(HIT,)), T0
    )
    await store.settle(
        done.ticket, Settlement.SUCCEEDED, response=OK, record=record("prp_1"), ttl_s=600, now=T0
    )
    await admitted(store, Admission(tenant="acme", claim=None, hits=(HIT,)), T0 + 1)
    tool = RegisteredTool(
        name="ops.restart", spec=b"{}", signing_secret="s3cret", updated_at=T0, updated_by="admin"
    )
    await store.put_tool(tool, keep_secret=True)
    await store.close()

    again = SqliteStore(path, clock=lambda: T0 + 2)
    try:
        assert await again.lookup(claim("done"), now=T0 + 2) == Replay(OK)
        assert await again.lookup(running, now=T0 + 2) == Conflict("in_progress", 3.0)
        # The lease lapsed while nobody held it: it may have reached the backend.
        assert await again.lookup(running, now=T0 + 6) == Conflict("outcome_unknown")
        # This one was never dispatched: released, and its charge given back.
        assert await again.lookup(unsent, now=T0 + 6) is None
        # 60 of 100 spent: another 30 fits, a fourth does not.
        await admitted(again, Admission(tenant="acme", claim=None, charges=(CHARGE,)), T0 + 7)
        refused = await again.admit(
            Admission(tenant="acme", claim=None, charges=(CHARGE,)), now=T0 + 7, dry_run=False
        )
        assert isinstance(refused, Limited) and refused.kind == "budget"
        limited = await again.admit(
            Admission(tenant="acme", claim=None, hits=(HIT,)), now=T0 + 8, dry_run=False
        )
        assert isinstance(limited, Limited) and limited.retry_after_s == pytest.approx(52.0)
        assert await again.load_decision("prp_1") == record("prp_1")
        snapshot = await again.list_tools()
        assert snapshot.version == 1 and snapshot.tools == (tool,)
    finally:
        await again.close()


async def test_the_dispatch_mark_is_in_the_file_when_dispatch_returns(tmp_path: Path) -> None:
    """What recovery relies on: killed right after ``dispatch``, the process leaves a claim the
    next one knows may have been sent; killed before, none marked as sent."""
    path = tmp_path / "state.sqlite3"
    store = SqliteStore(path, clock=lambda: T0)
    outside = sqlite3.connect(path)
    try:
        got = await admitted(store, Admission(tenant="acme", claim=claim("k")), T0)
        query = "SELECT dispatched, proposal_id FROM idem WHERE key = 'k'"
        assert outside.execute(query).fetchone() in (None, (0, None))
        assert await store.dispatch(got.ticket, proposal_id="prp_k", now=T0)
        assert outside.execute(query).fetchone() == (1, "prp_k")
    finally:
        outside.close()
        await store.close()


async def test_a_schema_2_file_is_migrated_and_its_claims_count_as_dispatched(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.sqlite3"
    store = SqliteStore(path, clock=lambda: T0)
    await admitted(store, Admission(tenant="acme", claim=claim("old")), T0)
    await store.close()
    with sqlite3.connect(path) as db:  # the file as the previous version wrote it
        for column in ("decided", "charges", "proposal_id", "dispatched"):
            db.execute(f"ALTER TABLE idem DROP COLUMN {column}")
        db.execute("PRAGMA user_version = 2")

    again = SqliteStore(path, clock=lambda: T0 + 10)
    try:
        # Written before the mark existed, it may have been sent: never released blindly.
        assert await again.lookup(claim("old"), now=T0 + 10) == Conflict("outcome_unknown")
    finally:
        await again.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)


async def test_admitted_claims_are_in_the_file_with_the_next_commit_anyone_waits_for(
    tmp_path: Path,
) -> None:
    """An admission does not wait for its own commit (memory decides: one process per file),
    but batches commit in order, so whatever is waited for next (here a decision record; on
    the way to an adapter, the dispatch mark) brings the claims into the file with it."""
    path = tmp_path / "state.sqlite3"
    store = SqliteStore(path, clock=lambda: T0)
    outside = sqlite3.connect(path)  # another connection sees only what is committed
    try:
        for i in range(3):
            await admitted(store, Admission(tenant="acme", claim=claim(f"k{i}")), T0)
        await store.save_decision(record("prp_1"), ttl_s=600)
        (claimed,) = outside.execute(
            "SELECT count(*) FROM idem WHERE state = 'p' AND key IN ('k0', 'k1', 'k2')"
        ).fetchone()
        assert claimed == 3
    finally:
        outside.close()
        await store.close()


async def test_a_batch_nobody_waits_for_is_not_committed_alone(tmp_path: Path) -> None:
    """Rows queued by calls that go on without waiting (admissions) wait for the next commit
    some call asks for: a pending approval's claim rides with its settlement, one commit, not
    two. Nothing is lost meanwhile that was promised: no adapter call leaves before a commit."""
    path = tmp_path / "state.sqlite3"
    store = SqliteStore(path, clock=lambda: T0)
    outside = sqlite3.connect(path)
    try:
        await admitted(store, Admission(tenant="acme", claim=claim("k")), T0)
        for _ in range(20):  # many quiet turns, and time for a commit thread to finish one
            await asyncio.sleep(0)
        await asyncio.sleep(0.05)
        assert outside.execute("SELECT count(*) FROM idem").fetchone() == (0,)
        await store.save_decision(record("prp_1"), ttl_s=600)
        assert outside.execute("SELECT count(*) FROM idem").fetchone() == (1,)
    finally:
        outside.close()
        await store.close()


async def test_a_claim_whose_admission_never_reached_the_file_is_never_dispatched(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.sqlite3"
    store = SqliteStore(path, clock=lambda: T0)
    try:
        got = await admitted(store, Admission(tenant="acme", claim=claim("k")), T0)
        with sqlite3.connect(path) as db:  # before the admission's commit: it fails
            db.execute("DROP TABLE idem")
        with contextlib.suppress(StoreUnavailableError):
            assert not await store.dispatch(got.ticket, proposal_id="prp_k", now=T0)
        assert await store.lookup(claim("k"), now=T0 + 1) is None  # forgotten, never sent
    finally:
        await store.close()


async def _written(path: Path) -> bytes:
    store = SqliteStore(path)
    for i in range(200):
        await store.save_decision(record(f"prp_{i}"), ttl_s=600)
    await store.close()
    return path.read_bytes()


def _refusal(path: Path) -> str:
    with pytest.raises(ConfigError) as refused:
        SqliteStore(path)
    ((where, message),) = refused.value.problems
    assert where == "service.store_path"
    assert message.startswith(f"{path}: ")
    return message


async def test_a_file_written_by_a_newer_broker_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    await _written(path)
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 99")
    before = path.read_bytes()
    assert "written by a newer broker (schema 99" in _refusal(path)
    assert path.read_bytes() == before


async def test_a_file_of_the_unreleased_first_schema_is_refused_and_left_alone(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.sqlite3"
    await _written(path)
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 1")
    before = path.read_bytes()
    assert "not this broker's state (schema version 1" in _refusal(path)
    assert path.read_bytes() == before


def test_another_programs_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE notes (body TEXT)")
    assert "not this broker's state" in _refusal(path)
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT name FROM sqlite_master").fetchall() == [("notes",)]


async def test_a_damaged_file_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    original = await _written(path)
    page = 4096
    damaged = original[: 2 * page] + b"\xa5" * page + original[3 * page :]
    path.write_bytes(damaged)
    message = _refusal(path)
    assert "damaged database" in message or "not a readable SQLite database" in message
    assert path.read_bytes() == damaged


async def test_one_process_per_file(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    first = SqliteStore(path)
    try:
        assert "in use by another broker process" in _refusal(path)
    finally:
        await first.close()
    await SqliteStore(path).close()  # released on close (and by the kernel on any exit)


async def test_expired_rows_are_swept_in_bounded_steps(tmp_path: Path) -> None:
    clock = Clock()
    clock.now = T0
    store = SqliteStore(tmp_path / "state.sqlite3", clock=clock)
    expired = 3 * _SWEEP_BATCH
    for i in range(expired):
        await store.save_decision(record(f"old_{i}"), ttl_s=1)
    clock.now = T0 + 10
    reader = sqlite3.connect(tmp_path / "state.sqlite3")
    left = []
    try:
        for i in range(4 * _SWEEP_EVERY):  # one commit each: four sweeps
            await store.save_decision(record(f"new_{i}"), ttl_s=600)
            if (i + 1) % _SWEEP_EVERY == 0:
                (count,) = reader.execute(
                    "SELECT count(*) FROM decision WHERE proposal_id LIKE 'old_%'"
                ).fetchone()
                left.append(count)
    finally:
        reader.close()
        await store.close()
    assert left[:3] == [expired - _SWEEP_BATCH * n for n in (1, 2, 3)]
    assert left[3] == 0


async def test_a_failed_commit_answers_503_and_forgets_what_the_file_lacks(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.sqlite3"
    store = SqliteStore(path, clock=lambda: T0)
    try:
        ticket = (await admitted(store, Admission(tenant="acme", claim=claim("k")), T0)).ticket
        assert await store.dispatch(ticket, proposal_id="p", now=T0)  # the claim is in the file
        with sqlite3.connect(path) as db:  # the file changes under the store
            db.execute(
                "CREATE TRIGGER refused BEFORE INSERT ON idem BEGIN SELECT RAISE(ABORT, 'no'); END"
            )
        with pytest.raises(StoreUnavailableError):
            await store.settle(
                ticket, Settlement.SUCCEEDED, response=OK, record=record("p"), ttl_s=60, now=T0
            )
        # The completion never reached the file, so it is not answered from memory either.
        assert await store.lookup(claim("k"), now=T0 + 1) == Conflict("in_progress", 4.0)
    finally:
        await store.close()


def _with_service(config: BrokerConfig, tmp_path: Path, **service: object) -> BrokerConfig:
    changed = msgspec.structs.replace(
        config.service, ledger_path=str(tmp_path / "data" / "ledger.jsonl"), **service
    )
    return msgspec.structs.replace(config, service=changed)


async def test_sqlite_is_the_default_beside_the_ledger(
    demo_config: BrokerConfig, tmp_path: Path
) -> None:
    config = _with_service(demo_config, tmp_path)
    store = open_store(config, {}, clock=lambda: T0)
    try:
        assert isinstance(store, SqliteStore)
        assert store.path == tmp_path / "data" / "state.sqlite3" == store_path(config)
        assert store.synchronous == "normal"
    finally:
        await store.close()
    full = _with_service(demo_config, tmp_path, store_synchronous="full")
    store = open_store(full, {}, clock=lambda: T0)
    try:
        assert isinstance(store, SqliteStore)
        (mode,) = sqlite3.connect(store.path).execute("PRAGMA journal_mode").fetchone()
        assert (store.synchronous, mode) == ("full", "wal")
    finally:
        await store.close()


async def test_the_memory_store_by_name_warns_that_a_restart_forgets(
    demo_config: BrokerConfig, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = _with_service(demo_config, tmp_path, store="memory")
    store = open_store(config, {"REDIS_URL": "redis://127.0.0.1:1/0"}, clock=lambda: T0)
    assert type(store) is MemoryStore
    with caplog.at_level(logging.WARNING, logger="broker.state"):
        await warn_about_store(store)
    assert "a restart forgets them" in caplog.text
    assert not (tmp_path / "data" / "state.sqlite3").exists()


def test_redis_by_name_needs_a_url(demo_config: BrokerConfig, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        open_store(_with_service(demo_config, tmp_path, store="redis"), {}, clock=lambda: T0)
    assert refused.value.problems[0][0] == "service.store"


def test_the_store_settings_are_checked_with_their_key_paths(demo_config: BrokerConfig) -> None:
    from broker.config import parse_config
    from tests.fakes import demo_raw

    raw = demo_raw()
    raw["service"].update(store="sqlite3", store_synchronous="extra")
    with pytest.raises(ConfigError) as refused:
        parse_config(raw)
    paths = {path for path, _ in refused.value.problems}
    assert {"service.store", "service.store_synchronous"} <= paths


async def test_the_database_size_is_a_metric(broker: tuple[str, object]) -> None:
    async with httpx.AsyncClient(base_url=broker[0], timeout=10) as http:
        text = (await http.get("/metrics")).text
    (line,) = [line for line in text.splitlines() if line.startswith("broker_store_bytes ")]
    assert float(line.split()[1]) > 0


async def test_claims_the_memory_sweep_forgets_leave_the_file_with_them(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    # The file's own sweep runs on the store's clock, kept before any expiry here, so only the
    # memory store's sweep (paced by admissions, on their ``now``) can forget these claims.
    store = SqliteStore(path, clock=lambda: T0)
    try:
        for key in ("a", "b"):
            ticket = (await admitted(store, Admission(tenant="acme", claim=claim(key)), T0)).ticket
            await store.settle(
                ticket, Settlement.SUCCEEDED, response=OK, record=record(key), ttl_s=60, now=T0
            )
        later = T0 + 120
        await asyncio.gather(
            *(
                store.admit(Admission(tenant="acme", claim=None), now=later, dry_run=True)
                for _ in range(_MEMORY_SWEEP_EVERY)
            )
        )
        await admitted(store, Admission(tenant="acme", claim=claim("a")), later)
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT key, state FROM idem ORDER BY id").fetchall()
    assert rows == [("a", "p")]  # one row per key, none left behind by the forgotten claims
    store = SqliteStore(path, clock=lambda: T0)
    try:  # numbering goes on after a restart: a new claim takes no existing row
        await admitted(store, Admission(tenant="acme", claim=claim("c")), T0)
        assert await store.lookup(claim("a"), now=later + 1) == Conflict("in_progress", 4.0)
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT key, state FROM idem ORDER BY id").fetchall()
    assert rows == [("a", "p"), ("c", "p")]


def test_the_log_starts_over_while_commits_keep_coming(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    db = open_database(path, synchronous="normal")
    checkpointer = Checkpointer(path, synchronous="normal", interval_s=0.02)
    commits = 0
    try:
        # Each commit adds a frame: a log never started over would hold them all.
        while commits < 3 * WAL_RESTART_FRAMES:
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT OR REPLACE INTO catalog VALUES (1, ?)", (commits,))
            db.execute("COMMIT")
            commits += 1
        wal = Path(f"{path}-wal").stat().st_size
    finally:
        checkpointer.stop()
        db.close()
    frame = 4096 + 24  # one page and its header
    # About WAL_RESTART_FRAMES: the writer's catch-up is skipped while the Checkpointer runs
    # one, and retried at the next commits.
    assert wal < 2 * WAL_RESTART_FRAMES * frame


async def test_answers_that_take_nothing_write_nothing(tmp_path: Path) -> None:
    # Replays, refusals, dry runs and look-ups are most of a retrying agent's traffic: none of
    # them changes the file (another connection's PRAGMA data_version moves on every commit).
    path = tmp_path / "state.sqlite3"
    store = SqliteStore(path, clock=lambda: T0)
    done = await admitted(store, Admission(tenant="acme", claim=claim("k"), charges=(CHARGE,)), T0)
    await store.settle(
        done.ticket, Settlement.SUCCEEDED, response=OK, record=record("prp_1"), ttl_s=600, now=T0
    )
    watcher = sqlite3.connect(path)
    before = watcher.execute("PRAGMA data_version").fetchone()
    replay = await store.admit(
        Admission(tenant="acme", claim=claim("k")), now=T0 + 1, dry_run=False
    )
    looked = await store.lookup(claim("k"), now=T0 + 1)
    dry = await store.admit(
        Admission(tenant="acme", claim=claim("other"), charges=(CHARGE,)), now=T0 + 1, dry_run=True
    )
    over = BudgetCharge(name="credits", scope="tenant:acme", amount=90, limit=100, window_s=86_400)
    limited = await store.admit(
        Admission(tenant="acme", claim=claim("big"), charges=(over,)), now=T0 + 1, dry_run=False
    )
    assert isinstance(replay, Replay) and isinstance(looked, Replay)
    assert isinstance(dry, Admitted) and isinstance(limited, Limited)
    assert watcher.execute("PRAGMA data_version").fetchone() == before
    watcher.close()
    await store.close()
