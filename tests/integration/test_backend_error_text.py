"""A backend's own error text never reaches the agent: the answer carries the code and a fixed
message, and what the backend said goes to the log and the ledger (credentials redacted)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.mcp import registrations
from broker.config import parse_config
from broker.pipeline.ledger_entry import DETAIL_PATH
from broker.plugins import Backend
from tests.conftest import ADMIN, BILLING, free_port
from tests.fakes import assert_problem
from tests.integration.test_mcp_adapter import Upstream
from tests.loopback import LoopbackBackend, running
from tests.registrations import registration, registration_config, registration_raw

StartBroker = Callable[..., tuple[str, Mapping[str, Backend]]]

SECRET = "cred-7c1d9e3b5a2f4680"


@pytest.fixture
def backend() -> Iterator[tuple[str, LoopbackBackend]]:
    loopback = LoopbackBackend(
        behaviours={"/tools/refuse": "status:409", "/tools/echo": "echo_credentials:refuse"}
    )
    with running(loopback) as url:
        yield url, loopback


async def recorded_detail(http: httpx.AsyncClient, trace_id: str) -> list[str]:
    """What the ledger kept of the backend's words, read back over HTTP."""
    trace = await http.get(f"/v1/traces/{trace_id}", headers=ADMIN)
    assert trace.status_code == 200, trace.text
    return [
        e["message"]
        for record in trace.json()["records"]
        for e in record.get("errors", [])
        if e["path"] == DETAIL_PATH
    ]


async def test_a_backend_4xx_text_is_logged_and_recorded_not_answered(
    make_broker: StartBroker,
    backend: tuple[str, LoopbackBackend],
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend_url, loopback = backend
    url, _ = make_broker(registration_config())
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        created = await http.post(
            "/v1/tools",
            json=registration("billing.refuse", backend_url + "/tools/refuse"),
            headers=ADMIN,
        )
        assert created.status_code == 201, created.text
        loopback.secrets["/tools/refuse"] = created.json()["signing_secret"]
        caplog.set_level(logging.WARNING, logger="broker.execution")
        proposal = {
            "tool": "billing.refuse",
            "args": {"payment_id": "P-1"},
            "idempotency_key": "refuse-1",
            "trace_id": "refuse-trace",
        }
        first = await http.post("/v1/proposals", json=proposal, headers=BILLING)
        problem = assert_problem(first, 502, "provider_error", "PROVIDER")
        assert problem["reason"] == "billing.refuse: the backend refused the request (HTTP 409)"
        assert "scripted" not in first.text
        replay = await http.post("/v1/proposals", json=proposal, headers=BILLING)
        assert replay.headers["idempotent-replayed"] == "true" and "scripted" not in replay.text
        read = await http.get(f"/v1/proposals/{problem['proposal_id']}", headers=BILLING)
        assert read.json() == problem
        assert await recorded_detail(http, "refuse-trace") == ["scripted 409"]
    assert any("scripted 409" in r.getMessage() for r in caplog.records)


async def test_a_backend_that_echoes_a_credential_is_recorded_redacted(
    make_broker: StartBroker, backend: tuple[str, LoopbackBackend]
) -> None:
    backend_url, loopback = backend
    raw = registration_raw()
    raw["registered_tools"] = {"billing.echo": {"credentials": {"api_key": "env:ECHO_KEY"}}}
    url, _ = make_broker(
        parse_config(raw),
        secrets={
            "BROKER_TOKEN_SIGNING_KEY": "test-signing-key-0123456789abcdef",
            "ECHO_KEY": SECRET,
        },
    )
    body = registration(
        "billing.echo",
        backend_url + "/tools/echo",
        adapter={
            "kind": "http",
            "url": backend_url + "/tools/echo",
            "timeout_s": 2,
            "credential_headers": {"X-Api-Key": "api_key"},
        },
    )
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        created = await http.post("/v1/tools", json=body, headers=ADMIN)
        assert created.status_code == 201, created.text
        loopback.secrets["/tools/echo"] = created.json()["signing_secret"]
        proposal: dict[str, Any] = {
            "tool": "billing.echo",
            "args": {"payment_id": "P-1"},
            "idempotency_key": "echo-1",
            "trace_id": "echo-trace",
        }
        refused = await http.post("/v1/proposals", json=proposal, headers=BILLING)
        assert_problem(refused, 502, "provider_error", "PROVIDER")
        assert "got key" not in refused.text and SECRET not in refused.text
        assert await recorded_detail(http, "echo-trace") == ["got key [redacted]"]


async def test_an_mcp_upstream_error_is_a_fixed_message_without_python_names(
    make_broker: StartBroker, tmp_path: Path
) -> None:
    upstream = Upstream(tmp_path / "mcp.log")
    upstream.start()
    url, _ = make_broker(registration_config())
    try:
        async with httpx.AsyncClient(base_url=url, timeout=10) as http:
            for body in await registrations(upstream.url, routes=["billing_help"]):
                created = await http.post("/v1/tools", json=body, headers=ADMIN)
                assert created.status_code == 201, created.text
            failed = await http.post(
                "/v1/proposals",
                json={
                    "tool": "mcp.fail_always",
                    "args": {"reason": "disk 7 on fire"},
                    "idempotency_key": "fail-1",
                    "trace_id": "mcp-fail",
                },
                headers=BILLING,
            )
            problem = assert_problem(failed, 502, "provider_error", "PROVIDER")
            assert problem["reason"] == "mcp.fail_always: the tool reported an error"
            assert "Error executing" not in failed.text
            # The upstream's own words (the SDK's server says only this much), for the operator.
            assert await recorded_detail(http, "mcp-fail") == ["Error executing tool fail_always"]

            upstream.stop()
            gone = await http.post(
                "/v1/proposals",
                json={"tool": "mcp.get_status", "args": {"service": "db"}, "trace_id": "mcp-gone"},
                headers=BILLING,
            )
            problem = assert_problem(gone, 503, "provider_unavailable", "PROVIDER")
            assert "Group" not in gone.text and "Error" not in gone.text, problem["reason"]
            assert problem["reason"] in (
                "mcp.get_status: the MCP session failed",
                "mcp.get_status: the MCP session broke",
                "the MCP server could not be reached",
            )
            assert await recorded_detail(http, "mcp-gone")  # the exception, for the operator
    finally:
        upstream.stop()


async def test_a_backend_that_cannot_be_reached_is_a_fixed_message_without_python_names(
    make_broker: StartBroker, backend: tuple[str, LoopbackBackend]
) -> None:
    url, _ = make_broker(registration_config())
    closed = f"http://127.0.0.1:{free_port()}/tools/nothing"  # nothing listens there
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        created = await http.post(
            "/v1/tools", json=registration("billing.gone", closed), headers=ADMIN
        )
        assert created.status_code == 201, created.text
        gone = await http.post(
            "/v1/proposals",
            json={
                "tool": "billing.gone",
                "args": {"payment_id": "P-1"},
                "idempotency_key": "gone-1",
                "trace_id": "gone-trace",
            },
            headers=BILLING,
        )
        problem = assert_problem(gone, 503, "provider_unavailable", "PROVIDER")
        assert problem["reason"] == "the backend could not be reached"
        assert "Error" not in gone.text
        (detail,) = await recorded_detail(http, "gone-trace")
        assert detail.startswith("ConnectError")
