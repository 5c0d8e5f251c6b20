"""The servers benchmarks compare, each run in its own process.

``python -m bench.servers broker|broker-noledger|broker-nometrics|bare PORT [--store ...]``
(``--store sqlite|memory|redis``, default ``sqlite``; ``BENCH_STORE_SYNCHRONOUS=full`` for
SQLite's power-cut durability)

``broker-noledger`` is the broker with a ledger that keeps nothing, to price the real one;
``broker-nometrics`` the broker whose metrics record nothing, to price them;
the ledger of ``broker`` lives in a temporary directory, never in the demo's ``var/``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
from litestar import Litestar, Request, Response, post

from broker.app import create_app
from broker.config import load_config
from broker.gc_tuning import tune_gc_for_serving
from broker.ledger import AuditRef, JsonlCheckpointStore, load_or_create_signing_key
from broker.metrics import BrokerMetrics
from broker.serving import serve
from broker.state import Ledger
from broker.stores import MemoryStore, SqliteStore, Store

DEMO = os.path.join(os.path.dirname(__file__), "..", "deploy", "demo.toml")


@post("/v1/proposals", status_code=200)
async def bare(request: Request[Any, Any, Any]) -> Response[bytes]:
    """What any JSON endpoint does at minimum: read the body, decode it, answer JSON."""
    proposal = msgspec.json.decode(await request.body())
    return Response(
        content=msgspec.json.encode({"tool": proposal["tool"], "decision": "approved"}),
        media_type="application/json",
    )


class _NothingCounted(BrokerMetrics):
    """Metrics that record nothing: what the broker costs without them."""

    def answered(self, *args: object, **kwargs: object) -> None:
        return None

    def executed(self, *args: object, **kwargs: object) -> None:
        return None


class _NothingKept:
    """A ledger sink that keeps nothing: what the broker costs without its ledger."""

    async def append(self, entry: object) -> AuditRef:
        return AuditRef(0, "sha256:none")

    async def ping(self) -> None:
        return None

    async def head(self) -> None:
        return None

    async def close(self) -> None:
        return None


@contextlib.asynccontextmanager
async def lifespan(app: Callable[..., Awaitable[None]]) -> AsyncIterator[None]:
    """Run ``app``'s ASGI lifespan around the block, for benches that drive it in process:
    started on entry, shut down on exit."""
    events: asyncio.Queue[dict[str, str]] = asyncio.Queue()
    await events.put({"type": "lifespan.startup"})
    replies: asyncio.Queue[dict[str, str]] = asyncio.Queue()
    running = asyncio.create_task(
        app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, events.get, replies.put)
    )
    await replies.get()
    try:
        yield
    finally:
        await events.put({"type": "lifespan.shutdown"})
        await running


def build(kind: str, store: str) -> Litestar:
    if kind == "bare":
        return Litestar(route_handlers=[bare], openapi_config=None)
    scratch = Path(tempfile.mkdtemp(prefix="bench-ledger-"))
    config = load_config(DEMO)
    service = msgspec.structs.replace(
        config.service,
        ledger_path=str(scratch / "ledger.jsonl"),
        ledger_key_path=str(scratch / "key.pem"),
        allow_volatile_redis=True,  # benchmarks price the broker, whatever Redis keeps on disk
        ledger_fsync=os.environ.get("BENCH_LEDGER_FSYNC", config.service.ledger_fsync),
        proposal_fast_path=os.environ.get("BENCH_FAST_PATH") == "1",
        idempotency_ttl_s=int(
            os.environ.get("BENCH_IDEMPOTENCY_TTL_S", config.service.idempotency_ttl_s)
        ),
    )
    # One prefix for every server of a run (they share state), removed by the benchmark: the
    # store's keys and the demo backend's shared ticket numbers (kept in Redis when REDIS_URL is
    # set) alike.
    prefix = os.environ.get("BENCH_PREFIX", "bench")
    demo = config.backends["demo"]
    backends = {
        **config.backends,
        "demo": msgspec.structs.replace(
            demo, options={**demo.options, "numbers_key": f"{prefix}:demo-numbers"}
        ),
    }
    config = msgspec.structs.replace(config, service=service, backends=backends)
    chosen: Store
    if store == "redis":
        from broker.stores.redis import RedisStore  # only where the benchmark asks for it

        chosen = RedisStore.from_url(
            os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"), prefix=prefix
        )
    elif store == "sqlite":
        # Beside the ledger, as the default puts it; BENCH_STORE_DIR prices another disk.
        where = Path(os.environ.get("BENCH_STORE_DIR") or scratch)
        synchronous = os.environ.get("BENCH_STORE_SYNCHRONOUS", "normal")
        chosen = SqliteStore(
            Path(tempfile.mkdtemp(prefix="bench-store-", dir=where)) / "state.sqlite3",
            synchronous="full" if synchronous == "full" else "normal",
        )
    else:
        chosen = MemoryStore()
    ledger = None
    if kind == "broker-noledger":
        ledger = Ledger(
            _NothingKept(),  # type: ignore[arg-type]
            JsonlCheckpointStore(scratch / "checkpoints.jsonl"),
            load_or_create_signing_key(scratch / "key.pem"),
        )
    metrics = _NothingCounted(()) if kind == "broker-nometrics" else None
    return create_app(config, store=chosen, ledger=ledger, metrics=metrics)


if __name__ == "__main__":
    kind, port = sys.argv[1], int(sys.argv[2])
    store = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--store" else "sqlite"
    app = build(kind, store)
    tune_gc_for_serving()  # as `broker serve` does (for the bare endpoint too: same footing)
    # Served as `broker serve` serves (one write per answer), the bare endpoint too: both sides
    # of every comparison run on the same server.
    serve(app, host="127.0.0.1", port=port, log_level="warning", loop="uvloop")
