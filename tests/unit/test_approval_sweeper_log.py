"""The approvals' sweeper with its store down: it keeps sweeping, and says so once a minute,
not at every sweep (a Redis outage would otherwise log one line per second per process)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from broker.api.shared import BrokerState
from broker.app import create_app
from broker.config import BrokerConfig
from broker.stores import MemoryStore
from broker.taxonomy import StoreUnavailableError
from tests.conftest import with_private_ledger


class DownStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.listed = 0

    async def list_approvals(self, status: str) -> list:  # type: ignore[override, type-arg]
        self.listed += 1
        raise StoreUnavailableError("redis is down")


async def test_a_store_outage_is_logged_once_while_every_sweep_is_tried(
    demo_config: BrokerConfig, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = DownStore()
    app = create_app(with_private_ledger(demo_config, tmp_path), store=store, secrets={})
    state: BrokerState = app.state.broker
    caplog.set_level(logging.WARNING, logger="broker.approvals")
    sweeper = asyncio.create_task(state.pipeline.approvals.run_sweeper(0.001))
    try:
        while store.listed < 20:
            await asyncio.sleep(0.001)
    finally:
        sweeper.cancel()
        await asyncio.gather(sweeper, return_exceptions=True)
    skipped = [r for r in caplog.records if "approval sweep skipped" in r.getMessage()]
    assert store.listed >= 20  # every sweep was tried
    assert len(skipped) == 1, [r.getMessage() for r in skipped]
