"""RedisStore against a private redis-server that this test stops, fills, pauses and reconfigures.

Every fault must surface as StoreUnavailableError (fail closed), quickly, without partial state,
and the same store instance must recover once Redis is back.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import cast

import pytest
from redis import Redis as SyncRedis
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import OutOfMemoryError

from broker.stores import (
    Admission,
    Admitted,
    BudgetCharge,
    ClaimRequest,
    Conflict,
    DecisionRecord,
    RateHit,
    Replay,
    Settlement,
    StoredResponse,
)
from broker.stores.redis import RedisStore, check_redis_safety
from broker.taxonomy import StoreUnavailableError
from tests.ports import free_port

pytestmark = pytest.mark.redis

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
OK = StoredResponse(200, b'{"ok":true}')


def approx(expected: float) -> float:
    """``pytest.approx``, typed as the float it stands in for."""
    return cast(float, pytest.approx(expected))


class PrivateRedis:
    """One redis-server process on a fixed loopback port, restartable on that port."""

    def __init__(self, workdir: Path, *extra: str) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}"
        self.workdir = workdir
        self.extra = extra
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        # fmt: off
        self.proc = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", str(self.workdir),
             "--daemonize", "no", "--logfile", str(self.workdir / "redis.log"), *self.extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        # fmt: on
        deadline = time.monotonic() + 5
        while True:
            try:
                with SyncRedis(port=self.port, socket_timeout=0.5, socket_connect_timeout=0.5) as r:
                    r.ping()
                return
            except Exception:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise
                time.sleep(0.02)

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
        self.proc = None


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    if not Path(REDIS_SERVER).exists():
        pytest.skip(f"{REDIS_SERVER} is missing")
    server = PrivateRedis(tmp_path)
    try:
        server.start()
    except Exception as exc:
        pytest.skip(f"cannot start a private redis-server: {type(exc).__name__}: {exc}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def admin(private_redis: PrivateRedis) -> AsyncIterator[Redis]:
    client = Redis.from_url(private_redis.url, socket_timeout=5)
    try:
        yield client
    finally:
        await client.aclose()


def _claim(key: str = "key-0001") -> ClaimRequest:
    return ClaimRequest(
        tenant="acme",
        route="billing",
        key=key,
        fingerprint="fp",
        lease_s=30,
        idempotent=False,
    )


def _admission(key: str = "key-0001") -> Admission:
    return Admission(
        tenant="acme",
        claim=_claim(key),
        charges=(BudgetCharge(name="credits", scope="t", amount=4, limit=10, window_s=3600),),
        hits=(RateHit(name="calls", scope="t", limit=5, window_s=60),),
    )


def _record(pid: str = "prp_1") -> DecisionRecord:
    return DecisionRecord(proposal_id=pid, tenant="acme", route="billing", response=OK)


async def test_stopped_redis_fails_fast_and_the_same_store_recovers(
    private_redis: PrivateRedis,
) -> None:
    store = RedisStore.from_url(private_redis.url, prefix="faults", socket_timeout=0.5)
    try:
        now = time.time()
        first = await store.admit(_admission("before"), now=now, dry_run=False)
        assert isinstance(first, Admitted)

        private_redis.stop()
        for call in (
            lambda: store.admit(_admission("during"), now=now, dry_run=False),
            lambda: store.lookup(_claim("before"), now=now),
            lambda: store.settle(
                first.ticket,
                Settlement.SUCCEEDED,
                response=OK,
                record=_record(),
                ttl_s=60,
                now=now,
            ),
            lambda: store.load_decision("prp_1"),
            store.ping,
        ):
            started = time.monotonic()
            with pytest.raises(StoreUnavailableError) as caught:
                await call()
            assert time.monotonic() - started < 0.6  # within one socket timeout, no retries
            assert caught.value.__cause__ is not None

        private_redis.start()  # empty: no data, no script cache (NOSCRIPT is handled)
        await store.ping()
        again = await store.admit(_admission("after"), now=now + 1, dry_run=False)
        assert isinstance(again, Admitted)
        assert await store.lookup(_claim("after"), now=now + 2) == Conflict(
            "in_progress", approx(29.0)
        )
    finally:
        await store.close()


async def test_out_of_memory_refuses_writes_but_serves_reads(
    private_redis: PrivateRedis, admin: Redis
) -> None:
    store = RedisStore.from_url(private_redis.url, prefix="faults", socket_timeout=2)
    try:
        now = time.time()
        done = await store.admit(_admission("done"), now=now, dry_run=False)
        assert isinstance(done, Admitted)
        assert await store.settle(
            done.ticket, Settlement.SUCCEEDED, response=OK, record=_record(), ttl_s=600, now=now
        )
        await admin.config_set("maxmemory-policy", "noeviction")
        await admin.config_set("maxmemory", "1mb")
        filler = b"x" * 64_000
        for i in range(200):
            try:
                await admin.set(f"filler:{i}", filler)
            except OutOfMemoryError:
                break
        else:
            pytest.fail("Redis never reported OOM")
        keys_before = sorted(await admin.keys("faults:*"))

        with pytest.raises(StoreUnavailableError, match=r"OOM|OutOfMemory"):
            await store.admit(_admission("new"), now=now + 1, dry_run=False)
        with pytest.raises(StoreUnavailableError):
            await store.save_decision(_record("prp_2"), ttl_s=60)
        assert sorted(await admin.keys("faults:*")) == keys_before  # nothing half-written

        # reads still answer: lookup, a replay through admit, a dry run, the decision record
        assert await store.lookup(_claim("done"), now=now + 1) == Replay(OK)
        assert await store.admit(_admission("done"), now=now + 1, dry_run=False) == Replay(OK)
        assert isinstance(await store.admit(_admission("new"), now=now + 1, dry_run=True), Admitted)
        assert await store.load_decision("prp_1") == _record()
    finally:
        await admin.config_set("maxmemory", "0")
        await store.close()


async def test_paused_writes_time_out_without_partial_state(
    private_redis: PrivateRedis, admin: Redis
) -> None:
    store = RedisStore.from_url(private_redis.url, prefix="faults", socket_timeout=0.3)
    try:
        await store.ping()
        now = time.time()
        await admin.client_pause(2000, all=False)  # CLIENT PAUSE 2000 WRITE
        paused_at = time.monotonic()
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError, match="Timeout"):
            await store.admit(_admission(), now=now, dry_run=False)
        assert time.monotonic() - started < 0.8

        await asyncio.sleep(max(0.0, 2.3 - (time.monotonic() - paused_at)))  # the pause is over
        assert await admin.keys("faults:*") == []  # the timed-out script never ran later
        # and everything is still available: full budget, free key
        charge = BudgetCharge(name="credits", scope="t", amount=10, limit=10, window_s=3600)
        full = Admission(tenant="acme", claim=_claim(), charges=(charge,))
        assert isinstance(await store.admit(full, now=now + 1, dry_run=False), Admitted)
    finally:
        await store.close()


async def test_safety_check_warns_about_persistence_and_eviction(
    private_redis: PrivateRedis, admin: Redis
) -> None:
    warnings = await check_redis_safety(admin)  # started with --save "" --appendonly no
    assert len(warnings) == 1
    assert "no persistence" in warnings[0]

    await admin.config_set("maxmemory-policy", "allkeys-lru")
    warnings = await check_redis_safety(admin)
    assert len(warnings) == 2
    assert any("allkeys-lru" in w and "noeviction" in w for w in warnings)

    await admin.config_set("maxmemory-policy", "noeviction")
    await admin.config_set("appendonly", "yes")
    assert await check_redis_safety(admin) == []

    await admin.config_set("appendonly", "no")
    await admin.config_set("save", "3600 1")
    assert await check_redis_safety(admin) == []


async def test_safety_check_tolerates_a_disabled_config_command(tmp_path: Path) -> None:
    if not Path(REDIS_SERVER).exists():
        pytest.skip(f"{REDIS_SERVER} is missing")
    server = PrivateRedis(tmp_path, "--rename-command", "CONFIG", "")
    try:
        server.start()
    except Exception as exc:
        pytest.skip(f"cannot start a private redis-server: {type(exc).__name__}: {exc}")
    client = Redis.from_url(server.url)
    try:
        warnings = await check_redis_safety(client)
        assert len(warnings) == 1
        assert "unchecked" in warnings[0]
    finally:
        await client.aclose()
        server.stop()


async def test_safety_check_on_an_unreachable_redis_is_unavailable() -> None:
    client = Redis(port=free_port(), socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0))
    try:
        with pytest.raises(StoreUnavailableError):
            await check_redis_safety(client)
    finally:
        await client.aclose()


async def test_settle_reloads_its_script_after_redis_forgot_it(
    private_redis: PrivateRedis, admin: Redis
) -> None:
    """A restarted (or failed-over) Redis has no scripts: the pipelined settle notices NOSCRIPT
    and settles anyway, and the decision record is stored."""
    store = RedisStore.from_url(private_redis.url, prefix="noscript", socket_timeout=0.5)
    try:
        now = time.time()
        admitted = await store.admit(_admission("reload"), now=now, dry_run=False)
        assert isinstance(admitted, Admitted)
        await admin.script_flush()
        settled = await store.settle(
            admitted.ticket,
            Settlement.SUCCEEDED,
            response=OK,
            record=_record("prp_reload"),
            ttl_s=3600,
            now=now,
        )
        assert settled is True
        assert await store.lookup(_claim("reload"), now=now) == Replay(OK)
        assert await store.load_decision("prp_reload") == _record("prp_reload")
    finally:
        await store.close()


async def test_admit_and_lookup_reload_their_scripts_after_redis_forgot_them(
    private_redis: PrivateRedis, admin: Redis
) -> None:
    """NOSCRIPT means the script did not run: each one goes again once as EVAL (which caches
    it), on either path, and from then on EVALSHA answers."""
    store = RedisStore.from_url(private_redis.url, prefix="noscript", socket_timeout=0.5)
    try:
        now = time.time()
        assert isinstance(await store.admit(_admission("one"), now=now, dry_run=False), Admitted)
        await admin.script_flush()
        await admin.config_resetstat()
        assert await store.lookup(_claim("one"), now=now) == Conflict("in_progress", approx(30.0))
        assert isinstance(await store.admit(_admission("two"), now=now, dry_run=False), Admitted)
        assert await store.lookup(_claim("two"), now=now) == Conflict("in_progress", approx(30.0))
        stats = await admin.info("commandstats")
        assert stats["cmdstat_eval"]["calls"] == 2  # lookup and admit, once each
        assert "cmdstat_script|load" not in stats
        evalsha = stats["cmdstat_evalsha"]
        assert evalsha["calls"] - evalsha.get("failed_calls", 0) == 1  # the last lookup
    finally:
        await store.close()
