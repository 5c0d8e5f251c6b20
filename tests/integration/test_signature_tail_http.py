"""A broker whose checkpoints cannot be written shows its growing signature tail on /metrics,
and the tail drops to 0 with the first checkpoint that succeeds again."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path

import httpx
import msgspec

from broker.config import BrokerConfig
from broker.ledger import checkpoint_path_for
from broker.plugins import Backend
from tests.conftest import BILLING, credit
from tests.integration.test_metrics_http import count

GAUGE = "broker_ledger_unsigned_records"


async def gauge_reaches(client: httpx.AsyncClient, value: float, within_s: float = 10) -> float:
    """The gauge once it reads ``value``, or its last reading after ``within_s``."""
    seen = -1.0
    for _ in range(int(within_s / 0.05)):
        seen = count((await client.get("/metrics")).text, GAUGE)
        if seen == value:
            break
        await asyncio.sleep(0.05)
    return seen


async def test_unsigned_records_grow_while_checkpoints_fail(
    make_broker: Callable[..., tuple[str, Mapping[str, Backend]]],
    demo_config: BrokerConfig,
    tmp_path: Path,
) -> None:
    service = msgspec.structs.replace(demo_config.service, checkpoint_interval_s=0.05)
    url, _ = make_broker(msgspec.structs.replace(demo_config, service=service))
    # A directory where the checkpoint file goes: every checkpoint write fails.
    blocker = checkpoint_path_for(tmp_path / "ledger.jsonl")
    blocker.unlink(missing_ok=True)
    blocker.mkdir()
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        for n in range(3):
            answer = await client.post("/v1/proposals", json=credit(f"k{n}"), headers=BILLING)
            assert answer.status_code == 200
        assert await gauge_reaches(client, 3) == 3  # one ledger record per proposal
        await client.post("/v1/proposals", json={"tool": "nope", "args": {}}, headers=BILLING)
        assert await gauge_reaches(client, 4) == 4  # refusals are records too

        blocker.rmdir()
        assert await gauge_reaches(client, 0) == 0
