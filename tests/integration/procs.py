"""Real broker processes for multi-process tests: configs on disk, start, wait, stop, count effects.

Every broker here is ``python -m broker serve --config FILE --port P``, a separate OS process that
shares nothing with the test but Redis and the demo backend's effects file (one JSON line per
ticket or credit, with its idempotency key: the ground truth of what executed, across processes).

The config is ``deploy/demo.toml`` read with ``tomllib``, adjusted, and written back with a tiny
TOML writer, so the tests follow the demo as it changes. Each config gets its own Redis
``key_prefix``; :class:`Launcher` deletes exactly those keys afterwards (``SCAN MATCH``), never
anything else.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar, overload

import httpx
from redis import Redis

from tests.conftest import ORDER_CURRENCY
from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
DEMO_CONFIG = ROOT / "deploy" / "demo.toml"
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"

BILLING = {"Authorization": "Bearer demo-billing-token"}
GLOBEX = {"Authorization": "Bearer demo-globex-token"}
ADMIN = {"Authorization": "Bearer demo-admin-token"}

T = TypeVar("T")

START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 5.0

__all__ = [
    "ADMIN",
    "BILLING",
    "GLOBEX",
    "REDIS_SERVER",
    "REDIS_URL",
    "BrokerProcess",
    "Launcher",
    "PrivateRedis",
    "Setup",
    "audit_report",
    "credit",
    "delete_prefix",
    "eventually",
    "free_port",
    "launcher_for",
    "redis_reachable",
    "retry_after",
    "start_brokers",
    "ticket",
    "toml_dumps",
    "write_config",
]


# -- small things ---------------------------------------------------------------------------------


@overload
async def eventually(
    condition: Callable[[], Awaitable[T]],
    *,
    timeout_s: float,
    interval_s: float = ...,
    what: str = ...,
) -> T: ...


@overload
async def eventually(
    condition: Callable[[], T], *, timeout_s: float, interval_s: float = ..., what: str = ...
) -> T: ...


async def eventually(
    condition: Callable[[], Any],
    *,
    timeout_s: float,
    interval_s: float = 0.02,
    what: str = "",
) -> Any:
    """Evaluate (and await) ``condition`` until it is truthy; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up after {timeout_s:g}s waiting for {what or condition}")
        await asyncio.sleep(interval_s)


def retry_after(response: httpx.Response) -> int:
    """The ``Retry-After`` header as whole seconds, asserting it is there and sensible."""
    value = response.headers.get("retry-after")
    assert value is not None, f"no Retry-After on {response.status_code}: {response.text}"
    assert value.isdigit() and int(value) >= 1, value
    return int(value)


def credit(key: str, amount: float = 1, order: str = "O-55300") -> dict[str, Any]:
    return {
        "tool": "issue_credit",
        "args": {"order_id": order, "amount": amount, "currency": ORDER_CURRENCY.get(order, "USD")},
        "preconditions": ["order_paid", "within_return_window"],
        "idempotency_key": key,
    }


def ticket(key: str, customer: str = "C-10429") -> dict[str, Any]:
    return {
        "tool": "create_support_ticket",
        "args": {"customer_id": customer, "subject": "Billing discrepancy", "priority": "high"},
        "preconditions": ["customer_verified", "open_invoice_present"],
        "idempotency_key": key,
    }


async def audit_report(client: httpx.AsyncClient, broker: BrokerProcess) -> dict[str, Any]:
    """``GET /v1/audit/verify`` on one broker (admin): the whole ledger chain, as it sees it."""
    answer = await client.get(broker.url + "/v1/audit/verify", headers=ADMIN)
    assert answer.status_code == 200, answer.text
    report: dict[str, Any] = answer.json()
    return report


# -- TOML -----------------------------------------------------------------------------------------

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(name: str) -> str:
    return name if _BARE_KEY.match(name) else json.dumps(name)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def toml_dumps(data: dict[str, Any]) -> str:
    """Top-level tables as ``[name]`` sections, everything below them inline (enough for configs)."""
    lines = [f"{_key(k)} = {_value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    for name, table in data.items():
        if isinstance(table, dict):
            lines.append(f"\n[{_key(name)}]")
            lines += [f"{_key(k)} = {_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


# -- configs --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setup:
    """One written config: where it is, its Redis, its key prefix and its effects file."""

    config_path: Path
    redis_url: str
    prefix: str
    effects_path: Path

    def effects(self) -> list[dict[str, Any]]:
        if not self.effects_path.exists():
            return []
        lines = self.effects_path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def effects_per_key(self) -> Counter[tuple[str, str | None]]:
        """How often each ``(tenant, idempotency_key)`` executed."""
        return Counter((e["tenant"], e["idempotency_key"]) for e in self.effects())


def write_config(
    directory: Path,
    *,
    redis_url: str,
    prefix: str | None = None,
    latency_s: float = 0.0,
    lease_margin_s: float | None = None,
    credit_rate_limit: int | None = None,
    credit_budget: int | None = None,
    tool_timeouts: dict[str, float] | None = None,
    edit: Callable[[dict[str, Any]], None] | None = None,
    shared_numbers: bool = True,
) -> Setup:
    """Write the demo config, adjusted, to ``directory/<prefix>.toml``.

    Args:
        redis_url: ``[service] redis_url`` (the child's ``REDIS_URL`` is removed, so this wins).
        prefix: the Redis key prefix; a fresh unique one when omitted.
        latency_s: the demo backend's delay on every effectful call.
        lease_margin_s: added to a tool's timeout to make its idempotency lease.
        credit_rate_limit: ``rate_limits.credit_calls.limit``.
        credit_budget: ``budgets.credits_per_day.limit``.
        tool_timeouts: ``tools.<name>.timeout_s``.
        edit: a last change to the parsed config dict.
        shared_numbers: the demo backend numbers tickets and credits through Redis (distinct
            ids across processes); off where Redis is meant to fail under the broker only.
    """
    prefix = prefix or f"itest-{uuid.uuid4().hex[:12]}"
    directory.mkdir(parents=True, exist_ok=True)
    effects = directory / f"{prefix}.effects.jsonl"
    with DEMO_CONFIG.open("rb") as fh:
        data = tomllib.load(fh)
    service = data.setdefault("service", {})
    service.update(
        redis_url=redis_url,
        key_prefix=prefix,
        ledger_path=str(directory / f"{prefix}.ledger.jsonl"),
        ledger_key_path=str(directory / f"{prefix}.ledger-key.pem"),
        # This machine's Redis keeps nothing on disk; tests that need a durable one say so.
        allow_volatile_redis=True,
    )
    if lease_margin_s is not None:
        service["lease_margin_s"] = lease_margin_s
    options: dict[str, Any] = {"latency_s": latency_s, "effects_path": str(effects)}
    if shared_numbers:
        # Ticket/credit numbers from Redis, under the prefix so cleanup removes them.
        options.update(redis_url=redis_url, numbers_key=f"{prefix}:demo-numbers")
    data["backends"]["demo"]["options"] = options
    if credit_rate_limit is not None:
        data["rate_limits"]["credit_calls"]["limit"] = credit_rate_limit
    if credit_budget is not None:
        data["budgets"]["credits_per_day"]["limit"] = credit_budget
    for tool, timeout_s in (tool_timeouts or {}).items():
        data["tools"][tool]["timeout_s"] = timeout_s
    if edit is not None:
        edit(data)
    path = directory / f"{prefix}.toml"
    path.write_text(toml_dumps(data), encoding="utf-8")
    return Setup(path, redis_url, prefix, effects)


# -- broker processes -----------------------------------------------------------------------------


@dataclass
class BrokerProcess:
    """One ``python -m broker serve`` child on a loopback port."""

    port: int
    proc: subprocess.Popen[bytes]
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")[-chars:]
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL, no goodbye: what a crashed or OOM-killed process looks like."""
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=STOP_TIMEOUT_S)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it has not gone within the timeout."""
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=STOP_TIMEOUT_S)

    def ready(self, http: httpx.Client) -> bool:
        try:
            return http.get(self.url + "/livez").status_code == 200
        except httpx.HTTPError:
            return False


def _spawn(
    config_path: Path,
    log_dir: Path,
    *,
    cpus: str | None = None,
    env: dict[str, str] | None = None,
    taken: set[int] | None = None,
) -> BrokerProcess:
    port = free_port()
    # Ports are picked by binding to 0 and closing: two picks in a row can get the same one, and
    # the second broker would then fail to bind while the first answered its readiness check.
    while taken is not None and port in taken:
        port = free_port()
    if taken is not None:
        taken.add(port)
    log_path = log_dir / f"broker-{port}.log"
    child_env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    child_env["PYTHONUNBUFFERED"] = "1"
    child_env.update(env or {})
    command = [sys.executable, "-m", "broker", "serve", "--config", str(config_path)]
    command += ["--port", str(port)]
    if cpus is not None and shutil.which("taskset"):
        command = ["taskset", "-c", cpus, *command]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            command, cwd=ROOT, env=child_env, stdout=log, stderr=subprocess.STDOUT
        )
    return BrokerProcess(port, proc, log_path)


def start_brokers(
    config_path: Path,
    n: int,
    log_dir: Path,
    *,
    cpus: str | None = None,
    env: dict[str, str] | None = None,
) -> list[BrokerProcess]:
    """Start ``n`` brokers on one config (in parallel) and wait until each answers ``/livez``."""
    log_dir.mkdir(parents=True, exist_ok=True)
    taken: set[int] = set()
    started = [_spawn(config_path, log_dir, cpus=cpus, env=env, taken=taken) for _ in range(n)]
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        # One client for every poll: a client builds a TLS context when it is made, tens of
        # milliseconds of CPU that a client per poll would take from the starting brokers.
        with httpx.Client(timeout=0.5) as http:
            for broker in started:
                while not broker.ready(http):
                    if not broker.alive() or time.monotonic() > deadline:
                        raise RuntimeError(
                            f"broker on port {broker.port} did not start "
                            f"(exit {broker.proc.poll()}):\n{broker.log_tail()}"
                        )
                    time.sleep(0.02)
    except BaseException:
        for broker in started:
            broker.stop()
        raise
    return started


# -- Redis ----------------------------------------------------------------------------------------


def redis_reachable(url: str) -> bool:
    try:
        with Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1) as client:
            return bool(client.ping())
    except Exception:
        return False


def delete_prefix(url: str, prefix: str) -> int:
    """Delete the keys under ``prefix:`` (SCAN MATCH, batched); never anything else."""
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
    """A redis-server owned by one test: restartable on its port, with or without an AOF.

    ``persistent=True`` runs ``--appendonly yes --appendfsync always`` in ``workdir``, so every
    acknowledged write survives a stop and restart (what a production deployment must do).
    """

    def __init__(self, workdir: Path, *, persistent: bool = True) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.workdir = workdir
        self.persistent = persistent
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        persistence = ["--appendonly", "no", "--save", ""]
        if self.persistent:
            persistence = ["--appendonly", "yes", "--appendfsync", "always", "--save", ""]
        # fmt: off
        command = [
            REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--dir",
            str(self.workdir), "--daemonize", "no", "--maxmemory-policy", "noeviction",
            "--logfile", str(self.workdir / "redis.log"), *persistence,
        ]
        # fmt: on
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not redis_reachable(self.url):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server on port {self.port} did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        """SIGTERM (Redis flushes its AOF and exits), SIGKILL after a timeout."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc.wait(timeout=STOP_TIMEOUT_S)
        self.proc = None

    def client(self) -> Redis:
        return Redis.from_url(self.url, socket_timeout=5, socket_connect_timeout=2)


# -- the fixture body ----------------------------------------------------------------------------


@dataclass
class Launcher:
    """Writes configs and starts brokers for one test; stops them and deletes its Redis keys."""

    workdir: Path
    processes: list[BrokerProcess] = field(default_factory=list)
    setups: list[Setup] = field(default_factory=list)

    def config(self, **kwargs: Any) -> Setup:
        kwargs.setdefault("redis_url", REDIS_URL)
        setup = write_config(self.workdir, **kwargs)
        self.setups.append(setup)
        return setup

    def start(
        self, setup: Setup, n: int = 2, *, env: dict[str, str] | None = None
    ) -> list[BrokerProcess]:
        brokers = start_brokers(setup.config_path, n, self.workdir / "logs", env=env)
        self.processes += brokers
        return brokers

    def logs(self) -> str:
        return "\n".join(f"--- {p.port}\n{p.log_tail()}" for p in self.processes)

    def close(self) -> None:
        for process in self.processes:
            process.stop()
        for setup in self.setups:
            if redis_reachable(setup.redis_url):
                delete_prefix(setup.redis_url, setup.prefix)

    def __enter__(self) -> Launcher:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def launcher_for(workdir: Path) -> Iterator[Launcher]:
    """The body of a ``launcher`` fixture: ``yield from launcher_for(tmp_path)``."""
    with Launcher(workdir) as launcher:
        yield launcher
