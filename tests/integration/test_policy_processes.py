"""Policy across two real broker processes on one Redis: a loop threshold counted across
processes never lets one call more through, and a sequence seen in one process holds in the other."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.policy_helpers import GUARDED, PROPOSALS, credit, lookup, session
from tests.integration.procs import REDIS_URL, Launcher, launcher_for, redis_reachable
from tests.redis_helpers import missing_redis

pytestmark = pytest.mark.redis

LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=100)


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    if not redis_reachable(REDIS_URL):
        missing_redis(f"no Redis at {REDIS_URL}")
    yield from launcher_for(tmp_path)


async def test_a_loop_threshold_across_processes_never_lets_one_more_through(
    launcher: Launcher,
) -> None:
    setup = launcher.config(latency_s=0.05)
    brokers = launcher.start(setup, 2)
    one = session()
    async with httpx.AsyncClient(timeout=20, limits=LIMITS) as client:
        answers = await asyncio.gather(
            *(
                client.post(brokers[i % 2].url + PROPOSALS, json=lookup(one), headers=GUARDED)
                for i in range(40)
            )
        )
        # a second burst, once the first is all in: still nothing more within the window
        later = await asyncio.gather(
            *(client.post(b.url + PROPOSALS, json=lookup(one), headers=GUARDED) for b in brokers)
        )
    statuses = Counter(a.status_code for a in answers)
    assert statuses == {200: 3, 409: 37}, (statuses, launcher.logs())
    for answer in [*answers, *later]:
        if answer.status_code == 409:
            body = answer.json()
            assert body["code"] == "policy_blocked"
            assert body["failed_check"] == {"kind": "policy", "name": "demo.loop_guard"}
    assert [a.status_code for a in later] == [409, 409]


async def test_a_lookup_through_one_process_lets_the_credit_through_the_other(
    launcher: Launcher,
) -> None:
    setup = launcher.config()
    first, second = launcher.start(setup, 2)
    one = session()
    async with httpx.AsyncClient(timeout=20) as client:
        refused = await client.post(second.url + PROPOSALS, json=credit(one, "p1"), headers=GUARDED)
        assert refused.status_code == 409, refused.text
        looked = await client.post(first.url + PROPOSALS, json=lookup(one), headers=GUARDED)
        assert looked.status_code == 200, looked.text
        done = await client.post(second.url + PROPOSALS, json=credit(one, "p2"), headers=GUARDED)
    assert done.status_code == 200, (done.text, launcher.logs())
    assert [e["idempotency_key"] for e in setup.effects()] == ["p2"]
