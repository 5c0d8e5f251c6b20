"""The gateway's session state across processes: two ``python -m broker serve`` processes on one
Redis (a unique key prefix) serve one session. A result kept aside through one is viewed through
the other; a session's browse memory follows it from one process to the other."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.procs import REDIS_URL, Launcher, launcher_for, redis_reachable
from tests.redis_helpers import missing_redis

pytestmark = pytest.mark.redis

GATEWAY = {"Authorization": "Bearer demo-gateway-token"}


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    if not redis_reachable(REDIS_URL):
        missing_redis(f"no Redis at {REDIS_URL}")
    yield from launcher_for(tmp_path)


def _with_big_report(data: dict[str, Any]) -> None:
    """The demo, and one more tool on gateway_billing whose result is far over the inline bound."""
    data["backends"]["report"] = {"factory": "tests.gateway_catalog:create_backend"}
    data["tools"]["big_report"] = {
        "description": "Build the big report of every row.",
        "risk": "read",
        "idempotent": True,
        "input_schema": {"type": "object", "additionalProperties": False, "properties": {}},
        "adapter": {"kind": "python", "backend": "report", "operation": "big"},
        "timeout_s": 5.0,
    }
    data["routes"]["gateway_billing"]["tools"].append("big_report")


async def meta(
    http: httpx.AsyncClient, url: str, name: str, args: dict[str, Any], session_id: str
) -> Any:
    call = {"id": f"{name}-{session_id}", "type": "function"}
    call["function"] = {"name": name, "arguments": json.dumps(args)}
    answer = await http.post(
        url + "/v1/tool-calls",
        json={"format": "openai", "calls": [call], "session_id": session_id},
        headers=GATEWAY,
    )
    assert answer.status_code == 200, answer.text
    return json.loads(answer.json()["results"][0]["content"])


async def test_a_result_kept_through_one_process_is_viewed_through_another(
    launcher: Launcher,
) -> None:
    a, b = launcher.start(launcher.config(edit=_with_big_report), 2)
    async with httpx.AsyncClient(timeout=30) as http:
        found = await meta(http, a.url, "tool_browse", {"query": "big report"}, "s-1")
        tool_id = next(c["id"] for c in found["cards"] if c["name"] == "big_report")
        kept = await meta(http, a.url, "tool_execute", {"tool_id": tool_id, "args": {}}, "s-1")
        handle = kept["kept_aside"]["handle"]
        view = {"handle": handle, "selector": "/rows[3:5]"}
        part = await meta(http, b.url, "tool_view", view, "s-1")
        assert [row["id"] for row in part["value"]] == [3, 4], launcher.logs()
        other = await meta(http, b.url, "tool_view", view, "s-2")
        assert other["error"] == "HANDLE_NOT_FOUND"


async def test_a_sessions_browse_memory_follows_it_across_processes(launcher: Launcher) -> None:
    a, b = launcher.start(launcher.config(), 2)
    async with httpx.AsyncClient(timeout=30) as http:
        first = await meta(http, a.url, "tool_browse", {"query": "credit"}, "s-mem")
        assert first["cards"] and all(c["id"] != "__cache_breakpoint__" for c in first["cards"])
        second = await meta(http, b.url, "tool_browse", {"query": "order ticket credit"}, "s-mem")
        ids = [card["id"] for card in second["cards"]]
        assert "__cache_breakpoint__" in ids, (ids, launcher.logs())
        assert ids[0] == first["cards"][0]["id"]  # the card seen through the other process
        fresh = await meta(http, b.url, "tool_browse", {"query": "order ticket credit"}, "s-new")
        assert "__cache_breakpoint__" not in [card["id"] for card in fresh["cards"]]
