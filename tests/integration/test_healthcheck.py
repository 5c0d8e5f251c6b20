"""The image's health check (``python -m broker.healthcheck``) against a real ``broker serve``
on a port that is not 8080: it follows the served port, read from the server's command line."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.healthcheck import livez_url, served_address
from tests.integration.procs import ROOT, BrokerProcess, Launcher, launcher_for


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    yield from launcher_for(tmp_path)


def _embedded(data: dict[str, Any]) -> None:
    del data["service"]["redis_url"]


def _healthcheck(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "broker.healthcheck", *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=30, env=env)


def test_it_asks_the_port_the_server_was_started_on(launcher: Launcher) -> None:
    (broker,) = launcher.start(launcher.config(edit=_embedded, shared_numbers=False), 1)
    assert broker.port != 8080
    healthy = _healthcheck("--pid", str(broker.proc.pid))
    assert healthy.returncode == 0, healthy.stderr

    broker.stop()
    down = _healthcheck("--pid", str(broker.proc.pid))
    assert down.returncode == 1
    (line,) = down.stderr.strip().splitlines()
    assert line.startswith("unhealthy: http://127.0.0.1:8080/livez")  # no process: the default


def test_a_process_started_through_taskset_or_with_equals_is_read_too(
    launcher: Launcher,
) -> None:
    (broker,) = launcher.start(launcher.config(edit=_embedded, shared_numbers=False), 1)
    argv = ["broker", "serve", "--config", "x.toml", "--host=0.0.0.0", f"--port={broker.port}"]
    assert served_address(argv, {}) == ("127.0.0.1", broker.port)
    _ask(broker)


def _ask(broker: BrokerProcess) -> None:
    assert _healthcheck("--pid", str(broker.proc.pid)).returncode == 0


def test_port_from_the_environment_then_the_default() -> None:
    assert served_address(["broker", "serve"], {"PORT": "9001"}) == ("127.0.0.1", 9001)
    assert served_address(["broker", "serve"], {}) == ("127.0.0.1", 8080)
    assert served_address(["serve", "--port", "7000"], {"PORT": "9001"}) == ("127.0.0.1", 7000)
    assert served_address(["serve", "--host", "::1", "--port", "7"], {}) == ("::1", 7)
    assert livez_url("::1", 7) == "http://[::1]:7/livez"
