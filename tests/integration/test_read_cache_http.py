"""The read cache over real HTTP, on each store (memory, SQLite, Redis): a repeated read is
answered from the cache (the loopback backend counts the calls it really got), marked, recorded
in a ledger that verifies, per tenant, until its TTL ends; the chain still runs first; dry runs
never touch it; a write tool cannot declare it; a store that fails fails open."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis import Redis

from adapters.demo import DemoBackend
from broker.config import BrokerConfig, parse_config
from broker.plugins import Backend
from broker.stores import MemoryStore, SqliteStore, Store
from broker.stores.redis import RedisStore
from broker.taxonomy import ConfigError, StoreUnavailableError
from tests.conftest import ADMIN, BILLING, GLOBEX, Clock
from tests.fakes import demo_raw
from tests.integration.test_tool_calls_http import openai_turn
from tests.loopback import LoopbackBackend, running
from tests.redis_helpers import REDIS_URL, missing_redis
from tests.registrations import BACKEND, registration, registration_config

MakeBroker = Callable[..., tuple[str, Mapping[str, Backend]]]
SECRET = "quote-signing-secret-0123456789"
SECRETS = {"BROKER_TOKEN_SIGNING_KEY": "test-signing-key-0123456789abcdef", "QUOTE_SECRET": SECRET}
QUOTE_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["sku"],
    "properties": {"sku": {"type": "string"}, "qty": {"type": "number"}},
}


def cached_tools(raw: dict[str, Any], backend_url: str) -> None:
    """Three read tools of the loopback backend: cached for 30 s, for half a second, and cached
    behind a rate limit of 3 calls a minute."""
    raw["rate_limits"]["quote_calls"] = {"limit": 3, "window_s": 60, "per": ["tenant"]}
    for name, extra in (
        ("quote", {"read_cache": {"ttl_s": 30}}),
        ("quote_brief", {"read_cache": {"ttl_s": 0.5}}),
        ("quote_limited", {"read_cache": {"ttl_s": 30}, "rate_limits": ["quote_calls"]}),
    ):
        raw["tools"][name] = {
            "description": "Quote a price for a SKU.",
            "risk": "read",
            "input_schema": QUOTE_SCHEMA,
            "adapter": {
                "kind": "http",
                "url": f"{backend_url}/tools/{name}",
                "signing_secret": "env:QUOTE_SECRET",
            },
            **extra,
        }
        raw["routes"]["billing_help"]["tools"].append(name)


def cache_config(backend_url: str) -> BrokerConfig:
    raw = demo_raw()
    cached_tools(raw, backend_url)
    return parse_config(raw)


@pytest.fixture
def backend() -> Iterator[tuple[str, LoopbackBackend]]:
    loopback = LoopbackBackend()
    with running(loopback) as url:
        yield url, loopback


@pytest.fixture(params=["memory", "sqlite", pytest.param("redis", marks=pytest.mark.redis)])
def store(request: pytest.FixtureRequest, tmp_path: Path, clock: Clock) -> Iterator[Store]:
    """A fresh store of each kind (the app closes it); Redis keys under a prefix of its own."""
    if request.param == "memory":
        yield MemoryStore(clock=clock)
    elif request.param == "sqlite":
        yield SqliteStore(tmp_path / "state.db", clock=clock)
    else:
        admin = Redis.from_url(REDIS_URL)
        try:
            admin.ping()
        except Exception as exc:
            missing_redis(f"Redis is not reachable at {REDIS_URL}: {exc}")
        prefix = f"test-cache-{secrets.token_hex(6)}"
        yield RedisStore.from_url(REDIS_URL, prefix=prefix)
        keys = list(admin.scan_iter(match=f"{prefix}:*", count=1000))
        if keys:
            admin.delete(*keys)
        admin.close()


@pytest.fixture
def served(
    make_broker: MakeBroker, backend: tuple[str, LoopbackBackend], store: Store
) -> tuple[str, LoopbackBackend]:
    url, _ = make_broker(cache_config(backend[0]), store=store, secrets=SECRETS)
    return url, backend[1]


def quote(
    url: str,
    args: dict[str, Any],
    *,
    tool: str = "quote",
    token: dict[str, str] = BILLING,
    **extra: Any,
) -> httpx.Response:
    body = {"tool": tool, "args": args, **extra}
    return httpx.post(f"{url}/v1/proposals", json=body, headers=token, timeout=10)


def cache_outcomes(url: str, trace_id: str) -> list[str | None]:
    answer = httpx.get(f"{url}/v1/traces/{trace_id}", headers=ADMIN, timeout=10)
    assert answer.status_code == 200, answer.text
    return [r["cache"] for r in answer.json()["records"]]


def test_a_repeated_read_is_answered_from_the_cache(served: tuple[str, LoopbackBackend]) -> None:
    url, backend = served
    first = quote(url, {"sku": "A-1", "qty": 2}, trace_id="cache-1")
    assert first.status_code == 200, first.text
    assert "cached" not in first.json() and "Age" not in first.headers
    # The same arguments, in another order and spelling (2.0 is 2): one canonical form.
    second = quote(url, {"qty": 2.0, "sku": "A-1"}, trace_id="cache-1")
    assert second.status_code == 200, second.text
    assert len(backend.hits_on("/tools/quote")) == 1
    body = second.json()
    assert body["execution"]["result"] == first.json()["execution"]["result"]
    assert body["execution"]["status"] == "succeeded"
    assert body["execution"]["attempts"] == 0
    assert body["cached"]["age_s"] >= 0
    assert second.headers["Age"] == "0"
    assert cache_outcomes(url, "cache-1") == ["stored", "hit"]
    other = quote(url, {"sku": "A-2"})
    assert other.status_code == 200 and "cached" not in other.json()
    assert len(backend.hits_on("/tools/quote")) == 2
    assert httpx.get(f"{url}/v1/audit/verify", headers=ADMIN, timeout=10).json()["ok"] is True
    metrics = httpx.get(f"{url}/metrics", timeout=10).text
    for outcome, count in (("hit", 1), ("miss", 2), ("store", 2)):
        assert f'broker_read_cache_total{{outcome="{outcome}",tool="quote"}} {count}.0' in metrics


def test_an_entry_expires_after_its_ttl(served: tuple[str, LoopbackBackend], clock: Clock) -> None:
    url, backend = served
    assert quote(url, {"sku": "B-1"}, tool="quote_brief").status_code == 200
    assert "cached" in quote(url, {"sku": "B-1"}, tool="quote_brief").json()
    clock.advance(1.0)  # the broker's clock (memory, SQLite) ...
    time.sleep(0.6)  # ... and Redis's own, which expires the key
    again = quote(url, {"sku": "B-1"}, tool="quote_brief", trace_id="expired")
    assert again.status_code == 200 and "cached" not in again.json()
    assert len(backend.hits_on("/tools/quote_brief")) == 2
    assert cache_outcomes(url, "expired") == ["stored"]


def test_tenants_never_share_entries(served: tuple[str, LoopbackBackend]) -> None:
    url, backend = served
    acme = quote(url, {"sku": "C-1"})
    globex = quote(url, {"sku": "C-1"}, token=GLOBEX)
    assert "cached" not in globex.json()
    assert acme.json()["execution"]["result"]["tenant"] == "acme"
    assert globex.json()["execution"]["result"]["tenant"] == "globex"
    assert (
        quote(url, {"sku": "C-1"}, token=GLOBEX).json()["execution"]["result"]["tenant"] == "globex"
    )
    assert len(backend.hits_on("/tools/quote")) == 2


def test_dry_runs_neither_read_nor_fill_the_cache(served: tuple[str, LoopbackBackend]) -> None:
    url, backend = served
    dry = quote(url, {"sku": "D-1"}, dry_run=True, trace_id="dry")
    assert dry.status_code == 200 and dry.json()["execution"]["status"] == "dry_run"
    real = quote(url, {"sku": "D-1"})
    assert "cached" not in real.json()  # the dry run kept nothing
    dry_again = quote(url, {"sku": "D-1"}, dry_run=True, trace_id="dry")
    assert dry_again.json()["execution"]["status"] == "dry_run"
    assert "cached" not in dry_again.json()
    assert len(backend.hits_on("/tools/quote")) == 1
    assert cache_outcomes(url, "dry") == [None, None]


def test_a_cached_tool_is_still_rate_limited(served: tuple[str, LoopbackBackend]) -> None:
    url, backend = served
    answers = [quote(url, {"sku": "E-1"}, tool="quote_limited") for _ in range(4)]
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    assert answers[3].json()["code"] == "rate_limited"
    assert [("cached" in a.json()) for a in answers[:3]] == [False, True, True]
    assert len(backend.hits_on("/tools/quote_limited")) == 1


def test_the_chain_runs_before_the_cache(served: tuple[str, LoopbackBackend]) -> None:
    url, backend = served
    assert quote(url, {"sku": "F-1"}).status_code == 200
    bad = quote(url, {"sku": "F-1", "extra": 1})
    assert bad.status_code == 422 and bad.json()["code"] == "schema_invalid"
    scheduling = {"Authorization": "Bearer demo-scheduling-token"}  # a route without the tool
    refused = quote(url, {"sku": "F-1"}, token=scheduling)
    assert refused.status_code == 403, refused.text
    assert len(backend.hits_on("/tools/quote")) == 1


def test_a_failed_call_is_not_cached(
    served: tuple[str, LoopbackBackend],
) -> None:
    url, backend = served
    backend.behaviours["/tools/quote"] = "status:400"
    failed = quote(url, {"sku": "G-1"}, trace_id="failed")
    assert failed.status_code == 502, failed.text
    backend.behaviours["/tools/quote"] = "ok"
    ok = quote(url, {"sku": "G-1"}, trace_id="failed")
    assert ok.status_code == 200 and "cached" not in ok.json()
    assert cache_outcomes(url, "failed") == ["miss", "stored"]


@pytest.mark.parametrize("risk", ["write", "irreversible"])
def test_a_write_tool_with_a_read_cache_is_a_config_error(risk: str) -> None:
    raw = demo_raw()
    raw["tools"]["issue_credit"]["read_cache"] = {"ttl_s": 30}
    raw["tools"]["issue_credit"]["risk"] = risk
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    assert caught.value.problems == [
        ("tools.issue_credit.read_cache", f'only risk = "read" tools may be cached, not {risk!r}')
    ]


class _FailingCache(MemoryStore):
    """A memory store whose read cache is down (admission and the rest still work)."""

    async def get_expiring(self, tenant: str, key: str) -> bytes | None:
        raise StoreUnavailableError("cache down")

    async def put_expiring(self, tenant: str, key: str, value: bytes, *, ttl_s: float) -> None:
        raise StoreUnavailableError("cache down")


def test_a_failing_cache_fails_open_to_the_backend(
    make_broker: MakeBroker, backend: tuple[str, LoopbackBackend], clock: Clock
) -> None:
    url, _ = make_broker(
        cache_config(backend[0]), store=_FailingCache(clock=clock), secrets=SECRETS
    )
    answers = [quote(url, {"sku": "H-1"}, trace_id="down") for _ in range(2)]
    assert [a.status_code for a in answers] == [200, 200]
    assert len(backend[1].hits_on("/tools/quote")) == 2
    assert cache_outcomes(url, "down") == ["miss", "miss"]
    metrics = httpx.get(f"{url}/metrics", timeout=10).text
    assert 'broker_read_cache_total{outcome="error",tool="quote"} 4.0' in metrics


def test_a_result_over_the_entry_bound_is_not_kept(
    make_broker: MakeBroker, backend: tuple[str, LoopbackBackend]
) -> None:
    raw = demo_raw()
    cached_tools(raw, backend[0])
    raw["tools"]["quote"]["read_cache"]["max_entry_bytes"] = 16  # smaller than any answer
    url, _ = make_broker(parse_config(raw), backends={"demo": DemoBackend()}, secrets=SECRETS)
    for _ in range(2):
        assert "cached" not in quote(url, {"sku": "I-1"}).json()
    assert len(backend[1].hits_on("/tools/quote")) == 2


def test_a_registered_read_tool_may_declare_a_read_cache(
    make_broker: MakeBroker, backend: tuple[str, LoopbackBackend]
) -> None:
    url, _ = make_broker(registration_config())
    backend_url, loopback = backend
    body = registration(
        "billing.quote", f"{backend_url}/tools/quote", risk="read", read_cache={"ttl_s": 30}
    )
    created = httpx.post(f"{url}/v1/tools", json=body, headers=BACKEND, timeout=10)
    assert created.status_code == 201, created.text
    assert created.json()["tool"]["read_cache"] == {"ttl_s": 30.0, "max_entry_bytes": 65536}
    answers = [quote(url, {"payment_id": "P-1"}, tool="billing.quote") for _ in range(2)]
    assert [a.status_code for a in answers] == [200, 200]
    assert "cached" not in answers[0].json() and "cached" in answers[1].json()
    assert len(loopback.hits_on("/tools/quote")) == 1


def test_a_registered_write_tool_with_a_read_cache_is_refused(
    make_broker: MakeBroker, backend: tuple[str, LoopbackBackend]
) -> None:
    url, _ = make_broker(registration_config())
    body = registration("billing.refund", f"{backend[0]}/tools/refund", read_cache={"ttl_s": 30})
    refused = httpx.post(f"{url}/v1/tools", json=body, headers=BACKEND, timeout=10)
    assert refused.status_code == 422, refused.text
    assert refused.json()["errors"] == [
        {"path": "/read_cache", "message": "only risk = \"read\" tools may be cached, not 'write'"}
    ]
    listed = httpx.get(f"{url}/v1/tools", headers=ADMIN, timeout=10).json()["tools"]
    assert "billing.refund" not in {t["name"] for t in listed}


def test_a_native_tool_call_is_answered_from_the_cache_too(
    served: tuple[str, LoopbackBackend],
) -> None:
    url, backend = served
    decisions = []
    for call_id in ("call_1", "call_2"):
        turn = openai_turn((call_id, "quote", json.dumps({"sku": "N-1"})))
        body = {"format": "openai", "calls": turn}
        answer = httpx.post(f"{url}/v1/tool-calls", json=body, headers=BILLING, timeout=10)
        assert answer.status_code == 200, answer.text
        decisions += answer.json()["decisions"]
    assert ["cached" in d for d in decisions] == [False, True]
    assert decisions[0]["execution"]["result"] == decisions[1]["execution"]["result"]
    assert len(backend.hits_on("/tools/quote")) == 1
