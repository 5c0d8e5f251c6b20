"""MCP ``tools/call`` and ``POST /v1/proposals`` driven in process over ASGI: what
``bench_mcp.py --instructions`` counts under callgrind and ``--commits`` counts commits of.

Both paths call create_support_ticket with a fresh idempotency key per request, ``concurrency``
at a time, through the whole chain, on one app (the demo, SQLite store, ``ledger_fsync`` from
``BENCH_LEDGER_FSYNC``); the MCP path through one initialized session. Not counted: the HTTP
server in front of the app (the same for both paths).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from bench.bodies import TICKET, post_scope

__all__ = ["PROTOCOL", "Driver"]

PROTOCOL = "2025-06-18"
_TOOLS_CALL = (
    b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"create_support_ticket",'
    b'"arguments":{"customer_id":"C-10429","subject":"Billing discrepancy","priority":"high",'
    b'"idempotency_key":"mcp-%d-%d"}}}'
)

Asgi = Callable[..., Awaitable[None]]


async def _call(app: Asgi, path: str, body: bytes, extra: list[tuple[bytes, bytes]]) -> Answer:
    delivered = False
    answer = Answer()

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if delivered:
            await asyncio.Event().wait()  # the app never asks twice for a finished body
        delivered = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer.status = message["status"]
            answer.headers = dict(message.get("headers", []))
        elif message["type"] == "http.response.body":
            answer.body += message.get("body", b"")

    await app(post_scope(path, body, tuple(extra)), receive, send)
    return answer


class Answer:
    def __init__(self) -> None:
        self.status = 0
        self.headers: dict[bytes, bytes] = {}
        self.body = b""


class Driver:
    """One app, one MCP session, and the two paths' request loops."""

    def __init__(self, app: Asgi) -> None:
        self._app = app
        self._mcp_headers: list[tuple[bytes, bytes]] = []

    async def open_session(self) -> None:
        accept = (b"accept", b"application/json, text/event-stream")
        initialize = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
        }
        opened = await _call(self._app, "/mcp", json.dumps(initialize).encode(), [accept])
        if opened.status != 200:
            raise SystemExit(f"initialize: {opened.status} {opened.body!r}")
        session = opened.headers[b"mcp-session-id"]
        self._mcp_headers = [
            accept,
            (b"mcp-session-id", session),
            (b"mcp-protocol-version", PROTOCOL.encode()),
        ]
        ready = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
        done = await _call(self._app, "/mcp", ready, self._mcp_headers)
        if done.status != 202:
            raise SystemExit(f"notifications/initialized: {done.status} {done.body!r}")

    async def proposal(self, tag: int, n: int) -> bool:
        answer = await _call(self._app, "/v1/proposals", TICKET % (tag, n), [])
        return answer.status == 200

    async def tools_call(self, tag: int, n: int) -> bool:
        body = _TOOLS_CALL % (n, tag, n)  # bytes %, as TICKET: the client's cost stays small
        answer = await _call(self._app, "/mcp", body, self._mcp_headers)
        return answer.status == 200 and b'"isError":false' in answer.body

    async def drive(self, path: str, requests: int, concurrency: int, tag: int) -> int:
        """``requests`` calls down ``path`` ("proposals" or "mcp"), ``concurrency`` at a time;
        how many answered as expected (200, and for MCP a result that is not an error)."""
        one = self.proposal if path == "proposals" else self.tools_call
        ok = 0

        async def worker(first: int) -> None:
            nonlocal ok
            for n in range(first, requests, concurrency):
                answered = await one(tag, n)  # awaited first: `ok +=` would read ok before
                ok += answered

        await asyncio.gather(*(worker(i) for i in range(concurrency)))
        return ok
