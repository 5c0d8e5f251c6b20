"""An upstream MCP server's tools, imported as registered tools and called through the broker.

The upstream is a real MCP server (``tests/mcp_server.py``, the official SDK's ``MCPServer``)
started by the test on loopback, spoken to over streamable HTTP.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.mcp import registrations
from broker.plugins import Backend
from broker.tool_id import schema_hash8
from tests.conftest import ADMIN, BILLING, ROOT, SCHEDULING, free_port
from tests.fakes import assert_problem
from tests.registrations import registration_config

pytest.importorskip("mcp")

StartBroker = Callable[..., tuple[str, Mapping[str, Backend]]]


class Upstream:
    def __init__(self, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self._log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self._log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, str(ROOT / "tests" / "mcp_server.py"), str(self.port)],
                cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"}, stdout=log, stderr=log,
            )  # fmt: skip
        deadline = time.monotonic() + 20
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(self._log.read_text()) from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[Upstream]:
    server = Upstream(tmp_path / "mcp.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def broker_url(make_broker: StartBroker) -> str:
    return make_broker(registration_config())[0]


async def test_annotations_map_to_risk_and_names_to_tool_ids(upstream: Upstream) -> None:
    bodies = {b["name"]: b for b in await registrations(upstream.url, routes=["billing_help"])}
    assert set(bodies) == {
        "mcp.get_status",
        "ops.restart_service",
        "disk.disk_wipe_all",
        "mcp.fail_always",
        "mcp.call_counts",
        "mcp.whoami",
    }
    assert (bodies["mcp.get_status"]["risk"], bodies["mcp.get_status"]["idempotent"]) == (
        "read",
        True,
    )
    assert (bodies["ops.restart_service"]["risk"], bodies["ops.restart_service"]["idempotent"]) == (
        "write",
        True,
    )
    assert bodies["disk.disk_wipe_all"]["risk"] == "irreversible"
    assert bodies["disk.disk_wipe_all"]["idempotent"] is False
    assert bodies["mcp.fail_always"]["risk"] == "write"
    assert bodies["ops.restart_service"]["adapter"] == {
        "kind": "mcp", "url": upstream.url, "tool": "ops.restart_service", "timeout_s": 5.0,
    }  # fmt: skip
    assert bodies["mcp.get_status"]["description"] == "Report whether one service is up."


async def test_upstream_tools_run_through_the_pipeline(upstream: Upstream, broker_url: str) -> None:
    bodies = await registrations(upstream.url, routes=["billing_help"])
    async with httpx.AsyncClient(base_url=broker_url, timeout=10) as http:
        ids = {}
        for body in bodies:
            created = await http.post("/v1/tools", json=body, headers=ADMIN)
            assert created.status_code == 201, created.text
            ids[body["name"]] = created.json()["tool_id"]
        status_schema = next(b for b in bodies if b["name"] == "mcp.get_status")["input_schema"]
        assert ids["mcp.get_status"] == "mcp:get_status#" + schema_hash8(
            "get_status", status_schema
        )
        assert ids["ops.restart_service"].startswith("ops:restart_service#")

        def propose(tool: str, args: dict[str, Any], key: str | None = None) -> Any:
            body: dict[str, Any] = {"tool": tool, "args": args}
            if key:
                body["idempotency_key"] = key
            return http.post("/v1/proposals", json=body, headers=BILLING)

        status = await propose("mcp.get_status", {"service": "db"})
        assert status.status_code == 200, status.text
        assert status.json()["execution"]["result"] == {"service": "db", "status": "up", "call": 1}
        invalid = await propose("mcp.get_status", {"service": 5})
        assert_problem(
            invalid, 422, "schema_invalid", "SCHEMA"
        )  # the upstream schema, enforced here
        keyless = await propose("disk.disk_wipe_all", {"disk": "sda"})
        assert_problem(keyless, 400, "idempotency_key_missing", "IDEMPOTENCY")
        wiped = await propose("disk.disk_wipe_all", {"disk": "sda"}, key="wipe-1")
        assert wiped.status_code == 200 and wiped.json()["execution"]["result"] == {
            "result": "wiped sda"
        }
        replay = await propose("disk.disk_wipe_all", {"disk": "sda"}, key="wipe-1")
        assert replay.headers["idempotent-replayed"] == "true"
        failed = await propose("mcp.fail_always", {"reason": "no"}, key="fail-1")
        problem = assert_problem(failed, 502, "provider_error", "PROVIDER")
        assert problem["execution"]["attempts"] == 1 and "fail_always" in problem["reason"]
        counts = await propose("mcp.call_counts", {})
        assert counts.json()["execution"]["result"] == {"get_status": 1, "wipe": 1, "fail": 1}
        not_granted = await http.post(
            "/v1/proposals",
            json={"tool": "mcp.get_status", "args": {"service": "db"}},
            headers=SCHEDULING,
        )
        assert_problem(not_granted, 403, "tool_not_allowed", "AUTHZ")

        upstream.stop()
        gone = await propose("mcp.get_status", {"service": "db"})
        assert_problem(gone, 503, "provider_unavailable", "PROVIDER")
        upstream.start()
        back = await propose("mcp.get_status", {"service": "db"})
        assert back.status_code == 200, back.text  # the session is reopened


def test_the_import_command_registers_an_upstream(upstream: Upstream, broker_url: str) -> None:
    command = [
        sys.executable, "-m", "adapters.mcp", "--upstream", upstream.url, "--broker", broker_url,
        "--token", "demo-admin-token", "--route", "billing_help",
    ]  # fmt: skip
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "mcp.get_status (mcp:get_status#" in done.stdout
    tools = httpx.get(broker_url + "/v1/tools", headers=BILLING, timeout=10).json()["tools"]
    assert {"mcp.get_status", "ops.restart_service", "disk.disk_wipe_all"} <= {
        t["name"] for t in tools
    }


async def test_the_receipt_says_an_upstream_tool_was_declared_by_mcp(
    upstream: Upstream, broker_url: str
) -> None:
    """A tool registered from an upstream MCP server's listing is declared by that server: its
    ledger receipt says ``mcp``, and the record verifies in the chain."""
    bodies = await registrations(upstream.url, routes=["billing_help"])
    status = next(b for b in bodies if b["name"] == "mcp.get_status")
    async with httpx.AsyncClient(base_url=broker_url, timeout=10) as http:
        assert (await http.post("/v1/tools", json=status, headers=ADMIN)).status_code == 201
        body = {"tool": "mcp.get_status", "args": {"service": "db"}, "trace_id": "trc-mcp-r"}
        done = await http.post("/v1/proposals", json=body, headers=BILLING)
        assert done.status_code == 200, done.text
        traced = await http.get("/v1/traces/trc-mcp-r", headers=BILLING)
        (record,) = traced.json()["records"]
        verified = (await http.get("/v1/audit/verify", headers=ADMIN)).json()
    receipt = record["receipt"]
    assert (receipt["declared_by"], receipt["executed_by"]) == ("mcp", "mcp")
    assert receipt["policy_state"] == "allowed"
    assert verified["ok"] is True, verified
