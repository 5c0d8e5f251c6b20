"""The ``after_send`` crash point of the Python and MCP adapters, on both stores, and a crashed
claim's budget charge given back: real broker processes, killed for real.

``after_send`` kills the process once the backend has run the call and before the broker reads
its result (``broker.faults``). Counted where the call ran (the demo backend's effects file, the
upstream MCP server's own counter), a non-idempotent tool's key ends ``outcome_unknown`` and is
never run again; an idempotent one's is released, the retry runs it once more, then replays.
The HTTP adapter's points: ``test_crash_points.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.plugins import Allowlist
from tests.integration.crashes import (
    MAYBE_RELEASED,
    TOOL_TIMEOUT_S,
    assert_ended,
    crash,
    crash_config,
    ledger_records,
    restart_and_retry,
    verify_ledger,
)
from tests.integration.procs import (
    REDIS_URL,
    Launcher,
    Setup,
    credit,
    launcher_for,
    redis_reachable,
)
from tests.integration.test_mcp_adapter import Upstream

# idempotent -> how the retry of a key crashed after its send ends, and what the completer did
AFTER_SEND = {False: ("outcome_unknown", "outcome_unknown"), True: ("executed", "released")}


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    yield from launcher_for(tmp_path)


@pytest.fixture(params=["sqlite", "redis"])
def store_kind(request: pytest.FixtureRequest) -> str:
    if request.param == "redis" and not redis_reachable(REDIS_URL):
        pytest.skip(f"no Redis at {REDIS_URL}")
    return str(request.param)


def _credits_config(launcher: Launcher, store_kind: str, *, idempotent: bool = False) -> Setup:
    def edit(data: dict[str, Any]) -> None:
        tool = data["tools"]["issue_credit"]
        tool["timeout_s"] = TOOL_TIMEOUT_S
        tool["idempotent"] = idempotent

    return crash_config(launcher, store_kind, edit=edit)


def _effects(setup: Setup, key: str) -> int:
    return sum(1 for effect in setup.effects() if effect["idempotency_key"] == key)


@pytest.mark.parametrize("idempotent", [False, True], ids=["non-idempotent", "idempotent"])
async def test_a_python_adapter_killed_after_its_call_ran(
    launcher: Launcher, store_kind: str, idempotent: bool
) -> None:
    setup = _credits_config(launcher, store_kind, idempotent=idempotent)
    proposal = credit("py-after-send", amount=25)
    end, completion = AFTER_SEND[idempotent]

    await crash(launcher, setup, "after_send", proposal)
    assert _effects(setup, "py-after-send") == 1  # the credit was issued before the crash

    after = await restart_and_retry(launcher, setup, proposal, completion=completion)
    assert_ended(end, after, lambda: _effects(setup, "py-after-send"), 1)
    verify_ledger(setup)


async def test_a_credit_crashed_before_its_call_gives_its_budget_back(
    launcher: Launcher, store_kind: str
) -> None:
    """The day's credit budget is 500 USD: a 300 USD credit claimed (budget taken) by a process
    that died before calling the backend, then retried, fits only if the first charge came back."""
    setup = _credits_config(launcher, store_kind)
    proposal = credit("py-after-claim", amount=300)

    await crash(launcher, setup, "after_claim", proposal)
    # On SQLite the claim (and its charge) may not have reached the file before the crash.
    completion = MAYBE_RELEASED if store_kind == "sqlite" else "released"
    after = await restart_and_retry(launcher, setup, proposal, completion=completion)
    assert_ended("executed", after, lambda: _effects(setup, "py-after-claim"), 0)
    spent = [r for r in ledger_records(setup) if r["execution_status"] == "succeeded"]
    assert [r["args_redacted"]["amount"] for r in spent if not r["replayed"]] == [300]
    verify_ledger(setup)


# -- MCP ------------------------------------------------------------------------------------------


async def upstream_calls(upstream: Upstream) -> dict[str, int]:
    """How often each upstream tool ran, asked of the upstream itself (its counter outlives the
    broker)."""
    from adapters.mcp import McpPool

    pool = McpPool(Allowlist([upstream.url]))
    try:
        result = await pool.call(upstream.url, "call_counts", {})
    finally:
        await pool.aclose()
    (text,) = [block.text for block in result.content if block.type == "text"]
    counts: dict[str, int] = json.loads(text)
    return counts


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[Upstream]:
    server = Upstream(tmp_path / "mcp.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()


# idempotent -> (broker tool, upstream counter, args)
MCP_TOOLS = {
    False: ("disk.disk_wipe_all", "wipe", {"disk": "sdb"}),
    True: ("ops.restart_service", "restart", {"service": "db"}),
}


@pytest.mark.parametrize("idempotent", [False, True], ids=["non-idempotent", "idempotent"])
async def test_an_mcp_adapter_killed_after_its_call_ran(
    launcher: Launcher, upstream: Upstream, store_kind: str, idempotent: bool
) -> None:
    from adapters.mcp import registrations

    name, counter, args = MCP_TOOLS[idempotent]
    bodies = await registrations(upstream.url, routes=["billing_help"], timeout_s=TOOL_TIMEOUT_S)
    (tool,) = [body for body in bodies if body["name"] == name]
    assert tool["idempotent"] is idempotent
    setup = crash_config(launcher, store_kind)
    proposal = {"tool": name, "args": args, "idempotency_key": f"mcp-{counter}"}
    end, completion = AFTER_SEND[idempotent]

    await crash(launcher, setup, "after_send", proposal, register=(tool,))
    ran = await upstream_calls(upstream)
    assert ran.get(counter) == 1  # it ran upstream before the broker died

    after = await restart_and_retry(launcher, setup, proposal, completion=completion)
    final = await upstream_calls(upstream)
    assert_ended(end, after, lambda: final.get(counter, 0), 1)
    verify_ledger(setup)
