"""``[[policy.rules]]`` over real HTTP: the demo's ``guarded_billing`` rules and each rule kind and
action, on the memory, SQLite and Redis stores, judged by the answers, the demo backend's effects
and the ledger read back."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from adapters.demo import DemoBackend
from broker.config import BrokerConfig
from broker.config.loading import parse_config
from broker.plugins import Backend
from tests.conftest import ADMIN, BILLING, REDIS_URL, with_private_ledger
from tests.fakes import assert_problem, demo_raw, serve
from tests.redis_helpers import missing_redis

GUARDED = {"Authorization": "Bearer demo-guarded-token"}
PROPOSALS = "/v1/proposals"
STORES = ("memory", "sqlite", "redis")
LOOKUP_FIRST_REMEDIATION = (
    "REPAIR: call lookup_order with this order_id first, then propose the credit again"
)


def lookup(session: str | None, order: str = "O-55291") -> dict[str, Any]:
    body: dict[str, Any] = {"tool": "lookup_order", "args": {"order_id": order}}
    if session is not None:
        body["session_id"] = session
    return body


def credit(session: str | None, key: str, amount: float = 25, order: str = "O-55291") -> dict:
    body: dict[str, Any] = {
        "tool": "issue_credit",
        "args": {"order_id": order, "amount": amount, "currency": "USD"},
        "preconditions": ["order_paid", "within_return_window"],
        "idempotency_key": key,
    }
    if session is not None:
        body["session_id"] = session
    return body


def session() -> str:
    return f"s-{uuid.uuid4().hex[:12]}"


def with_store(config: BrokerConfig, kind: str, directory: Path) -> BrokerConfig:
    changes: dict[str, Any] = {"store": kind}
    if kind == "redis":
        changes.update(redis_url=REDIS_URL, key_prefix=f"ptest-{uuid.uuid4().hex[:10]}")
    elif kind == "sqlite":
        changes["store_path"] = str(directory / "state.sqlite3")
    service = msgspec.structs.replace(config.service, **changes)
    return msgspec.structs.replace(config, service=service)


Started = tuple[str, DemoBackend, Path]


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Started]]:
    """Serve a config (the demo's by default) over real HTTP on the given store."""
    stack: list[Any] = []
    prefixes: list[str] = []

    def run(raw: dict[str, Any] | None = None, *, store: str = "memory") -> Started:
        if store == "redis":
            import redis

            try:
                redis.Redis.from_url(REDIS_URL).ping()
            except redis.RedisError:
                missing_redis(f"no Redis at {REDIS_URL}")
        directory = tmp_path / f"b{len(stack)}"
        directory.mkdir()
        config = with_store(parse_config(raw or demo_raw()), store, directory)
        config = with_private_ledger(config, directory)
        if store == "redis":
            prefixes.append(config.service.key_prefix)
        demo = DemoBackend()
        backends: Mapping[str, Backend] = {"demo": demo}
        from broker.app import create_app

        app = create_app(
            config,
            backends=backends,
            secrets={"BROKER_TOKEN_SIGNING_KEY": "test-signing-key-0123456789abcdef"},
        )
        context = serve(app)
        url = context.__enter__()
        stack.append(context)
        return url, demo, directory / "ledger.jsonl"

    yield run
    for context in reversed(stack):
        context.__exit__(None, None, None)
    if prefixes:
        import redis

        client = redis.Redis.from_url(REDIS_URL)
        for prefix in prefixes:  # only the keys these brokers wrote
            for key in client.scan_iter(match=f"{prefix}:*", count=500):
                client.delete(key)


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=10) as client:
        yield client


def ledger_records(path: Path) -> list[dict[str, Any]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def refused_by(response: httpx.Response, rule: str) -> dict[str, Any]:
    body = assert_problem(response, 409, "policy_blocked", "PRECONDITION")
    assert body["failed_check"] == {"kind": "policy", "name": rule}, body
    return body


# -- the demo route ---------------------------------------------------------------------------


@pytest.mark.parametrize("store", STORES)
async def test_loop_guard_blocks_the_fourth_identical_call_in_a_session(
    start: Callable[..., Started], http: httpx.AsyncClient, store: str
) -> None:
    url, _, ledger = start(store=store)
    one = session()
    answers = [
        await http.post(url + PROPOSALS, json=lookup(one), headers=GUARDED) for _ in range(4)
    ]
    assert [a.status_code for a in answers[:3]] == [200, 200, 200], answers[-1].text
    body = refused_by(answers[3], "demo.loop_guard")
    assert body["remediation"].startswith("STOP: this exact call was already made 3 times")
    assert answers[3].headers.get("retry-after")
    # other args, or another session, are other loops
    other_args = await http.post(url + PROPOSALS, json=lookup(one, "O-60000"), headers=GUARDED)
    other_session = await http.post(url + PROPOSALS, json=lookup(session()), headers=GUARDED)
    assert other_args.status_code == 200, other_args.text
    assert other_session.status_code == 200, other_session.text
    # the ledger names the rule on the refusal, and its chain verifies
    refused = [r for r in ledger_records(ledger) if r.get("code") == "policy_blocked"]
    assert len(refused) == 1
    assert refused[0]["failed_check"] == {"kind": "policy", "name": "demo.loop_guard"}
    assert refused[0]["session_id"] == one
    report = await http.get(url + "/v1/audit/verify", headers=ADMIN)
    assert report.status_code == 200 and report.json()["ok"] is True, report.text


@pytest.mark.parametrize("store", STORES)
async def test_credit_only_after_a_succeeded_lookup_of_the_same_order(
    start: Callable[..., Started], http: httpx.AsyncClient, store: str
) -> None:
    url, demo, _ = start(store=store)
    one = session()
    first = await http.post(url + PROPOSALS, json=credit(one, "k1"), headers=GUARDED)
    body = refused_by(first, "demo.lookup_first")
    assert body["remediation"] == LOOKUP_FIRST_REMEDIATION
    # a lookup of another order, or in another session, does not count
    assert (
        await http.post(url + PROPOSALS, json=lookup(one, "O-60000"), headers=GUARDED)
    ).is_success
    assert (await http.post(url + PROPOSALS, json=lookup(session()), headers=GUARDED)).is_success
    refused_by(
        await http.post(url + PROPOSALS, json=credit(one, "k2"), headers=GUARDED),
        "demo.lookup_first",
    )
    assert demo.credits == []
    # a failed lookup (an order that does not exist) is no witness either
    missing = await http.post(url + PROPOSALS, json=lookup(one, "O-99999"), headers=GUARDED)
    assert missing.status_code != 200
    refused_by(
        await http.post(url + PROPOSALS, json=credit(one, "k3", order="O-99999"), headers=GUARDED),
        "demo.lookup_first",
    )
    assert (await http.post(url + PROPOSALS, json=lookup(one), headers=GUARDED)).is_success
    done = await http.post(url + PROPOSALS, json=credit(one, "k4"), headers=GUARDED)
    assert done.status_code == 200, done.text
    assert len(demo.credits) == 1


async def test_guarded_route_requires_a_session_id_and_other_routes_do_not(
    start: Callable[..., Started], http: httpx.AsyncClient
) -> None:
    url, _, _ = start()
    body = refused_by(
        await http.post(url + PROPOSALS, json=lookup(None), headers=GUARDED), "require_session_id"
    )
    assert "session_id" in body["remediation"]
    # billing_help: as before, no session needed and no loop guard
    for _ in range(5):
        answer = await http.post(url + PROPOSALS, json=lookup(None), headers=BILLING)
        assert answer.status_code == 200, answer.text
    for _ in range(5):
        answer = await http.post(url + PROPOSALS, json=lookup("same"), headers=BILLING)
        assert answer.status_code == 200, answer.text
