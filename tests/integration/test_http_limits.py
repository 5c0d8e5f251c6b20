"""Limits on a request's head, against a real ``broker serve`` process over raw sockets: what a
client that never finishes its headers, or sends too many or too large ones, gets (a problem+json
answer and a closed connection), and that ordinary requests are untouched."""

from __future__ import annotations

import json
import socket
import time
import tomllib
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import BILLING, DEMO_CONFIG
from tests.integration.procs import BrokerProcess, start_brokers, toml_dumps

TIMEOUT_S = 1.0
MAX_BYTES = 4096
MAX_COUNT = 20


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    directory = tmp_path_factory.mktemp("http-limits")
    with DEMO_CONFIG.open("rb") as fh:
        data = tomllib.load(fh)
    data["service"].update(
        ledger_path=str(directory / "ledger.jsonl"),
        ledger_key_path=str(directory / "ledger-key.pem"),
        header_timeout_s=TIMEOUT_S,
        max_header_bytes=MAX_BYTES,
        max_header_count=MAX_COUNT,
    )
    config = directory / "broker.toml"
    config.write_text(toml_dumps(data), encoding="utf-8")
    (process,) = start_brokers(config, 1, directory)
    yield process
    process.stop()


def connect(broker: BrokerProcess) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
    return sock


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the broker sends until it closes the connection (a timeout fails the test)."""
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


def read_response(sock: socket.socket) -> bytes:
    """One whole response (head and ``Content-Length`` body) from a kept-alive connection."""
    received = b""
    while b"\r\n\r\n" not in received:
        received += sock.recv(65536)
    head, _, body = received.partition(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


def problem_of(raw: bytes, status: int) -> dict[str, object]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    assert lines[0].startswith(f"HTTP/1.1 {status} "), lines[0]
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    assert headers["content-type"] == "application/problem+json"
    assert headers["connection"] == "close"
    problem: dict[str, object] = json.loads(body)
    assert problem["status"] == status and problem["code"] == "malformed_request"
    return problem


def test_a_head_that_never_ends_is_answered_408_and_closed(broker: BrokerProcess) -> None:
    with connect(broker) as sock:
        sock.sendall(b"POST /v1/proposals HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bea")
        started = time.monotonic()
        raw = read_until_closed(sock)
        waited = time.monotonic() - started
    problem = problem_of(raw, 408)
    assert "did not arrive within 1s" in str(problem["detail"])
    assert TIMEOUT_S * 0.8 <= waited < TIMEOUT_S + 3


def test_a_connection_that_sends_nothing_is_closed_after_the_timeout(
    broker: BrokerProcess,
) -> None:
    with connect(broker) as sock:
        started = time.monotonic()
        raw = read_until_closed(sock)
        waited = time.monotonic() - started
    problem_of(raw, 408)
    assert waited < TIMEOUT_S + 3


def test_a_slow_second_request_on_a_kept_alive_connection_is_cut_off_too(
    broker: BrokerProcess,
) -> None:
    with connect(broker) as sock:
        sock.sendall(b"GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        first = read_response(sock)
        assert first.startswith(b"HTTP/1.1 200 "), first
        sock.sendall(b"GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and never the blank line
        problem_of(read_until_closed(sock), 408)


@pytest.mark.parametrize(
    "extra",
    [
        b"X-Padding: " + b"a" * (MAX_BYTES + 10) + b"\r\n\r\n",  # one header, sent whole
        b"X-Padding: " + b"a" * (MAX_BYTES * 4),  # one header that never ends
        b"".join(b"X-Pad-%d: %s\r\n" % (i, b"b" * 300) for i in range(16)) + b"\r\n",
    ],
    ids=["large", "endless", "many-medium"],
)
def test_request_headers_over_the_size_limit_are_answered_431(
    broker: BrokerProcess, extra: bytes
) -> None:
    with connect(broker) as sock:
        sock.sendall(b"GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extra)
        problem = problem_of(read_until_closed(sock), 431)
    assert f"exceed {MAX_BYTES} bytes" in str(problem["detail"])


def test_more_headers_than_the_limit_are_answered_431(broker: BrokerProcess) -> None:
    headers = b"".join(b"X-H-%d: 1\r\n" % i for i in range(MAX_COUNT + 1))
    with connect(broker) as sock:
        sock.sendall(b"GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n" + headers + b"\r\n")
        problem = problem_of(read_until_closed(sock), 431)
    assert f"more than {MAX_COUNT} request headers" in str(problem["detail"])


def test_ordinary_requests_are_untouched(broker: BrokerProcess) -> None:
    headers = {**BILLING, **{f"X-H-{i}": "1" for i in range(MAX_COUNT - 10)}}
    with httpx.Client(base_url=broker.url, timeout=10) as client:
        for _ in range(3):  # one kept-alive connection, idle shorter than the timeout between
            response = client.post(
                "/v1/proposals",
                json={"tool": "lookup_order", "args": {"order_id": "O-55291"}},
                headers=headers,
            )
            assert response.status_code == 200, response.text
            time.sleep(TIMEOUT_S / 2)
    # A head sent slowly, but within the timeout, is read as usual.
    with connect(broker) as sock:
        for piece in (b"GET /livez HTTP/1.1\r\n", b"Host: 127.0.0.1\r\n", b"\r\n"):
            sock.sendall(piece)
            time.sleep(TIMEOUT_S / 4)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
