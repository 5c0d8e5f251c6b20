"""The Redis store has one client path, redis-py's public API; the removed choice of another
(``[service] redis_client``, once ``"stock"`` or ``"wire"``) is now an unknown key, refused at
start like any other.

What the path does is proven elsewhere: the store contract (tests/contract) and the faults
(test_redis_faults.py). Here: a config naming Redis gets that path, and it serves.
"""

from __future__ import annotations

import time
import tomllib
from pathlib import Path
from typing import Any

import pytest

from broker.config import parse_config
from broker.state import open_store
from broker.stores import Admission, Admitted, ClaimRequest
from broker.stores.redis import RedisStore
from broker.stores.redis_transport import StockTransport
from broker.taxonomy import ConfigError
from tests.redis_helpers import REDIS_URL, connected_redis, forget_prefix

DEMO = Path(__file__).resolve().parents[2] / "deploy" / "demo.toml"


def _raw(**service: Any) -> dict[str, Any]:
    with DEMO.open("rb") as fh:
        raw = tomllib.load(fh)
    raw["service"].update(service)
    return raw


@pytest.mark.parametrize("choice", ["stock", "wire"])
def test_the_removed_redis_client_key_is_an_unknown_key(choice: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(_raw(redis_client=choice))
    assert caught.value.problems == [("service.redis_client", "unknown key")]


@pytest.mark.redis
async def test_a_redis_store_uses_redis_pys_public_api_and_serves() -> None:
    prefix = f"test-paths-{time.monotonic_ns()}"
    config = parse_config(_raw(store="redis", key_prefix=prefix))
    store = open_store(config, {"REDIS_URL": REDIS_URL}, clock=time.time)
    assert isinstance(store, RedisStore)
    admin = await connected_redis()
    try:
        assert isinstance(store._transport, StockTransport)
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
