"""Redis commands per proposal, by kind of outcome (``bench/bench_redis.py`` prints them).

``CONFIG RESETSTAT`` and ``INFO commandstats`` around a counted batch of each kind (approval,
replay, budget rejection, schema rejection), plus ``MONITOR`` to tell the commands a broker sends
(round trips) from those its Lua scripts run inside Redis. Run it on a Redis nobody else uses
(the counts would include their commands, and their stats would be reset).
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
from redis import Redis

from bench.bodies import HEADERS, credit, ticket
from bench.procs import BrokerProcess, delete_prefix, start_brokers, write_config

__all__ = ["count_commands"]

PROCESSES = 2

IGNORED = {"config|resetstat", "info", "echo", "monitor"}


class _Monitor(threading.Thread):
    """Collects every command Redis runs (``MONITOR``) until it sees ``ECHO <sentinel>``."""

    def __init__(self, url: str, sentinel: str) -> None:
        super().__init__(daemon=True)
        self.url, self.sentinel = url, sentinel
        self.commands: list[dict[str, Any]] = []
        self.ready = threading.Event()

    def run(self) -> None:
        with Redis.from_url(self.url, socket_timeout=30) as client, client.monitor() as monitor:
            self.ready.set()
            for command in monitor.listen():
                if self.sentinel in command["command"]:
                    return
                self.commands.append(command)


def _commandstats(client: Redis) -> Counter[str]:
    stats = client.info("commandstats")
    return Counter(
        {
            name.removeprefix("cmdstat_"): int(value["calls"])
            for name, value in stats.items()
            if name.removeprefix("cmdstat_") not in IGNORED
        }
    )


def _count_batch(
    url: str,
    http: httpx.Client,
    brokers: list[BrokerProcess],
    bodies: list[dict[str, Any]],
    expect: int,
) -> tuple[Counter[str], Counter[str], Counter[str]]:
    """Send ``bodies`` one by one (alternating processes); the Redis commands they cost."""
    sentinel = f"bench-end-{uuid.uuid4().hex}"
    with Redis.from_url(url, socket_timeout=5) as admin:
        admin.ping()  # connect (and HELLO) before MONITOR starts: only the brokers' commands count
        monitor = _Monitor(url, sentinel)
        monitor.start()
        if not monitor.ready.wait(5):
            raise RuntimeError("MONITOR did not start")
        admin.config_resetstat()
        for i, body in enumerate(bodies):
            url_i = brokers[i % len(brokers)].url + "/v1/proposals"
            answer = http.post(url_i, json=body, headers=HEADERS)
            if answer.status_code != expect:
                raise RuntimeError(f"expected {expect}, got {answer.status_code}: {answer.text}")
        stats = _commandstats(admin)
        admin.echo(sentinel)
        monitor.join(timeout=10)
    sent: Counter[str] = Counter()
    scripted: Counter[str] = Counter()
    for command in monitor.commands:
        name = command["command"].split(" ", 1)[0].strip('"').lower()
        if name in IGNORED or name == "config":
            continue
        (scripted if command["client_type"] == "lua" else sent)[name] += 1
    return stats, sent, scripted


def _per(counter: Counter[str], n: int) -> str:
    if not counter:
        return "-"
    return ", ".join(f"{name} {calls / n:.2f}" for name, calls in counter.most_common())


def count_commands(url: str, where: str, work: Path, n: int) -> None:
    """Print the Redis commands per request of each kind, two brokers on ``url``."""
    prefix = f"bench-cmds-{uuid.uuid4().hex[:10]}"
    config = write_config(work, redis_url=url, prefix=prefix)
    brokers = start_brokers(config, PROCESSES, work / "logs")
    try:
        with httpx.Client(timeout=10) as http:
            # warm: connections open, scripts loaded, the day's credit budget (500) spent
            for i, broker in enumerate(brokers):
                for body in (ticket(f"warm-{i}"), ticket(f"warm-{i}")):
                    http.post(broker.url + "/v1/proposals", json=body, headers=HEADERS)
            spend = credit("spend", 500)
            spent = http.post(brokers[0].url + "/v1/proposals", json=spend, headers=HEADERS)
            assert spent.status_code == 200, spent.text
            kinds = [
                ("approved (new key)", [ticket(f"new-{i}") for i in range(n)], 200),
                ("replay (same key)", [ticket(f"new-{i}") for i in range(n)], 200),
                ("budget rejection", [credit(f"over-{i}", 1) for i in range(n)], 429),
                (
                    "schema rejection",
                    [ticket(f"bad-{i}", priority="urgent") for i in range(n)],
                    422,
                ),
            ]
            print(f"\nRedis commands per request ({where}; {n} requests of each kind):")
            for name, bodies, expect in kinds:
                stats, sent, scripted = _count_batch(url, http, brokers, bodies, expect)
                total = sum(stats.values()) / n
                print(f"  {name:<19} {total:5.2f} commands  (INFO commandstats: {_per(stats, n)})")
                print(
                    f"  {'':<19} {sum(sent.values()) / n:5.2f} sent by the broker: {_per(sent, n)}"
                )
                print(
                    f"  {'':<19} {sum(scripted.values()) / n:5.2f} run inside Lua:     {_per(scripted, n)}"
                )
    finally:
        for broker in brokers:
            broker.stop()
        delete_prefix(url, prefix)
