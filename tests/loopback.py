"""A real HTTP backend on loopback for adapter tests: scripted answers, every request recorded.

It is a bare ASGI app served by uvicorn (``tests.conftest.serve``), so the broker talks to it
over a real socket. Each path answers according to its *behaviour*; every request that reaches
it is recorded (method, path, headers, body), which is the ground truth for "how often did the
broker call the backend". When a signing secret is set for a path, requests whose
``X-Broker-Signature`` does not verify are refused with 401, as a real backend would.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from adapters.http import SIGNATURE_HEADER, verify_signature
from tests.conftest import serve

__all__ = ["Hit", "LoopbackBackend", "running"]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


@dataclass(frozen=True)
class Hit:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class LoopbackBackend:
    """Behaviours by path (``/tools/<name>``):

    * ``ok``: 200 ``{"ok": true, "args": ..., "tenant": ..., "call": n}``
    * ``status:<code>``: that status with ``{"detail": "..."}``
    * ``flaky:<code>:<n>``: ``<code>`` for the first n calls, then ``ok``
    * ``alternate:<code>``: ``<code>`` for odd-numbered calls, ``ok`` for even ones
    * ``slow:<seconds>``: ``ok`` after that long (``in_flight``/``max_in_flight`` count them)
    * ``later:<code>:<n>:<retry-after>``: like ``flaky``, with that ``Retry-After`` header
    * ``hang``: never answers
    * ``big``: an endless 2xx stream; ``not_object``; ``invalid_json``; ``redirect``
    * ``gzip:<n>``: 200 with a gzip-compressed (``Content-Encoding``) JSON object whose
      ``pad`` is n bytes long once decompressed
    * ``echo_credentials``: 200 with the credential header in the result and a 4xx-like detail
    * ``verify:<ok|fail>``: a verifier's answer
    """

    behaviours: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)
    hits: list[Hit] = field(default_factory=list)
    refused: list[Hit] = field(default_factory=list)
    closed: threading.Event = field(default_factory=threading.Event)
    in_flight: int = 0
    """Requests being answered now, over every path (the loop is one thread: no lock needed)."""
    max_in_flight: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def hits_on(self, path: str) -> list[Hit]:
        with self._lock:
            return [h for h in self.hits if h.path == path]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        hit = Hit(scope["path"], headers, body, time.monotonic())
        secret = self.secrets.get(scope["path"])
        if secret is not None and not verify_signature(
            secret, headers.get(SIGNATURE_HEADER.lower()), body
        ):
            with self._lock:
                self.refused.append(hit)
            await _answer(send, 401, {"detail": "bad signature"})
            return
        with self._lock:
            self.hits.append(hit)
            count = sum(1 for h in self.hits if h.path == hit.path)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await self._behave(self.behaviours.get(hit.path, "ok"), hit, count, send)
        finally:
            self.in_flight -= 1

    async def _behave(self, behaviour: str, hit: Hit, count: int, send: Send) -> None:
        kind, _, rest = behaviour.partition(":")
        if kind == "flaky":
            code, _, times = rest.partition(":")
            if count <= int(times):
                await _answer(send, int(code), {"detail": "transient"})
                return
            kind = "ok"
        if kind == "alternate":
            if count % 2:
                await _answer(send, int(rest), {"detail": "transient"})
                return
            kind = "ok"
        if kind == "slow":
            await asyncio.sleep(float(rest))
            kind = "ok"
        if kind == "later":
            code, times, wait = rest.split(":", 2)
            if count <= int(times):
                await _raw(
                    send,
                    int(code),
                    json.dumps({"detail": "try later"}).encode(),
                    [(b"retry-after", wait.encode())],
                )
                return
            kind = "ok"
        if kind == "ok":
            request = hit.json()
            answer = {
                "ok": True,
                "args": request["args"],
                "tenant": request["tenant"],
                "call": count,
            }
            await _answer(send, 200, answer)
        elif kind == "status":
            await _answer(send, int(rest), {"detail": f"scripted {rest}"})
        elif kind == "hang":  # until the test ends: only the broker's deadline ends the call
            while not self.closed.is_set():
                await asyncio.sleep(0.02)
        elif kind == "big":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            chunk = b"x" * 65536
            for _ in range(64):  # 4 MiB, more than any cap under test
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        elif kind == "gzip":
            payload = json.dumps({"ok": True, "pad": "x" * int(rest)}).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-encoding", b"gzip"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": gzip.compress(payload)})
        elif kind == "not_object":
            await _answer(send, 200, [1, 2, 3])
        elif kind == "invalid_json":
            await _raw(send, 200, b"{not json")
        elif kind == "redirect":
            await send(
                {
                    "type": "http.response.start",
                    "status": 307,
                    "headers": [(b"location", b"/tools/redirected")],
                }
            )
            await send({"type": "http.response.body", "body": b""})
        elif kind == "echo_credentials":
            value = hit.headers.get("x-api-key", "")
            code = 200 if rest != "refuse" else 400
            await _answer(
                send, code, {"detail": f"got key {value}", "key": value, "nested": [value]}
            )
        elif kind == "verify":
            ok = rest == "ok"
            await _answer(
                send,
                200,
                {"ok": ok}
                if ok
                else {
                    "ok": False,
                    "reason": "the backend says no",
                    "remediation": "ASK_FOR_MORE: try again",
                },
            )


async def _answer(send: Send, status: int, body: Any) -> None:
    await _raw(send, status, json.dumps(body).encode())


async def _raw(
    send: Send, status: int, payload: bytes, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *(headers or [])],
        }
    )
    await send({"type": "http.response.body", "body": payload})


@contextmanager
def running(backend: LoopbackBackend) -> Iterator[str]:
    with serve(backend) as url:
        try:
            yield url
        finally:
            backend.closed.set()
