"""The startup check: is this Redis configured so that it cannot lose idempotency records?"""

from __future__ import annotations

from typing import Any

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ResponseError

from broker.stores.redis_transport import REDIS_FAULTS, RedisClient, unavailable

__all__ = ["check_redis_safety"]


async def check_redis_safety(client: RedisClient) -> list[str]:
    """Warnings about a Redis that could lose idempotency records (call at startup).

    * no persistence (``appendonly no`` and no ``save`` points): a restart forgets every claim,
      so a retried non-idempotent call could run twice;
    * an evicting ``maxmemory-policy`` (anything but ``noeviction``): Redis may silently drop
      records under memory pressure. With ``noeviction`` a full Redis refuses writes (OOM),
      which the store turns into StoreUnavailableError: it fails closed.

    A server that refuses ``CONFIG`` (renamed or ACL-denied) yields a warning, not an error.
    """
    try:
        names = ("appendonly", "save", "maxmemory-policy")
        raw: Any
        if isinstance(client, RedisCluster):  # every node: each one holds some tenants
            raw = await client.config_get(*names, target_nodes=RedisCluster.ALL_NODES)
        else:
            raw = await client.config_get(*names)
    except ResponseError as exc:
        return [
            f"could not read the Redis configuration ({exc}); persistence and "
            "maxmemory-policy are unchecked"
        ]
    except REDIS_FAULTS as exc:
        raise unavailable(exc) from exc
    configs = _config_dicts(raw)
    if not configs:
        return [
            "the Redis configuration came back empty; persistence and maxmemory-policy "
            "are unchecked"
        ]
    warnings: list[str] = []
    for where, config in configs:
        appendonly = config.get("appendonly", "")
        save = config.get("save", "").strip()
        if appendonly != "yes" and not save:
            warnings.append(
                f"Redis{where} has no persistence (appendonly {appendonly or '?'}, no save "
                "points): a restart loses idempotency records, and a retried call may run twice"
            )
        policy = config.get("maxmemory-policy", "")
        if policy != "noeviction":
            warnings.append(
                f"Redis{where} maxmemory-policy is {policy or '?'!s}: it may evict idempotency "
                "records and budget counters; use noeviction"
            )
    return warnings


def _config_dicts(raw: Any) -> list[tuple[str, dict[str, str]]]:
    """CONFIG GET replies: one dict (standalone) or one per node (cluster, by node name)."""

    def text(value: Any) -> str:
        return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)

    if not isinstance(raw, dict) or not raw:
        return []
    if all(isinstance(value, dict) for value in raw.values()):
        return [
            (f" node {text(node)}", {text(k): text(v) for k, v in value.items()})
            for node, value in raw.items()
        ]
    return [("", {text(k): text(v) for k, v in raw.items()})]
