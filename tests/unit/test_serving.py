"""Serving: an answer's head and body leave in one write, and nothing written is held back."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from litestar import Litestar, Request, Response, get, post

from broker.serving import PairedWritesProtocol, _PairedWrites


class _Recorded(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 1) if name == "peername" else default


async def test_a_head_and_its_body_leave_together() -> None:
    real = _Recorded()
    paired = _PairedWrites(real, asyncio.get_running_loop())
    paired.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
    assert real.writes == []  # held for its body
    paired.write(b"{}")
    assert real.writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"]
    await asyncio.sleep(0)
    assert len(real.writes) == 1  # nothing left over to release


async def test_a_lone_write_leaves_at_the_end_of_the_loop_turn() -> None:
    real = _Recorded()
    paired = _PairedWrites(real, asyncio.get_running_loop())
    paired.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    assert real.writes == []
    await asyncio.sleep(0)
    assert real.writes == [b"HTTP/1.1 100 Continue\r\n\r\n"]


async def test_closing_sends_what_was_held_first() -> None:
    real = _Recorded()
    paired = _PairedWrites(real, asyncio.get_running_loop())
    paired.write(b"last words")
    paired.close()
    assert real.writes == [b"last words"] and real.closed
    await asyncio.sleep(0)
    assert real.writes == [b"last words"]  # released once, not again


async def test_everything_else_is_the_transports_own() -> None:
    real = _Recorded()
    paired = _PairedWrites(real, asyncio.get_running_loop())
    assert paired.get_extra_info("peername") == ("127.0.0.1", 1)
    real.closed = True
    assert paired.is_closing()


@get("/small", sync_to_thread=False)
def _small() -> dict[str, str]:
    return {"ok": "yes"}


@post("/echo", status_code=200)
async def _echo(request: Request[Any, Any, Any]) -> Response[bytes]:
    return Response(json.dumps(json.loads(await request.body()), separators=(",", ":")).encode())


@pytest.fixture(scope="module")
def server() -> Iterator[int]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    config = uvicorn.Config(
        Litestar([_small, _echo]),
        host="127.0.0.1",
        port=port,
        http=PairedWritesProtocol,
        log_level="warning",
    )
    running = uvicorn.Server(config)
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    while not running.started:
        threading.Event().wait(0.01)
    yield port
    running.should_exit = True
    thread.join(5)


def test_answers_arrive_whole_over_a_kept_alive_connection(server: int) -> None:
    with socket.create_connection(("127.0.0.1", server), timeout=5) as client:
        for request in (
            b"GET /small HTTP/1.1\r\nHost: t\r\n\r\n",
            b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
            b"Expect: 100-continue\r\nContent-Length: 11\r\n\r\n",
        ):
            client.sendall(request)
            if b"Expect" in request:
                assert _read_until(client, b"\r\n\r\n") == b"HTTP/1.1 100 Continue\r\n\r\n"
                client.sendall(b'{"a": "b"}\n')
            answer = _read_until(client, b"}")
            assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
            assert answer.endswith(b'{"ok":"yes"}' if b"small" in request else b'{"a":"b"}')


def _read_until(client: socket.socket, end: bytes) -> bytes:
    data = b""
    while not data.endswith(end):
        chunk = client.recv(65536)
        assert chunk, f"connection closed after {data!r}"
        data += chunk
    return data
