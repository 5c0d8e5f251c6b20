"""``POST /v1/resolutions`` over real HTTP: a key of unknown outcome is resolved by an admin or the
tool's backend, replays what they said (or runs again once released), and the ledger says who.

The fake backend's own call log says what ran; the ledger file is read back and verified."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from broker.auth import hash_token
from broker.ledger import JsonlLedgerSink, verify
from broker.plugins import Backend
from tests.fakes import FAKE, FAKE_TOKEN, FakeBackend, SleepRecorder, _tool, fake_tools
from tests.fakes import fake_config as make_config

ADMIN = {"Authorization": "Bearer resolution-admin-token"}
OPS_BACKEND = {"Authorization": "Bearer ops-backend-token"}

MakeBroker = Callable[..., tuple[str, Mapping[str, Backend]]]


def _config() -> Any:
    tools = {**fake_tools(), "ops.hang": _tool("hang", timeout_s=0.2)}
    return make_config(
        tools,
        tokens=[
            {
                "name": "fake-ops",
                "sha256": hash_token(FAKE_TOKEN),
                "service_account": "ops@bots",
                "tenant": "acme",
            },
            {"name": "oncall", "sha256": hash_token("resolution-admin-token"), "admin": True},
            {
                "name": "ops-backend",
                "sha256": hash_token("ops-backend-token"),
                "backend_namespace": "ops",
            },
        ],
    )


@pytest.fixture
def started(make_broker: MakeBroker) -> tuple[str, FakeBackend]:
    fake = FakeBackend()
    url, _ = make_broker(_config(), backends={"fake": fake}, sleep=SleepRecorder())
    return url, fake


def hang(key: str, tool: str = "hang") -> dict[str, Any]:
    return {"tool": tool, "args": {"n": 1}, "idempotency_key": key}


def resolution(key: str, outcome: str, tool: str = "hang", **extra: Any) -> dict[str, Any]:
    return {
        "tenant": "acme",
        "route": "ops",
        "idempotency_key": key,
        "tool": tool,
        "args": {"n": 1},
        "outcome": outcome,
        **extra,
    }


async def unknown_outcome(client: httpx.AsyncClient, body: dict[str, Any]) -> None:
    first = await client.post("/v1/proposals", json=body, headers=FAKE)
    assert first.status_code == 504, first.text
    again = await client.post("/v1/proposals", json=body, headers=FAKE)
    assert again.status_code == 409
    assert again.json()["code"] == "outcome_unknown"


async def unknown_gauge(client: httpx.AsyncClient) -> float:
    text = (await client.get("/metrics")).text
    (line,) = [x for x in text.splitlines() if x.startswith("broker_outcome_unknown_keys ")]
    return float(line.split()[1])


async def resolutions_counted(client: httpx.AsyncClient, outcome: str) -> float:
    text = (await client.get("/metrics")).text
    prefix = f'broker_resolutions_total{{outcome="{outcome}"}} '
    (line,) = [x for x in text.splitlines() if x.startswith(prefix)]
    return float(line.split()[1])


async def ledger_records(tmp_path: Path) -> list[dict[str, Any]]:
    lines = (tmp_path / "ledger.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


async def test_succeeded_replays_the_given_result_and_the_ledger_says_who(
    started: tuple[str, FakeBackend], tmp_path: Path
) -> None:
    url, fake = started
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        await unknown_outcome(client, hang("res-ok"))
        assert await unknown_gauge(client) == 1
        assert await resolutions_counted(client, "succeeded") == 0
        done = await client.post(
            "/v1/resolutions",
            json=resolution("res-ok", "succeeded", result={"credit_id": "cr_9"}),
            headers=ADMIN,
        )
        assert done.status_code == 200, done.text
        answer = done.json()
        assert answer["outcome"] == "succeeded"
        assert answer["resolved_by"] == "admin:oncall"
        assert answer["audit"]["seq"] >= 1
        replay = await client.post("/v1/proposals", json=hang("res-ok"), headers=FAKE)
        assert replay.status_code == 200, replay.text
        assert replay.headers["idempotent-replayed"] == "true"
        assert replay.json()["execution"]["result"] == {"credit_id": "cr_9"}
        assert await unknown_gauge(client) == 0
        again = await client.post(
            "/v1/resolutions", json=resolution("res-ok", "not_executed"), headers=ADMIN
        )
        assert again.status_code == 409  # a known outcome is never resolved again
        assert again.json()["code"] == "precondition_failed"
        assert await resolutions_counted(client, "succeeded") == 1  # the refusal is not counted
        assert await resolutions_counted(client, "not_executed") == 0
    assert fake.count("hang") == 1  # ran once, never again

    (record,) = [r for r in await ledger_records(tmp_path) if r["decision"] == "resolved"]
    assert record["service_account"] == "admin:oncall"
    assert record["tool"] == "hang"
    assert record["tenant"] == "acme"
    assert record["route"] == "ops"
    assert record["result_redacted"] == {"credit_id": "cr_9"}
    assert record["proposal_id"] == answer["resolution_id"]
    assert record["seq"] == answer["audit"]["seq"]
    assert "resolved as succeeded by admin:oncall" in record["reason"]
    sink = JsonlLedgerSink(tmp_path / "ledger.jsonl")
    try:
        assert (await verify(sink)).ok
    finally:
        await sink.close()


async def test_failed_replays_a_provider_error_without_the_backends_text(
    started: tuple[str, FakeBackend],
) -> None:
    url, fake = started
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        await unknown_outcome(client, hang("res-failed"))
        error = {"code": "card_declined", "message": "internal: db row 42 locked"}
        done = await client.post(
            "/v1/resolutions", json=resolution("res-failed", "failed", error=error), headers=ADMIN
        )
        assert done.status_code == 200, done.text
        replay = await client.post("/v1/proposals", json=hang("res-failed"), headers=FAKE)
        body = replay.json()
        assert replay.status_code == 502, replay.text
        assert body["code"] == "provider_error"
        assert body["execution"]["status"] == "failed"
        assert "db row" not in replay.text
    assert fake.count("hang") == 1


async def test_not_executed_releases_the_key_so_a_retry_runs(
    started: tuple[str, FakeBackend],
) -> None:
    url, fake = started
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        await unknown_outcome(client, hang("res-again"))
        done = await client.post(
            "/v1/resolutions", json=resolution("res-again", "not_executed"), headers=ADMIN
        )
        assert done.status_code == 200, done.text
        retry = await client.post("/v1/proposals", json=hang("res-again"), headers=FAKE)
        assert retry.status_code == 504  # it ran again (and hung again)
    assert fake.count("hang") == 2


async def test_the_tools_backend_resolves_its_own_keys_and_nobody_elses(
    started: tuple[str, FakeBackend],
) -> None:
    url, _ = started
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        await unknown_outcome(client, hang("res-ns", tool="ops.hang"))
        await unknown_outcome(client, hang("res-other"))
        theirs = resolution("res-other", "not_executed")
        refused = await client.post("/v1/resolutions", json=theirs, headers=OPS_BACKEND)
        assert refused.status_code == 403
        assert refused.json()["code"] == "forbidden"
        route = await client.post("/v1/resolutions", json=theirs, headers=FAKE)
        assert route.status_code == 403
        # claiming the other key is its tool's does not work either: the fingerprint differs
        disguised = resolution("res-other", "not_executed", tool="ops.hang")
        wrong = await client.post("/v1/resolutions", json=disguised, headers=OPS_BACKEND)
        assert wrong.status_code == 422  # res-other was claimed for hang, not ops.hang
        assert wrong.json()["code"] == "idempotency_key_reused"
        ours = resolution("res-ns", "not_executed", tool="ops.hang")
        done = await client.post("/v1/resolutions", json=ours, headers=OPS_BACKEND)
        assert done.status_code == 200, done.text
        assert done.json()["resolved_by"] == "backend:ops-backend"
        still = await client.post("/v1/proposals", json=hang("res-other"), headers=FAKE)
        assert still.json()["code"] == "outcome_unknown"


@pytest.mark.parametrize(
    ("change", "pointer"),
    [
        ({"outcome": "succeeded"}, "/result"),
        ({"outcome": "not_executed", "result": {"x": 1}}, "/result"),
        ({"outcome": "failed"}, "/error"),
        ({"outcome": "maybe"}, "/outcome"),
        ({"idempotency_key": ""}, "/idempotency_key"),
        ({"surprise": 1}, "/surprise"),
    ],
)
async def test_a_bad_resolution_names_the_field_and_changes_nothing(
    started: tuple[str, FakeBackend], change: dict[str, Any], pointer: str
) -> None:
    url, _ = started
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        await unknown_outcome(client, hang("res-bad"))
        body = {**resolution("res-bad", "not_executed"), **change}
        bad = await client.post("/v1/resolutions", json=body, headers=ADMIN)
        assert bad.status_code == 422, bad.text  # schema_invalid, as for proposals
        assert bad.headers["content-type"].startswith("application/problem+json")
        assert pointer in [e["path"] for e in bad.json()["errors"]]
        still = await client.post("/v1/proposals", json=hang("res-bad"), headers=FAKE)
        assert still.json()["code"] == "outcome_unknown"


async def test_other_args_or_an_unknown_key_are_refused(
    started: tuple[str, FakeBackend],
) -> None:
    url, _ = started
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        await unknown_outcome(client, hang("res-args"))
        other = {**resolution("res-args", "not_executed"), "args": {"n": 2}}
        reused = await client.post("/v1/resolutions", json=other, headers=ADMIN)
        assert reused.status_code == 422
        assert reused.json()["code"] == "idempotency_key_reused"
        missing = resolution("never-used", "not_executed")
        absent = await client.post("/v1/resolutions", json=missing, headers=ADMIN)
        assert absent.status_code == 404
        still = await client.post("/v1/proposals", json=hang("res-args"), headers=FAKE)
        assert still.json()["code"] == "outcome_unknown"
