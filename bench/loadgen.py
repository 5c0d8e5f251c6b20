"""A small closed-loop HTTP/1.1 load generator: N keep-alive connections, one request in flight each.

Written on raw asyncio streams so the client costs far less CPU per request than the server it
measures; run it on a different core from the server (``os.sched_setaffinity``).
"""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = [
    "LoadResult",
    "cpu_seconds",
    "free_port",
    "pin_load_generator",
    "post",
    "process_tree",
    "run_load",
    "start_server",
]

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass
class LoadResult:
    requests: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    server_cpu: float | None = None
    """CPU seconds the server process(es) used during the run, every thread and the kernel's
    work on their behalf; ``None`` when not measured. Steal time and other tenants move it far
    less than throughput, so it is the steadier way to price one part of the path."""
    children_cpu: float | None = None
    """The part of ``server_cpu`` used by the server's child processes (the file ledger's fsync
    process), when measured."""

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    @property
    def cpu_per_request_us(self) -> float | None:
        return _per_request_us(self.server_cpu, self.requests)

    @property
    def children_cpu_per_request_us(self) -> float | None:
        return _per_request_us(self.children_cpu, self.requests)

    def percentile(self, p: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] * 1000

    def summary(self) -> str:
        codes = ", ".join(f"{k}: {v}" for k, v in sorted(self.statuses.items()))
        cpu = self.cpu_per_request_us
        server = "" if cpu is None else f"  server cpu {cpu:5.0f} us/req"
        return (
            f"{self.rps:8.0f} req/s  p50 {self.percentile(50):6.2f} ms  "
            f"p99 {self.percentile(99):6.2f} ms{server}  ({codes})"
        )


def _per_request_us(seconds: float | None, requests: int) -> float | None:
    return None if seconds is None or not requests else seconds / requests * 1e6


async def _connection(
    host: str,
    port: int,
    make_request: Callable[[int], bytes],
    counter: list[int],
    stop_at: float,
    result: LoadResult,
) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while time.perf_counter() < stop_at:
            counter[0] += 1
            request = make_request(counter[0])
            started = time.perf_counter()
            writer.write(request)
            status_line = await reader.readline()
            length = 0
            chunked = False
            while True:
                line = await reader.readline()
                if line in (b"\r\n", b""):
                    break
                name, _, value = line.partition(b":")
                name = name.strip().lower()
                if name == b"content-length":
                    length = int(value)
                elif name == b"transfer-encoding" and b"chunked" in value.lower():
                    chunked = True
            if chunked:  # a streamed answer (an MCP server's event stream): read to its end
                await _read_chunks(reader)
            else:
                await reader.readexactly(length)
            result.latencies.append(time.perf_counter() - started)
            status = int(status_line.split(b" ", 2)[1])
            result.statuses[status] = result.statuses.get(status, 0) + 1
            result.requests += 1
    finally:
        writer.close()


async def _read_chunks(reader: asyncio.StreamReader) -> None:
    while True:
        size = int((await reader.readline()).split(b";")[0], 16)
        await reader.readexactly(size + 2)  # the chunk and its CRLF (the last: just the CRLF)
        if size == 0:
            return


async def run_load(
    host: str,
    port: int,
    make_request: Callable[[int], bytes],
    *,
    connections: int,
    seconds: float,
) -> LoadResult:
    result = LoadResult()
    counter = [0]
    started = time.perf_counter()
    stop_at = started + seconds
    await asyncio.gather(
        *(
            _connection(host, port, make_request, counter, stop_at, result)
            for _ in range(connections)
        )
    )
    result.seconds = time.perf_counter() - started
    return result


def process_tree(pid: int) -> list[int]:
    """A process and its live descendants (the file ledger's fsync child, say), from ``/proc``."""
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        try:
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as children:
                    pending += [int(child) for child in children.read().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue  # exited meanwhile
        found.append(current)
    return found


def cpu_seconds(pid: int, *, own: bool = True) -> float:
    """User plus system CPU seconds of a process and its live descendants, every thread; with
    ``own=False``, of the descendants alone."""
    total = 0.0
    for current in process_tree(pid):
        if current == pid and not own:
            continue
        try:
            with open(f"/proc/{current}/stat", "rb") as stat:
                # Fields after the command name, which is parenthesised and may hold spaces.
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue  # exited meanwhile
        total += (int(fields[11]) + int(fields[12])) / _TICKS
    return total


def post(path: str, body: bytes, headers: dict[str, str]) -> bytes:
    """One raw HTTP/1.1 POST with a JSON body."""
    lines = [f"POST {path} HTTP/1.1", "Host: bench", "Content-Type: application/json"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def median(values: list[float]) -> float:
    return statistics.median(values)


def pin_load_generator() -> None:
    """Run this process, the load generator, on core 1 when there are several: servers go on
    core 0 (``start_server``), so neither steals the other's CPU."""
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {1})


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(
    command: list[str],
    port: int,
    *,
    core: int | None = 0,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start a server process (pinned to ``core`` when there are several; ``env`` added to this
    process's environment) and wait until it accepts connections on ``port``."""
    if core is not None and (os.cpu_count() or 1) > 1:
        command = ["taskset", "-c", str(core), *command]
    process = subprocess.Popen(command, cwd=cwd, env={**os.environ, **(env or {})})
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"{' '.join(command)} did not start")
