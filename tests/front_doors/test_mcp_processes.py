"""``/mcp`` with Redis behind several broker processes: a registration made through one process
reaches an MCP session held by another (``notifications/tools/list_changed``), and the new tool is
callable there through the whole chain."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest

from tests.front_doors.test_mcp_server import mcp_session
from tests.integration.procs import ADMIN, REDIS_URL, Launcher, launcher_for, redis_reachable
from tests.loopback import LoopbackBackend, running
from tests.redis_helpers import missing_redis
from tests.registrations import registration

pytestmark = pytest.mark.redis


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    if not redis_reachable(REDIS_URL):
        missing_redis(f"no Redis at {REDIS_URL}")
    yield from launcher_for(tmp_path)


def _open_to_loopback(data: dict[str, Any]) -> None:
    data["service"]["http_allowlist"] = ["http://127.0.0.1:*"]


async def test_a_registration_through_one_process_reaches_a_session_on_another(
    launcher: Launcher,
) -> None:
    loopback = LoopbackBackend()
    setup = launcher.config(edit=_open_to_loopback)
    a, b = launcher.start(setup, 2)
    changed = asyncio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    with running(loopback) as backend_url:
        body = registration("billing.refund", backend_url + "/tools/refund")
        async with mcp_session(b.url, "demo-billing-token", on_message) as session:
            before = {tool.name for tool in (await session.list_tools()).tools}
            await asyncio.sleep(0.2)  # the client's GET stream for notifications opens
            async with httpx.AsyncClient(timeout=10) as http:
                created = await http.post(a.url + "/v1/tools", json=body, headers=ADMIN)
            assert created.status_code == 201, created.text
            loopback.secrets["/tools/refund"] = created.json()["signing_secret"]
            await asyncio.wait_for(changed.wait(), timeout=10)
            after = {tool.name for tool in (await session.list_tools()).tools}
            called = await session.call_tool(
                "billing.refund", {"payment_id": "P-1", "idempotency_key": "refund-P-1"}
            )
    assert "billing.refund" not in before and "billing.refund" in after
    assert isinstance(called, types.CallToolResult) and not called.is_error, called
    assert not loopback.refused
    assert len(loopback.hits_on("/tools/refund")) == 1
