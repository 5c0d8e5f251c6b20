"""The ``broker`` command, run as a subprocess the way an operator runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import httpx
import pytest

from broker.plugins import Backend
from tests.conftest import DEMO_CONFIG, ROOT, Clock, free_port
from tests.fakes import SIGNING_KEY, assert_problem

MakeBroker = Callable[..., tuple[str, Mapping[str, Backend]]]

GOOD_HASH = "0" * 64

BROKEN = f"""
colour = "blue"

[tenants.acme]

[routes.r]
tools = ["ghost_tool"]
tenants = ["acme"]

[service_accounts."sa@bots"]
route = "r"

[[tokens]]
name = "t"
sha256 = "{GOOD_HASH}"
service_account = "nobody@bots"
tenant = "acme"

[backends.demo]
factory = "adapters.demo:create_backend"

[tools.bad_risk]
description = "risk is not one of read/write/irreversible"
risk = "dangerous"
adapter = {{ kind = "python", backend = "demo", operation = "lookup_order" }}
input_schema = {{ type = "object" }}

[tools.unsafe]
description = "a pattern that backtracks catastrophically"
risk = "read"
adapter = {{ kind = "python", backend = "demo", operation = "lookup_order" }}
input_schema = {{ type = "object", properties = {{ s = {{ type = "string", pattern = "^(a+)+$" }} }} }}

[tools.invalid_schema]
description = "not a JSON Schema"
risk = "read"
adapter = {{ kind = "python", backend = "demo", operation = "lookup_order" }}
input_schema = {{ type = "object", properties = {{ x = {{ type = "strng" }} }} }}

[tools.unknown_pre]
description = "a precondition nobody declared"
risk = "read"
preconditions = ["moon_is_full"]
adapter = {{ kind = "python", backend = "demo", operation = "lookup_order" }}
input_schema = {{ type = "object" }}
"""

EXPECTED_PATHS = {
    "unknown key": "colour",
    "bad risk": "tools.bad_risk.risk",
    "unknown tool in a route": "routes.r.tools[0]",
    "unsafe regex": "tools.unsafe.input_schema.properties.s.pattern",
    "invalid schema": "tools.invalid_schema.input_schema.properties.x.type",
    "unknown precondition": "tools.unknown_pre.preconditions[0]",
    "token with unknown service account": "tokens[0].service_account",
}


def broker_cli(
    *args: str, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "BROKER_TOKEN_SIGNING_KEY"}
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "broker", *args],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_check_config_accepts_the_demo() -> None:
    result = broker_cli("check-config", str(DEMO_CONFIG))
    assert result.returncode == 0, result.stderr
    assert "ok" in result.stdout


def test_check_config_reports_every_problem_with_its_key_path_in_one_run(tmp_path: Path) -> None:
    config = tmp_path / "broken.toml"
    config.write_text(BROKEN)
    result = broker_cli("check-config", str(config))
    assert result.returncode == 1
    output = result.stdout + result.stderr
    missing = {what: path for what, path in EXPECTED_PATHS.items() if path not in output}
    assert not missing, f"not reported: {missing}\n{output}"


def test_check_config_reports_every_cross_reference_problem_at_once(tmp_path: Path) -> None:
    config = tmp_path / "broken.toml"
    config.write_text(BROKEN.replace('colour = "blue"', "").replace('"dangerous"', '"read"'))
    result = broker_cli("check-config", str(config))
    assert result.returncode == 1
    for what in (
        "unknown tool in a route",
        "unsafe regex",
        "invalid schema",
        "unknown precondition",
        "token with unknown service account",
    ):
        assert EXPECTED_PATHS[what] in result.stderr, (what, result.stderr)


@pytest.mark.parametrize(
    ("content", "where"),
    [("this is [not toml", "<file>"), (None, "<file>")],
    ids=["not-toml", "missing-file"],
)
def test_check_config_refuses_unreadable_files(
    tmp_path: Path, content: str | None, where: str
) -> None:
    config = tmp_path / "config.toml"
    if content is not None:
        config.write_text(content)
    result = broker_cli("check-config", str(config))
    assert result.returncode == 1
    assert where in result.stderr


def test_serve_refuses_to_start_on_a_bad_config(tmp_path: Path) -> None:
    config = tmp_path / "broken.toml"
    config.write_text(BROKEN)
    result = broker_cli("serve", "--config", str(config), "--port", str(free_port()))
    assert result.returncode != 0
    assert "tools.bad_risk.risk" in result.stderr


def mint(
    route: str, tenant: str, *options: str, key: str | None = SIGNING_KEY
) -> subprocess.CompletedProcess[str]:
    """``broker token mint`` for the demo config (``key=None``: no signing key in the env)."""
    env = {} if key is None else {"BROKER_TOKEN_SIGNING_KEY": key}
    return broker_cli(
        "token", "mint", "--config", str(DEMO_CONFIG), "--route", route, "--tenant", tenant,
        *options, env=env,
    )  # fmt: skip


async def test_a_minted_token_is_accepted_then_expires(
    make_broker: MakeBroker, clock: Clock
) -> None:
    result = mint("billing_help", "acme", "--ttl", "2s")
    assert result.returncode == 0, result.stderr
    token = result.stdout.strip()
    assert token.count(".") == 2
    url, _ = make_broker()
    headers = {"Authorization": f"Bearer {token}"}
    lookup = {"tool": "lookup_order", "args": {"order_id": "O-55291"}}
    async with httpx.AsyncClient(base_url=url) as client:
        accepted = await client.post("/v1/proposals", json=lookup, headers=headers)
        assert accepted.status_code == 200, accepted.text
        tools = await client.get("/v1/tools", headers=headers)
        assert {t["name"] for t in tools.json()["tools"]} == {
            "lookup_order",
            "create_support_ticket",
            "issue_credit",
        }
        clock.advance(60)
        expired = await client.post("/v1/proposals", json=lookup, headers=headers)
    assert_problem(expired, 401, "token_expired", "AUTHZ")


async def test_a_token_minted_with_another_key_is_refused(make_broker: MakeBroker) -> None:
    result = mint("billing_help", "acme", key="some-other-key-0123456789abcdef00")
    assert result.returncode == 0, result.stderr
    url, _ = make_broker()
    async with httpx.AsyncClient(base_url=url) as client:
        response = await client.post(
            "/v1/proposals",
            json={"tool": "lookup_order", "args": {"order_id": "O-55291"}},
            headers={"Authorization": f"Bearer {result.stdout.strip()}"},
        )
    assert_problem(response, 401, "unauthenticated", "AUTHZ")


@pytest.mark.parametrize(
    ("route", "tenant"),
    [("scheduling", "globex"), ("billing_help", "initech"), ("no_such_route", "acme")],
)
def test_minting_for_a_tenant_or_route_that_is_not_served_fails(route: str, tenant: str) -> None:
    result = mint(route, tenant)
    assert result.returncode != 0
    assert result.stdout.strip() == ""
    assert result.stderr.strip()


def test_minting_without_a_signing_key_fails() -> None:
    result = mint("billing_help", "acme", key=None)
    assert result.returncode != 0
    assert "BROKER_TOKEN_SIGNING_KEY" in result.stderr
    assert result.stdout.strip() == ""
