"""``broker serve`` on state it cannot trust: one clear line and a non-zero exit, or a verdict in
``/readyz``. Real processes, each on a Redis of its own (persistent, volatile, or refusing
``CONFIG``), so nothing here depends on how the machine's shared Redis is configured."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.procs import (
    REDIS_SERVER,
    ROOT,
    Launcher,
    PrivateRedis,
    free_port,
    launcher_for,
    redis_reachable,
)

pytestmark = pytest.mark.skipif(not shutil.which(REDIS_SERVER), reason="no redis-server")


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    yield from launcher_for(tmp_path)


class ConfiglessRedis(PrivateRedis):
    """A Redis whose ``CONFIG`` is renamed away, as managed services and ACLs often do."""

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        # fmt: off
        command = [
            REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--dir",
            str(self.workdir), "--save", "", "--appendonly", "yes",
            "--rename-command", "CONFIG", "",
        ]
        # fmt: on
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not redis_reachable(self.url) and self.proc.poll() is None:
            assert time.monotonic() < deadline, "no redis-server"
            time.sleep(0.02)


@pytest.fixture
def redis_servers(tmp_path: Path) -> Iterator[list[PrivateRedis]]:
    started: list[PrivateRedis] = []
    yield started
    for server in started:
        server.stop()


def _redis(servers: list[PrivateRedis], server: PrivateRedis) -> PrivateRedis:
    """Start ``server``; on a port another test's Redis took meanwhile, again on a fresh one."""
    for _ in range(5):
        server.start()
        servers.append(server)
        if _answers_itself(server):
            return server
        server.stop()
        server.port = free_port()
        server.url = f"redis://127.0.0.1:{server.port}/0"
    raise RuntimeError("no free port for a private redis-server")


def _answers_itself(server: PrivateRedis) -> bool:
    """Whether the Redis on ``server``'s port is its own process (ports are picked, then bound:
    another test's redis-server can take one in between)."""
    assert server.proc is not None
    if server.proc.poll() is not None:
        return False
    with server.client() as client:
        info = client.info("server")
    return bool(info.get("process_id") == server.proc.pid)


def _serve(config: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "broker", "serve", "--config", str(config)]
    command += ["--port", str(free_port())]
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}  # the config names its Redis
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=30)


def _volatile_config(launcher: Launcher, url: str, *, allow: bool | None) -> Path:
    def edit(data: dict[str, Any]) -> None:
        if allow is None:
            del data["service"]["allow_volatile_redis"]
        else:
            data["service"]["allow_volatile_redis"] = allow

    return launcher.config(redis_url=url, shared_numbers=False, edit=edit).config_path


async def _readyz(url: str) -> tuple[int, dict[str, Any]]:
    async with httpx.AsyncClient(timeout=10) as http:
        answer = await http.get(url + "/readyz")
    body: dict[str, Any] = answer.json()
    return answer.status_code, body


def test_a_redis_without_persistence_is_refused_in_one_line(
    launcher: Launcher, redis_servers: list[PrivateRedis], tmp_path: Path
) -> None:
    volatile = _redis(redis_servers, PrivateRedis(tmp_path / "volatile", persistent=False))
    refused = _serve(_volatile_config(launcher, volatile.url, allow=None))
    assert refused.returncode == 1, refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1, refused.stderr
    assert lines[0].startswith("refusing to start: Redis has no persistence"), lines
    assert "allow_volatile_redis = true" in lines[0]
    assert "Traceback" not in refused.stderr


def test_a_redis_that_forbids_config_is_refused_too(
    launcher: Launcher, redis_servers: list[PrivateRedis], tmp_path: Path
) -> None:
    silent = _redis(redis_servers, ConfiglessRedis(tmp_path / "configless"))
    refused = _serve(_volatile_config(launcher, silent.url, allow=False))
    assert refused.returncode == 1, refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert "could not read the Redis configuration" in line
    assert "allow_volatile_redis = true" in line


async def test_an_accepted_volatile_redis_serves_and_readyz_says_so(
    launcher: Launcher, redis_servers: list[PrivateRedis], tmp_path: Path
) -> None:
    volatile = _redis(redis_servers, PrivateRedis(tmp_path / "volatile", persistent=False))
    setup = launcher.config(redis_url=volatile.url, shared_numbers=False)
    (broker,) = launcher.start(setup, 1)
    status, body = await _readyz(broker.url)
    assert status == 200, body
    assert body["checks"]["redis_durability"] == "volatile_allowed"
    assert "no persistence" in broker.log_tail()


async def test_a_persistent_noeviction_redis_is_ok(
    launcher: Launcher, redis_servers: list[PrivateRedis], tmp_path: Path
) -> None:
    durable = _redis(redis_servers, PrivateRedis(tmp_path / "durable", persistent=True))
    (broker,) = launcher.start(_setup_without_flag(launcher, durable.url), 1)
    status, body = await _readyz(broker.url)
    assert status == 200, body
    assert body["checks"]["redis_durability"] == "ok"


def _setup_without_flag(launcher: Launcher, url: str) -> Any:
    def edit(data: dict[str, Any]) -> None:
        del data["service"]["allow_volatile_redis"]

    return launcher.config(redis_url=url, shared_numbers=False, edit=edit)


def test_a_data_directory_that_cannot_be_written_is_one_line(
    launcher: Launcher, tmp_path: Path
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the data directory should be\n", encoding="utf-8")

    def edit(data: dict[str, Any]) -> None:
        service = data["service"]
        del service["redis_url"]
        service["store"] = "memory"
        service["ledger_key_path"] = str(blocker / "ledger-key.pem")

    refused = _serve(launcher.config(shared_numbers=False, edit=edit).config_path)
    assert refused.returncode == 1, refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith(f"refusing to start: cannot write the data directory: {blocker}")
    assert "Traceback" not in refused.stderr


async def test_a_redis_outage_is_logged_once_a_minute_not_every_poll(
    launcher: Launcher, redis_servers: list[PrivateRedis], tmp_path: Path
) -> None:
    redis = _redis(redis_servers, PrivateRedis(tmp_path / "outage", persistent=False))

    def fast_polls(data: dict[str, Any]) -> None:
        data["service"]["registry_poll_s"] = 0.1

    setup = launcher.config(redis_url=redis.url, shared_numbers=False, edit=fast_polls)
    (broker,) = launcher.start(setup, 1)
    redis.stop()
    # About 20 polls fail in two seconds; the log says so once.
    time.sleep(2.0)
    assert broker.alive()
    assert broker.log_tail(100_000).count("cannot follow registered tools") == 1, broker.log_tail()
