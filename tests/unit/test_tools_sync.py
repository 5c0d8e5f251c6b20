"""The registered-tool catalog: every process follows the store, within the poll interval.

Two catalogs over one memory store stand for two processes: the store's pub/sub is absent there,
so these tests pin the worst case, the version poll. The Redis test checks that pub/sub wakes a
follower long before its poll.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any

import msgspec
import pytest

from broker.config import BrokerConfig
from broker.model import Principal
from broker.stores import MemoryStore, RegisteredTool, Store
from broker.tools.registration import Registration
from broker.tools.runtime import build_registry
from broker.tools.sync import Catalog
from tests.registrations import registration, registration_config, registration_raw

ADMIN = Principal(
    service_account="admin:test", route=None, tenant=None, tools=frozenset(), admin=True
)


def catalog(config: BrokerConfig, store: Store) -> Catalog:
    registry = build_registry(config, secrets={}, backends={"demo": _NoBackend()})
    return Catalog(registry, store, config, secrets={})


class _NoBackend:
    adapters: dict[str, Any] = {
        "lookup_order": object(),
        "create_support_ticket": object(),
        "issue_credit": object(),
    }
    verifiers: dict[str, Any] = {
        "customer_verified": object(),
        "open_invoice_present": object(),
        "order_paid": object(),
        "within_return_window": object(),
        "credit_within_order": object(),
    }


def refund(url: str = "http://127.0.0.1:9/refund") -> Registration:
    return msgspec.convert(registration("billing.refund", url), Registration)


async def test_a_second_process_sees_a_registration_within_the_poll_interval() -> None:
    config = registration_config(registry_poll_s=0.05)
    store = MemoryStore()
    a, b = catalog(config, store), catalog(config, store)
    await b.start()
    try:
        await a.register(refund(), ADMIN, rotate_secret=False)
        assert "billing.refund" in a.registry.tools  # the writer sees it at once
        started = time.monotonic()
        while "billing.refund" not in b.registry.tools:
            assert time.monotonic() - started < 0.5, "not seen within the bound"
            await asyncio.sleep(0.005)
        assert b.registry.version == a.registry.version == 1
        assert b.registry.tools["billing.refund"].routes == {"billing_help"}
        await a.remove("billing.refund", ADMIN)
        started = time.monotonic()
        while "billing.refund" in b.registry.tools:
            assert time.monotonic() - started < 0.5
            await asyncio.sleep(0.005)
    finally:
        await b.stop()


async def test_a_registration_that_no_longer_builds_is_inactive_not_fatal() -> None:
    store = MemoryStore()
    writer = catalog(registration_config(), store)
    await writer.register(refund(), ADMIN, rotate_secret=False)
    await writer.register(
        msgspec.convert(registration("billing.other", "http://127.0.0.1:9/o"), Registration),
        ADMIN,
        rotate_secret=False,
    )
    raw = registration_raw()
    raw["service"]["http_allowlist"] = ["http://127.0.0.1:9/o"]
    from broker.config import parse_config

    narrower = catalog(parse_config(raw), store)
    await narrower.load()
    assert "billing.other" in narrower.registry.tools
    assert "billing.refund" not in narrower.registry.tools
    assert "http_allowlist" in narrower.problems["billing.refund"][0]


async def test_config_tools_win_over_a_stored_registration_of_the_same_name() -> None:
    store = MemoryStore()
    spec = msgspec.json.encode(refund())
    await store.put_tool(
        RegisteredTool(
            name="issue_credit", spec=spec, signing_secret="s", updated_at=0, updated_by="x"
        ),
        keep_secret=True,
    )
    c = catalog(registration_config(), store)
    await c.load()
    assert not c.registry.tools["issue_credit"].registered


@pytest.mark.redis
async def test_redis_pub_sub_wakes_a_follower_before_its_poll() -> None:
    from broker.stores.redis import RedisStore
    from tests.redis_helpers import connected_redis, forget_prefix

    client = await connected_redis()
    prefix = f"test-catalog-{secrets.token_hex(6)}"
    writer, follower = RedisStore(client, prefix=prefix), RedisStore(client, prefix=prefix)
    try:
        await follower.wait_tools_changed(0.01)  # subscribes
        waiting = asyncio.create_task(follower.wait_tools_changed(5.0))
        await asyncio.sleep(0.05)
        started = time.monotonic()
        spec = msgspec.json.encode(refund())
        await writer.put_tool(
            RegisteredTool(
                name="billing.refund", spec=spec, signing_secret="s", updated_at=0, updated_by="x"
            ),
            keep_secret=True,
        )
        await asyncio.wait_for(waiting, 2.0)
        assert time.monotonic() - started < 1.0
    finally:
        await follower.close()
        await writer.close()
        await forget_prefix(client, prefix)
        await client.aclose()
