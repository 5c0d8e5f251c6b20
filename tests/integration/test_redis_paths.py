"""``[service] redis_client`` chooses how the store reaches Redis; the choice is checked up front.

What each path does is proven elsewhere, on both: the store contract (tests/contract) and the
faults (test_redis_faults.py). Here: the setting reaches the store, and impossible choices fail
at start rather than on the first proposal.
"""

from __future__ import annotations

import time
import tomllib
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio.cluster import RedisCluster

from broker.config import parse_config
from broker.state import open_store
from broker.stores import Admission, Admitted, ClaimRequest
from broker.stores.redis import RedisStore
from broker.stores.redis_transport import StockTransport, WireTransport
from broker.taxonomy import ConfigError
from tests.redis_helpers import REDIS_URL, connected_redis, forget_prefix

DEMO = Path(__file__).resolve().parents[2] / "deploy" / "demo.toml"


def _raw(**service: Any) -> dict[str, Any]:
    with DEMO.open("rb") as fh:
        raw = tomllib.load(fh)
    raw["service"].update(service)
    return raw


def test_the_default_is_redis_pys_public_api() -> None:
    assert parse_config(_raw()).service.redis_client == "stock"


def test_an_unknown_client_path_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(_raw(redis_client="fast"))
    assert "redis_client" in str(caught.value)


@pytest.mark.redis
@pytest.mark.parametrize(
    ("choice", "transport"), [("stock", StockTransport), ("wire", WireTransport)]
)
async def test_the_setting_reaches_the_store_and_it_serves(choice: str, transport: type) -> None:
    prefix = f"test-paths-{choice}-{time.monotonic_ns()}"
    config = parse_config(_raw(redis_client=choice, key_prefix=prefix))
    store = open_store(config, {"REDIS_URL": REDIS_URL}, clock=time.time)
    assert isinstance(store, RedisStore)
    admin = await connected_redis()
    try:
        assert isinstance(store._transport, transport)  # the path the config named
        claim = ClaimRequest(
            tenant="acme", route="r", key="k", fingerprint="f", lease_s=5, idempotent=True
        )
        admitted = await store.admit(
            Admission(tenant="acme", claim=claim), now=time.time(), dry_run=False
        )
        assert isinstance(admitted, Admitted)
    finally:
        await store.close()
        await forget_prefix(admin, prefix)
        await admin.aclose()


def test_the_wire_refuses_a_cluster_client() -> None:
    # Constructing the client connects to nothing: the refusal comes before any traffic.
    cluster = RedisCluster(host="127.0.0.1", port=1)
    with pytest.raises(ValueError, match="standalone"):
        RedisStore(cluster, transport="wire")
