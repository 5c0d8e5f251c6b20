"""The two servers a benchmark compares, each run in its own process: the broker and a bare endpoint.

``python -m bench.servers broker|bare PORT [--store memory|redis]``
"""

from __future__ import annotations

import os
import sys
from typing import Any

import msgspec
import uvicorn
from litestar import Litestar, Request, Response, post

from broker.app import create_app
from broker.config import load_config

DEMO = os.path.join(os.path.dirname(__file__), "..", "deploy", "demo.toml")


@post("/v1/proposals", status_code=200)
async def bare(request: Request[Any, Any, Any]) -> Response[bytes]:
    """What any JSON endpoint does at minimum: read the body, decode it, answer JSON."""
    proposal = msgspec.json.decode(await request.body())
    return Response(
        content=msgspec.json.encode({"tool": proposal["tool"], "decision": "approved"}),
        media_type="application/json",
    )


def build(kind: str, store: str) -> Litestar:
    if kind == "bare":
        return Litestar(route_handlers=[bare], openapi_config=None)
    config = load_config(DEMO)
    if store == "redis":
        from broker.stores.redis import RedisStore  # only where the benchmark asks for it

        redis_store = RedisStore.from_url(
            os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"), prefix=f"bench{os.getpid()}"
        )
        return create_app(config, store=redis_store)
    return create_app(config)


if __name__ == "__main__":
    kind, port = sys.argv[1], int(sys.argv[2])
    store = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--store" else "memory"
    uvicorn.run(
        build(kind, store),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        loop="uvloop",
        http="httptools",
    )
