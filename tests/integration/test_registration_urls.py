"""A URL with a space or a control character (CR, LF, tab...) is refused where it is written:
at registration (422, with the pointer, nothing stored) and in the config (check-config), instead
of being stored and failing on every call."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import httpx
import pytest

from broker.plugins import Backend
from tests.conftest import ADMIN, ROOT
from tests.fakes import assert_problem
from tests.integration.procs import toml_dumps
from tests.registrations import registration, registration_config, registration_raw
from tests.unit.test_config_adapters import http_tool

StartBroker = Callable[..., tuple[str, Mapping[str, Backend]]]

GOOD = "http://127.0.0.1:9000/tools/refund"
BAD_URLS = [
    GOOD + "\r\n",
    GOOD + "\nX-Injected: 1",
    GOOD + " ",
    " " + GOOD,
    "http://127.0.0.1:9000/tools/re\tfund",
    "http://127.0.0.1:9000/tools/re fund",
    GOOD + "\x00",
    GOOD + "\x7f",
]
IDS = ["crlf", "lf-header", "trailing-space", "leading-space", "tab", "space", "nul", "del"]


@pytest.mark.parametrize("url", BAD_URLS, ids=IDS)
async def test_a_registration_url_with_a_control_character_is_refused_with_its_pointer(
    make_broker: StartBroker, url: str
) -> None:
    broker_url, _ = make_broker(registration_config())
    body = registration("billing.refund", url)
    async with httpx.AsyncClient(base_url=broker_url, timeout=10) as http:
        refused = await http.post("/v1/tools", json=body, headers=ADMIN)
        stored = await http.get("/v1/tools/billing.refund", headers=ADMIN)
    problem = assert_problem(refused, 422, "schema_invalid", "SCHEMA")
    assert {e["path"] for e in problem["errors"]} == {"/adapter/url"}, problem
    assert any("control characters" in e["message"] for e in problem["errors"]), problem
    assert stored.status_code == 404  # nothing was stored


async def test_a_verifier_url_with_a_newline_is_refused_with_its_pointer(
    make_broker: StartBroker,
) -> None:
    broker_url, _ = make_broker(registration_config())
    body = registration(
        "billing.refund",
        GOOD,
        verifiers={"billing.paid": {"url": GOOD + "\n", "remediation": "pay first"}},
        preconditions=["billing.paid"],
    )
    async with httpx.AsyncClient(base_url=broker_url, timeout=10) as http:
        refused = await http.post("/v1/tools", json=body, headers=ADMIN)
    problem = assert_problem(refused, 422, "schema_invalid", "SCHEMA")
    assert [e["path"] for e in problem["errors"]] == ["/verifiers/billing.paid/url"]


async def test_a_clean_registration_url_is_still_accepted(make_broker: StartBroker) -> None:
    broker_url, _ = make_broker(registration_config())
    async with httpx.AsyncClient(base_url=broker_url, timeout=10) as http:
        created = await http.post(
            "/v1/tools", json=registration("billing.refund", GOOD), headers=ADMIN
        )
    assert created.status_code == 201, created.text


@pytest.mark.parametrize("url", BAD_URLS[:3], ids=IDS[:3])
def test_check_config_refuses_a_tool_url_with_a_control_character(tmp_path: Path, url: str) -> None:
    raw = registration_raw()
    raw["tools"]["remote"] = http_tool(url=url)
    config = tmp_path / "broker.toml"
    config.write_text(toml_dumps(raw))
    result = subprocess.run(
        [sys.executable, "-m", "broker", "check-config", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1, result.stdout
    assert "tools.remote.adapter.url" in result.stderr
    assert "control characters" in result.stderr
