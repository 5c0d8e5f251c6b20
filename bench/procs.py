"""Real processes for the benchmarks: broker servers on one config, a private redis-server, and
the Redis housekeeping around them (reachable?, delete a run's keys).

The config is ``deploy/demo.toml`` with the benchmark's Redis, key prefix and scratch paths
written in, so a benchmark measures the demo as it is.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from redis import Redis

from bench.loadgen import free_port

ROOT = Path(__file__).resolve().parent.parent
DEMO_CONFIG = ROOT / "deploy" / "demo.toml"
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")

__all__ = [
    "REDIS_URL",
    "BrokerProcess",
    "PrivateRedis",
    "delete_prefix",
    "redis_reachable",
    "start_brokers",
    "write_config",
]


def write_config(
    directory: Path, *, redis_url: str, prefix: str, service: Mapping[str, Any] | None = None
) -> Path:
    """The demo config on ``redis_url`` under ``prefix`` (``service`` keys added), as TOML."""
    directory.mkdir(parents=True, exist_ok=True)
    with DEMO_CONFIG.open("rb") as fh:
        data = tomllib.load(fh)
    data["service"].update(
        redis_url=redis_url,
        key_prefix=prefix,
        ledger_path=str(directory / f"{prefix}.ledger.jsonl"),
        ledger_key_path=str(directory / f"{prefix}.ledger-key.pem"),
        allow_volatile_redis=True,  # benchmarks price the broker, whatever Redis keeps on disk
        **(service or {}),
    )
    # The demo backend numbers tickets through Redis (distinct across processes), under the
    # prefix so that the cleanup removes them too.
    demo = data["backends"]["demo"]
    demo["options"] = {**demo.get("options", {}), "redis_url": redis_url,
                       "numbers_key": f"{prefix}:demo-numbers"}  # fmt: skip
    path = directory / f"{prefix}.toml"
    path.write_text(_toml(data), encoding="utf-8")
    return path


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _toml(data: dict[str, Any]) -> str:
    """Top-level tables as ``[name]`` sections, everything below them inline: enough for the
    demo config (the standard library reads TOML but does not write it)."""

    def key(name: str) -> str:
        return name if _BARE_KEY.match(name) else json.dumps(name)

    def value(item: Any) -> str:
        if isinstance(item, bool):
            return "true" if item else "false"
        if isinstance(item, int | float):
            return repr(item)
        if isinstance(item, str):
            return json.dumps(item)  # a JSON string is a valid TOML basic string
        if isinstance(item, list):
            return "[" + ", ".join(value(x) for x in item) + "]"
        if isinstance(item, dict):
            return "{" + ", ".join(f"{key(k)} = {value(v)}" for k, v in item.items()) + "}"
        raise TypeError(f"cannot write {type(item).__name__} as TOML")

    lines = [f"{key(k)} = {value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    for name, table in data.items():
        if isinstance(table, dict):
            lines.append(f"\n[{key(name)}]")
            lines += [f"{key(k)} = {value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


@dataclass
class BrokerProcess:
    """One ``python -m broker serve`` child on a loopback port."""

    port: int
    proc: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc.wait(timeout=10)


def start_brokers(
    config: Path, n: int, log_dir: Path, *, cpus: str | None = None
) -> list[BrokerProcess]:
    """``n`` brokers on ``config`` (pinned to ``cpus`` if given), each answering ``/livez``."""
    log_dir.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}  # the config's Redis wins
    brokers: list[BrokerProcess] = []
    for _ in range(n):
        port = free_port()
        command = [sys.executable, "-m", "broker", "serve", "--config", str(config)]
        command += ["--port", str(port)]
        if cpus is not None and shutil.which("taskset"):
            command = ["taskset", "-c", cpus, *command]
        with (log_dir / f"broker-{port}.log").open("wb") as log:
            proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=log)
        brokers.append(BrokerProcess(port, proc))
    deadline = time.monotonic() + 20
    try:
        for broker in brokers:
            while not _live(broker):
                if broker.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the broker on port {broker.port} did not start")
                time.sleep(0.05)
    except BaseException:
        for broker in brokers:
            broker.stop()
        raise
    return brokers


def _live(broker: BrokerProcess) -> bool:
    try:
        return httpx.get(broker.url + "/livez", timeout=0.5).status_code == 200
    except httpx.HTTPError:
        return False


def redis_reachable(url: str) -> bool:
    try:
        with Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1) as client:
            return bool(client.ping())
    except Exception:
        return False


def delete_prefix(url: str, prefix: str) -> int:
    """Delete the keys under ``prefix:`` (SCAN MATCH, in batches); never anything else."""
    deleted = 0
    with Redis.from_url(url, socket_timeout=5, socket_connect_timeout=2) as client:
        batch: list[bytes] = []
        for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            batch.append(key)
            if len(batch) >= 500:
                deleted += int(client.delete(*batch))
                batch.clear()
        if batch:
            deleted += int(client.delete(*batch))
    return deleted


class PrivateRedis:
    """A throwaway redis-server (no persistence) on a free port, for counting commands that
    nobody else sends."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        # fmt: off
        command = [
            shutil.which("redis-server") or "redis-server", "--port", str(self.port),
            "--bind", "127.0.0.1", "--dir", str(self.workdir), "--save", "",
            "--appendonly", "no", "--logfile", str(self.workdir / "redis.log"),
        ]
        # fmt: on
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not redis_reachable(self.url):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server on port {self.port} did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.proc = None
