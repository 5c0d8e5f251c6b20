"""What the policy tests share: proposals, brokers over real HTTP on each store, the ledger read back."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import msgspec

from adapters.demo import DemoBackend
from broker.config import BrokerConfig
from broker.config.loading import parse_config
from broker.plugins import Backend
from tests.conftest import REDIS_URL, with_private_ledger
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


def with_store(
    config: BrokerConfig, kind: str, directory: Path, redis_url: str = REDIS_URL
) -> BrokerConfig:
    changes: dict[str, Any] = {"store": kind}
    if kind == "redis":
        changes.update(redis_url=redis_url, key_prefix=f"ptest-{uuid.uuid4().hex[:10]}")
    elif kind == "sqlite":
        changes["store_path"] = str(directory / "state.sqlite3")
    service = msgspec.structs.replace(config.service, **changes)
    return msgspec.structs.replace(config, service=service)


Started = tuple[str, DemoBackend, Path]


def policy_brokers(tmp_path: Path) -> Iterator[Callable[..., Started]]:
    """The body of a ``start`` fixture: serve a config (the demo's by default) over real HTTP on
    the given store; Redis keys are removed by their own prefix afterwards."""
    stack: list[Any] = []
    prefixes: list[str] = []

    def run(
        raw: dict[str, Any] | None = None, *, store: str = "memory", redis_url: str = REDIS_URL
    ) -> Started:
        if store == "redis":
            import redis

            try:
                redis.Redis.from_url(redis_url).ping()
            except redis.RedisError:
                missing_redis(f"no Redis at {redis_url}")
        directory = tmp_path / f"b{len(stack)}"
        directory.mkdir()
        config = with_store(parse_config(raw or demo_raw()), store, directory, redis_url)
        config = with_private_ledger(config, directory)
        if store == "redis" and redis_url == REDIS_URL:  # a private Redis goes away whole
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


def ledger_records(path: Path) -> list[dict[str, Any]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def refused_by(response: httpx.Response, rule: str) -> dict[str, Any]:
    body = assert_problem(response, 409, "policy_blocked", "PRECONDITION")
    assert body["failed_check"] == {"kind": "policy", "name": rule}, body
    return body
