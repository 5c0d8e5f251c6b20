"""``broker resolve``, run as a subprocess the way an operator runs it, against a broker over HTTP."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping

import httpx
import pytest

from broker.plugins import Backend
from tests.fakes import FAKE, FakeBackend, SleepRecorder
from tests.integration.test_resolution_http import ADMIN, _config, hang, unknown_outcome

ADMIN_TOKEN = ADMIN["Authorization"].removeprefix("Bearer ")

MakeBroker = Callable[..., tuple[str, Mapping[str, Backend]]]


def resolve(url: str, *options: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ONCALL_TOKEN": token or ADMIN_TOKEN}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "broker",
            "resolve",
            "--url",
            url,
            "--token-env",
            "ONCALL_TOKEN",
            "--tenant",
            "acme",
            "--route",
            "ops",
            "--tool",
            "hang",
            "--args",
            '{"n": 1}',
            *options,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


@pytest.fixture
def started(make_broker: MakeBroker) -> tuple[str, FakeBackend]:
    fake = FakeBackend()
    url, _ = make_broker(_config(), backends={"fake": fake}, sleep=SleepRecorder())
    return url, fake


async def test_resolve_succeeded_from_the_command_line(started: tuple[str, FakeBackend]) -> None:
    url, fake = started
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        await unknown_outcome(client, hang("cli-1"))
        done = resolve(url, "--key", "cli-1", "--outcome", "succeeded", "--result", '{"id": 7}')
        assert done.returncode == 0, done.stderr
        assert '"resolved_by":"admin:oncall"' in done.stdout
        replay = await client.post("/v1/proposals", json=hang("cli-1"), headers=FAKE)
        assert replay.json()["execution"]["result"] == {"id": 7}
    assert fake.count("hang") == 1


async def test_a_refusal_exits_1_with_the_problem(started: tuple[str, FakeBackend]) -> None:
    url, _ = started
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        await unknown_outcome(client, hang("cli-2"))
        refused = resolve(url, "--key", "cli-2", "--outcome", "succeeded")  # no --result
        assert refused.returncode == 1
        assert '"path":"/result"' in refused.stderr
        wrong = resolve(url, "--key", "cli-2", "--outcome", "not_executed", token="nope")
        assert wrong.returncode == 1
        assert "unauthenticated" in wrong.stderr
        still = await client.post("/v1/proposals", json=hang("cli-2"), headers=FAKE)
        assert still.json()["code"] == "outcome_unknown"
        released = resolve(url, "--key", "cli-2", "--outcome", "not_executed")
        assert released.returncode == 0, released.stderr
