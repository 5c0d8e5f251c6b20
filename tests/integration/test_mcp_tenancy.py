"""An upstream MCP tool called for two tenants: a session each, each with its own credentials.

The upstream is the real MCP server of ``tests/mcp_server.py`` (streamable HTTP on loopback); its
``whoami`` tool answers with the MCP session id it was called on, the ``X-Broker-Tenant`` header
and a digest of the ``X-Api-Key`` header the broker sent: the upstream's own view, not the
broker's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from broker.config import parse_config
from broker.plugins import Backend
from tests.conftest import ADMIN, BILLING, GLOBEX
from tests.integration.test_mcp_adapter import Upstream
from tests.registrations import registration_raw

pytest.importorskip("mcp")

StartBroker = Callable[..., tuple[str, Mapping[str, Backend]]]

BASE_KEY = "mcp-base-key-0001"
ACME_KEY = "mcp-acme-key-0002"


def digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


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
    raw = registration_raw()
    raw["registered_tools"] = {
        "mcp.whoami": {
            "credentials": {"api_key": "env:MCP_BASE_KEY"},
            "tenant_credentials": {"acme": {"api_key": "env:MCP_ACME_KEY"}},
        }
    }
    secrets = {
        "BROKER_TOKEN_SIGNING_KEY": "test-signing-key-0123456789abcdef",
        "MCP_BASE_KEY": BASE_KEY,
        "MCP_ACME_KEY": ACME_KEY,
    }
    return make_broker(parse_config(raw), secrets=secrets)[0]


def whoami_registration(url: str) -> dict[str, Any]:
    return {
        "name": "mcp.whoami",
        "description": "Which session and credential the upstream sees.",
        "input_schema": {"type": "object", "properties": {}, "additionalProperties": False},
        "risk": "read",
        "idempotent": True,
        "routes": ["billing_help"],
        "adapter": {
            "kind": "mcp",
            "url": url,
            "tool": "whoami",
            "timeout_s": 5.0,
            "credential_headers": {"X-Api-Key": "api_key"},
        },
    }


async def test_each_tenant_gets_its_own_session_and_credentials(
    upstream: Upstream, broker_url: str
) -> None:
    async with httpx.AsyncClient(base_url=broker_url, timeout=15) as http:
        created = await http.post(
            "/v1/tools", json=whoami_registration(upstream.url), headers=ADMIN
        )
        assert created.status_code == 201, created.text
        seen: dict[str, list[dict[str, Any]]] = {"acme": [], "globex": []}
        for _ in range(2):  # twice each: a session is reused within a tenant
            for tenant, headers in (("acme", BILLING), ("globex", GLOBEX)):
                answer = await http.post(
                    "/v1/proposals", json={"tool": "mcp.whoami", "args": {}}, headers=headers
                )
                assert answer.status_code == 200, answer.text
                seen[tenant].append(answer.json()["execution"]["result"])

    acme, globex = seen["acme"], seen["globex"]
    assert {r["tenant"] for r in acme} == {"acme"}
    assert {r["tenant"] for r in globex} == {"globex"}
    # Credentials as the operator bound them: acme's own key, globex the tool's base key.
    assert {r["api_key_sha256"] for r in acme} == {digest(ACME_KEY)}
    assert {r["api_key_sha256"] for r in globex} == {digest(BASE_KEY)}
    # One session per tenant, kept across calls, never shared between tenants.
    acme_sessions = {r["session"] for r in acme}
    globex_sessions = {r["session"] for r in globex}
    assert len(acme_sessions) == 1 and len(globex_sessions) == 1
    assert None not in acme_sessions | globex_sessions
    assert acme_sessions.isdisjoint(globex_sessions)


async def test_a_credential_header_must_name_a_bound_credential(
    upstream: Upstream, broker_url: str
) -> None:
    body = whoami_registration(upstream.url)
    body["adapter"]["credential_headers"] = {"X-Api-Key": "nobody_bound_this"}
    async with httpx.AsyncClient(base_url=broker_url, timeout=15) as http:
        refused = await http.post("/v1/tools", json=body, headers=ADMIN)
    assert refused.status_code == 422, refused.text
    paths = {e["path"] for e in refused.json()["errors"]}
    assert paths == {"/adapter/credential_headers/X-Api-Key"}
