"""Loopback ports for servers that a test starts and binds later (a broker process, a
redis-server, a backend), and for ports where nothing must listen.

A port found by binding to 0 and closing again is free only until someone else binds it. In one
pytest process the picks come one after another, but under pytest-xdist (``make test``) the
workers pick at the same time: another worker's probe can be handed the same port between this
probe and the child's own bind, and then one of the two servers fails to start or, worse, a
readiness check is answered by the other worker's server.

So under xdist each worker draws from a block of ports of its own, below the kernel's ephemeral
range (which bind-to-0 and outgoing connections draw from, so the kernel never hands one of them
out), and probes each before handing it out. The blocks of one run are disjoint; where they
start is drawn from the run's id, so that two runs on one machine rarely share one. Outside
xdist, or where the ephemeral range leaves no room below it, a port is found by binding to 0.

The blocks lie in 10000-19999: a Redis Cluster node's bus port (its port + 10000) then falls in
20000-29999, where no worker draws from either.
"""

from __future__ import annotations

import hashlib
import os
import random
import socket
from pathlib import Path

__all__ = ["CLUSTER_BUS_OFFSET", "free_port"]

CLUSTER_BUS_OFFSET = 10000
"""Redis Cluster's bus port is the node's port plus this."""

_LOW = 10000
_SPAN = 10000  # the blocks are in [_LOW, _LOW + _SPAN); the bus ports in the next _SPAN
_BLOCKS = 40


def _bind_zero() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ephemeral_low() -> int:
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text(encoding="ascii")
        return int(text.split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def _worker_block() -> range | None:
    """This xdist worker's ports, or None outside xdist (or without room for the blocks)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID", "")
    if not worker.startswith("gw") or not worker[2:].isdigit() or not run:
        return None
    if _ephemeral_low() < _LOW + _SPAN + CLUSTER_BUS_OFFSET:
        return None
    size = _SPAN // _BLOCKS
    first = int.from_bytes(hashlib.sha256(run.encode()).digest()[:4], "big")
    block = (first + int(worker[2:])) % _BLOCKS
    start = _LOW + block * size
    return range(start, start + size)


class _Picker:
    """Walks this worker's block from a random place, handing out ports that probe free."""

    def __init__(self) -> None:
        self.block = _worker_block()
        self.next = random.randrange(len(self.block)) if self.block else 0

    def pick(self) -> int:
        if self.block is None:
            return _bind_zero()
        for _ in range(len(self.block)):
            port = self.block[self.next]
            self.next = (self.next + 1) % len(self.block)
            with socket.socket() as probe:
                try:
                    probe.bind(("127.0.0.1", port))
                except OSError:
                    continue  # in use (or lingering): the next one
            return port
        raise OSError(f"no free port in {self.block}")


_picker: _Picker | None = None


def free_port() -> int:
    """A loopback port that nothing listens on now and that, under xdist, no other worker of
    this run is handed (nor this one again until it has gone round its block)."""
    global _picker
    if _picker is None:
        _picker = _Picker()
    return _picker.pick()
