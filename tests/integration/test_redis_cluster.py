"""RedisStore on a real 3-master Redis Cluster: every script lands on one slot, on any node.

The cluster is started here on free loopback ports (no persistence, files in a temp dir) and
stopped afterwards; when it cannot be started (no redis-server/redis-cli, ports, timeouts) the
tests are skipped with the reason.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import cast

import pytest
from redis import Redis as SyncRedis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.crc import key_slot

from broker.stores import (
    Admission,
    Admitted,
    BudgetCharge,
    ClaimRequest,
    Conflict,
    DecisionRecord,
    Limited,
    RateHit,
    Replay,
    Settlement,
    StoredResponse,
)
from broker.stores.redis import RedisStore, check_redis_safety
from tests.ports import CLUSTER_BUS_OFFSET, free_port

pytestmark = pytest.mark.redis

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
REDIS_CLI = shutil.which("redis-cli") or "/usr/bin/redis-cli"
T0 = 1_700_006_400.0


def approx(expected: float) -> float:
    """``pytest.approx``, typed as the float it stands in for."""
    return cast(float, pytest.approx(expected))


def _free_cluster_port() -> int:
    """A loopback port P with P + 10000 (the cluster bus) free as well."""
    for _ in range(200):
        port = free_port()
        if port + CLUSTER_BUS_OFFSET > 65535:
            continue
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + CLUSTER_BUS_OFFSET))
        except OSError:
            continue
        return port
    raise OSError("no free port pair for a cluster node")


def _wait_ping(port: int, deadline: float) -> None:
    while True:
        try:
            with SyncRedis(port=port, socket_timeout=0.5, socket_connect_timeout=0.5) as r:
                r.ping()
                return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _cluster_ok(ports: list[int]) -> bool:
    for port in ports:
        with SyncRedis(port=port, socket_timeout=0.5) as r:
            info = r.cluster("INFO")  # parsed: {"cluster_state": "ok", ...}
            state = info.get("cluster_state", info.get(b"cluster_state"))
            if state not in ("ok", b"ok"):
                return False
    return True


@pytest.fixture(scope="module")
def cluster_ports(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[int]]:
    if not (Path(REDIS_SERVER).exists() and Path(REDIS_CLI).exists()):
        pytest.skip(f"cannot start a Redis Cluster: {REDIS_SERVER} or {REDIS_CLI} missing")
    work = tmp_path_factory.mktemp("redis-cluster")
    procs: list[subprocess.Popen[bytes]] = []
    ports: list[int] = []
    try:
        deadline = time.monotonic() + 12
        for _ in range(3):
            port = _free_cluster_port()
            ports.append(port)
            # fmt: off
            procs.append(subprocess.Popen(
                [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1",
                 "--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{port}.conf",
                 "--cluster-node-timeout", "2000", "--dir", str(work),
                 "--save", "", "--appendonly", "no", "--daemonize", "no",
                 "--logfile", str(work / f"{port}.log")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            ))
            # fmt: on
        for port in ports:
            _wait_ping(port, deadline)
        created = subprocess.run(
            [
                REDIS_CLI,
                "--cluster",
                "create",
                *(f"127.0.0.1:{p}" for p in ports),
                "--cluster-replicas",
                "0",
                "--cluster-yes",
            ],
            capture_output=True,
            timeout=max(deadline - time.monotonic(), 1),
            check=False,
        )
        if created.returncode != 0:
            raise RuntimeError(created.stdout.decode()[-500:] + created.stderr.decode()[-500:])
        while not _cluster_ok(ports):
            if time.monotonic() > deadline:
                raise TimeoutError("cluster_state never became ok")
            time.sleep(0.05)
    except Exception as exc:
        for proc in procs:
            proc.kill()
            proc.wait(timeout=5)
        pytest.skip(f"cannot start a Redis Cluster: {type(exc).__name__}: {exc}")
    try:
        yield ports
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


@pytest.fixture
async def cluster(cluster_ports: list[int]) -> AsyncIterator[RedisCluster]:
    client = RedisCluster(
        host="127.0.0.1",
        port=cluster_ports[0],
        socket_timeout=2,
        socket_connect_timeout=2,
        retry=Retry(NoBackoff(), 0),
    )
    await client.initialize()
    try:
        yield client
    finally:
        await client.aclose()


def _tenants_on_every_node(client: RedisCluster, store: RedisStore) -> list[str]:
    """Tenants whose slots are served by three different masters."""
    by_node: dict[str, str] = {}
    for i in range(500):
        tenant = f"tenant{i}"
        key = store.keys.idem(
            ClaimRequest(
                tenant=tenant, route="r", key="k", fingerprint="f", lease_s=1, idempotent=True
            )
        )
        node = client.get_node_from_key(key)
        assert node is not None
        by_node.setdefault(node.name, tenant)
        if len(by_node) == 3:
            break
    assert len(by_node) == 3, by_node
    return list(by_node.values())


async def test_admit_settle_replay_and_budgets_on_every_node(cluster: RedisCluster) -> None:
    store = RedisStore(cluster, prefix="cluster-test")
    tenants = _tenants_on_every_node(cluster, store)
    ok = StoredResponse(200, b'{"ok":true}')
    for tenant in tenants:
        claim = ClaimRequest(
            tenant=tenant,
            route="billing",
            key="key-0001",
            fingerprint="fp",
            lease_s=30,
            idempotent=False,
        )
        charge = BudgetCharge(
            name="credits", scope=f"tenant:{tenant}", amount=6, limit=10, window_s=3600
        )
        hit = RateHit(name="calls", scope=f"tenant:{tenant}", limit=5, window_s=60)
        admission = Admission(tenant=tenant, claim=claim, charges=(charge,), hits=(hit,))

        first = await store.admit(admission, now=T0, dry_run=False)
        assert isinstance(first, Admitted)
        assert await store.admit(admission, now=T0 + 1, dry_run=False) == Conflict(
            "in_progress", approx(29.0)
        )
        more = Admission(tenant=tenant, claim=None, charges=(charge,))
        assert await store.admit(more, now=T0 + 2, dry_run=False) == Limited(
            "budget", "credits", approx(3598.0)
        )
        record = DecisionRecord(
            proposal_id=f"prp_{tenant}", tenant=tenant, route="billing", response=ok
        )
        assert await store.settle(
            first.ticket, Settlement.SUCCEEDED, response=ok, record=record, ttl_s=600, now=T0 + 3
        )
        assert await store.admit(admission, now=T0 + 4, dry_run=False) == Replay(ok)
        assert await store.lookup(claim, now=T0 + 4) == Replay(ok)
        assert await store.load_decision(f"prp_{tenant}") == record

        # a definite failure refunds, on whichever node holds the tenant
        again = await store.admit(
            Admission(tenant=tenant, claim=None, charges=(charge,)), now=T0 + 5, dry_run=False
        )
        assert isinstance(again, Limited)
        small = BudgetCharge(
            name="credits", scope=f"tenant:{tenant}", amount=4, limit=10, window_s=3600
        )
        taken = await store.admit(
            Admission(tenant=tenant, claim=None, charges=(small,)), now=T0 + 5, dry_run=False
        )
        assert isinstance(taken, Admitted)
        assert await store.settle(
            taken.ticket,
            Settlement.DEFINITE_FAILURE,
            response=ok,
            record=record,
            ttl_s=600,
            now=T0 + 6,
        )
        assert isinstance(
            await store.admit(
                Admission(tenant=tenant, claim=None, charges=(small,)), now=T0 + 7, dry_run=True
            ),
            Admitted,
        )

    # the scripts reload themselves on a node that forgot them (NOSCRIPT)
    assert await cluster.script_flush()  # sent to every primary
    assert await store.lookup(
        ClaimRequest(
            tenant=tenants[0],
            route="billing",
            key="key-0001",
            fingerprint="fp",
            lease_s=30,
            idempotent=False,
        ),
        now=T0 + 8,
    ) == Replay(ok)
    await store.ping()

    # concurrency on one tenant, through the cluster client
    tight = BudgetCharge(name="tight", scope="x", amount=1, limit=10, window_s=3600)
    results = await asyncio.gather(
        *(
            store.admit(
                Admission(tenant=tenants[1], claim=None, charges=(tight,)),
                now=T0 + 9,
                dry_run=False,
            )
            for _ in range(60)
        )
    )
    assert sum(isinstance(r, Admitted) for r in results) == 10


async def test_every_key_of_a_tenant_shares_its_slot(cluster: RedisCluster) -> None:
    store = RedisStore(cluster, prefix="cluster-slots")
    tenant = "acme"
    claim = ClaimRequest(
        tenant=tenant, route="r", key="k-1", fingerprint="f", lease_s=5, idempotent=True
    )
    charge = BudgetCharge(name="b", scope="s", amount=1, limit=5, window_s=60)
    hit = RateHit(name="h", scope="s", limit=5, window_s=60)
    first = await store.admit(
        Admission(tenant=tenant, claim=claim, charges=(charge,), hits=(hit,)),
        now=T0,
        dry_run=False,
    )
    assert isinstance(first, Admitted)
    node = cluster.get_node_from_key(store.keys.idem(claim))
    assert node is not None
    keys = [k async for k in cluster.scan_iter(match="cluster-slots:*", target_nodes=[node])]
    assert len(keys) == 3
    assert {key_slot(k) for k in keys} == {key_slot(store.keys.idem(claim).encode())}


async def test_safety_check_reports_every_node(cluster: RedisCluster) -> None:
    warnings = await check_redis_safety(cluster)
    assert len([w for w in warnings if "no persistence" in w]) == 3
    assert not [w for w in warnings if "maxmemory-policy" in w]


async def test_from_url_builds_a_cluster_store(cluster_ports: list[int]) -> None:
    store = RedisStore.from_url(
        f"redis://127.0.0.1:{cluster_ports[1]}", prefix="cluster-url", cluster=True
    )
    try:
        await store.ping()
        claim = ClaimRequest(
            tenant="globex", route="r", key="k-1", fingerprint="f", lease_s=5, idempotent=True
        )
        first = await store.admit(Admission(tenant="globex", claim=claim), now=T0, dry_run=False)
        assert isinstance(first, Admitted)
        assert await store.lookup(claim, now=T0 + 1) == Conflict("in_progress", approx(4.0))
    finally:
        await store.close()
