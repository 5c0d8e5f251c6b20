"""The container health check: ask ``/livez`` on the port the broker actually serves.

``python -m broker.healthcheck`` (the image's ``HEALTHCHECK``) finds the address the way the
server chose it, so a container run with ``serve ... --port 9000`` (or ``PORT=9000``) is checked
on 9000, not on a port baked into the image:

1. ``--port``/``--host`` on the serving process's command line (PID 1 in a container, read from
   ``/proc/<pid>/cmdline``);
2. else the ``PORT`` environment variable (``broker serve``'s own default);
3. else 8080.

A wildcard host (``0.0.0.0``, ``::``) is asked on loopback. Exit 0 when ``/livez`` answers 200,
else 1 with one line saying what failed (Docker keeps it in ``docker inspect``).
"""

from __future__ import annotations

import argparse
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["livez_url", "main", "served_address"]

DEFAULT_PORT = 8080
_WILDCARDS = {"0.0.0.0", "::", "", "[::]"}  # noqa: S104 - names, not a bind


def served_address(cmdline: Sequence[str], env: Mapping[str, str]) -> tuple[str, int]:
    """The host and port ``broker serve`` listens on, given its argv and environment."""
    host, port = "127.0.0.1", int(env.get("PORT") or DEFAULT_PORT)
    for i, arg in enumerate(cmdline):
        name, eq, value = arg.partition("=")
        if not eq:
            value = cmdline[i + 1] if i + 1 < len(cmdline) else ""
        if name == "--port" and value.isdigit():
            port = int(value)
        elif name == "--host" and value:
            host = value
    return ("127.0.0.1" if host in _WILDCARDS else host), port


def livez_url(host: str, port: int) -> str:
    bracketed = f"[{host}]" if ":" in host else host
    return f"http://{bracketed}:{port}/livez"


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m broker.healthcheck", description=__doc__)
    parser.add_argument("--pid", type=int, default=1, help="the serving process (default 1)")
    parser.add_argument("--timeout", type=float, default=2.0, help="seconds (default 2)")
    args = parser.parse_args(argv)
    url = livez_url(*served_address(_cmdline(args.pid), os.environ))
    try:
        with urllib.request.urlopen(url, timeout=args.timeout) as answer:  # noqa: S310 - loopback
            status = int(answer.status)
    except (OSError, urllib.error.URLError) as exc:
        print(f"unhealthy: {url}: {exc}", file=sys.stderr)
        return 1
    if status != 200:
        print(f"unhealthy: {url} answered {status}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
