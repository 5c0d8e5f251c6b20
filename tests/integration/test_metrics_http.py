"""/metrics after a scripted mix of proposals: exact counts by category and code, bounded labels,
and totals that add up across worker processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families
from redis import Redis

from tests.conftest import (
    BILLING,
    DEMO_CONFIG,
    GLOBEX,
    REDIS_URL,
    SCHEDULING,
    credit,
    free_port,
    ticket,
)


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                found[tuple(sorted(sample.labels.items()))] = sample.value
    return found


def count(text: str, name: str, **labels: str) -> float:
    return sum(
        value
        for key, value in samples(text, name).items()
        if all(dict(key).get(k) == v for k, v in labels.items())
    )


async def test_a_scripted_mix_is_counted_exactly_by_category_and_code(
    client: httpx.AsyncClient,
) -> None:
    post = client.post
    await post("/v1/proposals", json=credit(), headers=BILLING)  # approved, executed
    await post("/v1/proposals", json=credit(), headers=BILLING)  # replayed
    await post("/v1/proposals", json=credit(amount=30), headers=BILLING)  # key reused
    await post("/v1/proposals", json=ticket("C-20001"), headers=BILLING)  # precondition
    await post("/v1/proposals", json=credit("k2", amount=5000), headers=BILLING)  # schema
    await post("/v1/proposals", json={"tool": "nope", "args": {}}, headers=BILLING)  # unknown
    await post("/v1/proposals", json=credit("k3"), headers=SCHEDULING)  # not allowed
    await post("/v1/proposals", json={**credit("k4"), "dry_run": True}, headers=BILLING)

    text = (await client.get("/metrics")).text
    total = "broker_proposals_total"
    assert count(text, total) == 8
    assert count(text, total, decision="approved") == 2  # the executed one and the dry run
    assert count(text, total, decision="replayed") == 1
    expected = {
        ("IDEMPOTENCY", "idempotency_key_reused"): 1,
        ("PRECONDITION", "precondition_failed"): 1,
        ("SCHEMA", "schema_invalid"): 1,
        ("SCHEMA", "unknown_tool"): 1,
        ("AUTHZ", "tool_not_allowed"): 1,
    }
    for (category, code), n in expected.items():
        assert count(text, total, decision="rejected", category=category, code=code) == n
    # Label values stay bounded: an unregistered tool name is never a label.
    assert count(text, total, tool="_unknown", code="unknown_tool") == 1
    assert "nope" not in text
    assert count(text, "broker_executions_total", tool="issue_credit", status="succeeded") == 1
    assert count(text, "broker_idempotency_replays_total", tool="issue_credit") == 1
    assert count(text, "broker_idempotency_conflicts_total", code="idempotency_key_reused") == 1
    assert count(text, "broker_budget_consumed_total", budget="credits_per_day") == 25
    assert count(text, "broker_decision_duration_seconds_count") == 8
    assert count(text, "broker_execution_duration_seconds_count", tool="issue_credit") == 1


def _write_config(tmp_path: Path, prefix: str) -> Path:
    demo = DEMO_CONFIG.read_text().replace('ledger_path = "var/ledger.jsonl"\n', "")
    text = demo.replace(
        "[service]\n",
        f'[service]\nredis_url = "{REDIS_URL}"\nkey_prefix = "{prefix}"\n'
        "allow_volatile_redis = true\n"  # this machine's Redis keeps nothing on disk
        f'ledger_path = "{tmp_path}/ledger.jsonl"\nledger_key_path = "{tmp_path}/key.pem"\n',
        1,
    )
    path = tmp_path / "broker.toml"
    path.write_text(text)
    return path


async def test_two_worker_processes_add_up(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics")}
    (tmp_path / "metrics").mkdir()
    prefix = f"test-metrics-{uuid.uuid4().hex[:8]}"
    config = _write_config(tmp_path, prefix)
    command = [sys.executable, "-m", "broker", "serve", "--config", str(config)]
    server = subprocess.Popen(
        [*command, "--port", str(port), "--workers", "2"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:
            deadline = time.monotonic() + 30
            while True:
                try:
                    if (await client.get("/livez")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, "the broker did not start"
                time.sleep(0.1)
            lookup = {"tool": "lookup_order", "args": {"order_id": "O-55291"}}
            pids = set()
            for _ in range(40):
                # A fresh connection each time, so the kernel spreads them over both workers.
                async with httpx.AsyncClient(base_url=client.base_url) as fresh:
                    response = await fresh.post("/v1/proposals", json=lookup, headers=BILLING)
                    assert response.status_code == 200
            text = (await client.get("/metrics")).text
            assert count(text, "broker_proposals_total", tool="lookup_order") == 40
            assert count(text, "broker_executions_total", tool="lookup_order") == 40
            # The answering worker's own guards and load are there beside the aggregates.
            assert 'broker_backend_circuit_state{backend="python:demo"} 0.0' in text
            assert "broker_proposals_in_flight " in text
            pids = {f.name for f in (tmp_path / "metrics").iterdir()}
            assert len({name.rsplit("_", 1)[-1] for name in pids}) >= 2, pids
    finally:
        server.terminate()
        server.wait(timeout=15)
        redis = Redis.from_url(REDIS_URL)
        keys = list(redis.scan_iter(match=f"{prefix}:*"))
        if keys:
            redis.delete(*keys)


async def test_a_tenant_label_appears_only_when_the_config_enables_it(
    make_broker,
    demo_config,  # type: ignore[no-untyped-def]
) -> None:
    import msgspec

    service = msgspec.structs.replace(demo_config.service, metrics_tenant_label=True)
    url, _ = make_broker(msgspec.structs.replace(demo_config, service=service))
    async with httpx.AsyncClient(base_url=url) as client:
        await client.post("/v1/proposals", json=credit(), headers=BILLING)
        await client.post("/v1/proposals", json=credit("g1", order="O-80001"), headers=GLOBEX)
        text = (await client.get("/metrics")).text
    assert count(text, "broker_proposals_total", tenant="acme") == 1
    assert count(text, "broker_proposals_total", tenant="globex") == 1
    assert count(text, "broker_executions_total", tenant="acme", status="succeeded") == 1


async def test_no_tenant_label_by_default(client: httpx.AsyncClient) -> None:
    await client.post("/v1/proposals", json=credit(), headers=BILLING)
    text = (await client.get("/metrics")).text
    assert 'tenant="' not in text


async def test_budget_remaining_follows_each_charge(client: httpx.AsyncClient) -> None:
    await client.post("/v1/proposals", json=credit("r1", amount=25), headers=BILLING)
    await client.post("/v1/proposals", json=credit("r2", amount=100), headers=BILLING)
    text = (await client.get("/metrics")).text
    assert count(text, "broker_budget_remaining", budget="credits_per_day") == 375
