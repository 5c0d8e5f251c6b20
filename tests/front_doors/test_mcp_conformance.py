"""The official MCP conformance suite (npm ``@modelcontextprotocol/conformance``) against ``/mcp``:
the server scenarios that apply to a server of arbitrary tools.

The suite's client sends no credentials, and ``/mcp`` answers 401 without a route token, so the
broker under test is wrapped in an ASGI layer that adds the demo route's token to requests that
carry none; everything else is the real app over real HTTP.
``scripts/with-mcp-conformance`` provides the CLI (``MCP_CONFORMANCE``); without it these tests
fail when CI is set and skip otherwise.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.demo import DemoBackend
from broker.app import create_app
from broker.config import BrokerConfig
from tests.conftest import serve, with_private_ledger

SCENARIOS = ("server-initialize", "ping", "tools-list")


def _cli() -> str:
    cli = os.environ.get("MCP_CONFORMANCE")
    if cli and Path(cli).exists():
        return cli
    message = "MCP conformance CLI not found: run under scripts/with-mcp-conformance"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def _with_route_token(app: Any) -> Any:
    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not any(k == b"authorization" for k, _ in scope["headers"]):
            scope = {
                **scope,
                "headers": [*scope["headers"], (b"authorization", b"Bearer demo-billing-token")],
            }
        await app(scope, receive, send)

    return wrapped


@pytest.fixture(scope="module")
def mcp_url(demo_config: BrokerConfig, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    config = with_private_ledger(demo_config, tmp_path_factory.mktemp("conformance"))
    app = create_app(
        config,
        backends={"demo": DemoBackend()},
        secrets={"BROKER_TOKEN_SIGNING_KEY": "test-signing-key-0123456789abcdef"},
    )
    with serve(_with_route_token(app)) as url:
        yield f"{url}/mcp"


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_conformance_scenario_passes(mcp_url: str, scenario: str, tmp_path: Path) -> None:
    cli = _cli()
    done = subprocess.run(
        [cli, "server", "--url", mcp_url, "--scenario", scenario, "--output-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    found = list(tmp_path.rglob("checks.json"))
    assert found, done.stdout + done.stderr
    checks = json.loads(found[0].read_text())
    failed = [c for c in checks if c["status"] in ("FAILURE", "ERROR")]
    assert not failed, json.dumps(failed, indent=1)
    assert any(c["status"] == "SUCCESS" for c in checks), json.dumps(checks, indent=1)
