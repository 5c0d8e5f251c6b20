"""Least privilege: a canary secret reaches exactly the backend call it is bound to, and nothing else.

The canaries are bound per tool and per tenant (``registered_tools`` and ``tools.X`` with
``tenant_credentials``). The backend echoes the credential it receives into its answers (a
careless backend), and the test then greps every output the broker produces: HTTP bodies and
headers, the ledger file, ``/metrics`` and every log record, at DEBUG.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from broker.config import parse_config
from broker.plugins import Backend
from tests.conftest import ADMIN, BILLING, GLOBEX
from tests.loopback import LoopbackBackend, running
from tests.registrations import registration, registration_raw

StartBroker = Callable[..., tuple[str, Mapping[str, Backend]]]

CANARY_BASE = "cnry-base-5b1e0c2f9d7a44e8"
CANARY_ACME = "cnry-acme-8f3d2a6c1b0e47d9"
CANARY_SIGNING = "cnry-sign-2c4e6a8b0d1f3a5c"
CANARIES = (CANARY_BASE, CANARY_ACME, CANARY_SIGNING)


@pytest.fixture
def backend() -> Iterator[tuple[str, LoopbackBackend]]:
    loopback = LoopbackBackend(
        behaviours={
            "/tools/echo": "echo_credentials",
            "/tools/refuse": "echo_credentials:refuse",
            "/tools/config_echo": "echo_credentials",
        }
    )
    with running(loopback) as url:
        yield url, loopback


def canary_config(backend_url: str) -> Any:
    raw = registration_raw()
    bound = {
        "credentials": {"api_key": "env:CANARY_BASE"},
        "tenant_credentials": {"acme": {"api_key": "env:CANARY_ACME"}},
    }
    raw["registered_tools"] = {"billing.echo": bound, "billing.refuse": bound}
    raw["tools"]["config_echo"] = {
        "description": "Echo, configured.",
        "risk": "read",
        "idempotent": True,
        "input_schema": {"type": "object", "properties": {"payment_id": {"type": "string"}}},
        "adapter": {
            "kind": "http",
            "url": backend_url + "/tools/config_echo",
            "signing_secret": "env:CANARY_SIGNING",
            "credential_headers": {"X-Api-Key": "api_key"},
        },
        **bound,
    }
    raw["routes"]["billing_help"]["tools"].append("config_echo")
    return parse_config(raw)


def body_for(name: str, url: str) -> dict[str, Any]:
    adapter = {
        "kind": "http",
        "url": url,
        "timeout_s": 2,
        "credential_headers": {"X-Api-Key": "api_key"},
    }
    return registration(name, url, adapter=adapter, risk="read", idempotent=True)


@pytest.fixture
def broker_url(make_broker: StartBroker, backend: tuple[str, LoopbackBackend]) -> str:
    # Started before the test body: the server configures logging when it starts, and the log
    # capture of the test phase must be installed after that.
    secrets = {
        "BROKER_TOKEN_SIGNING_KEY": "test-signing-key-0123456789abcdef",
        "CANARY_BASE": CANARY_BASE,
        "CANARY_ACME": CANARY_ACME,
        "CANARY_SIGNING": CANARY_SIGNING,
    }
    url, _ = make_broker(canary_config(backend[0]), secrets=secrets)
    return url


async def test_a_canary_secret_never_shows_up_in_any_output(
    broker_url: str,
    backend: tuple[str, LoopbackBackend],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    backend_url, loopback = backend
    url = broker_url
    outputs: list[str] = []

    async with httpx.AsyncClient(base_url=url, timeout=10) as http:

        async def call(method: str, path: str, **kwargs: Any) -> httpx.Response:
            response = await http.request(method, path, **kwargs)
            outputs.append(str(response.headers) + response.text)
            return response

        for name in ("billing.echo", "billing.refuse"):
            path = "/tools/" + name.split(".")[1]
            created = await call(
                "POST", "/v1/tools", json=body_for(name, backend_url + path), headers=ADMIN
            )
            assert created.status_code == 201, created.text
            await call("GET", f"/v1/tools/{name}", headers=ADMIN)
        proposal = {"args": {"payment_id": "P-1"}, "trace_id": "canary-trace"}
        acme = await call(
            "POST", "/v1/proposals", json={"tool": "billing.echo", **proposal}, headers=BILLING
        )
        assert acme.status_code == 200, acme.text
        assert acme.json()["execution"]["result"]["key"] == "[redacted]"
        refused = await call(
            "POST", "/v1/proposals", json={"tool": "billing.refuse", **proposal}, headers=BILLING
        )
        assert refused.status_code == 502 and "got key" not in refused.json()["reason"]
        globex = await call(
            "POST", "/v1/proposals", json={"tool": "billing.echo", **proposal}, headers=GLOBEX
        )
        assert globex.status_code == 200
        configured = await call(
            "POST", "/v1/proposals", json={"tool": "config_echo", **proposal}, headers=BILLING
        )
        assert configured.status_code == 200, configured.text
        for answer in (acme, refused, globex, configured):
            await call("GET", f"/v1/proposals/{answer.json()['proposal_id']}", headers=ADMIN)
        await call("GET", "/v1/traces/canary-trace", headers=ADMIN)
        await call("GET", "/v1/tools", headers=BILLING)
        await call("GET", "/v1/tools", headers=ADMIN)
        await call("GET", "/v1/audit/verify", headers=ADMIN)
        await call("GET", "/metrics")

    # The secrets did go where they are bound: each call got its own tenant's credential...
    keys = [(h.json()["tenant"], h.headers.get("x-api-key")) for h in loopback.hits]
    assert ("acme", CANARY_ACME) in keys and ("globex", CANARY_BASE) in keys
    assert all(key == (CANARY_ACME if tenant == "acme" else CANARY_BASE) for tenant, key in keys)
    # ...and nowhere else.
    ledger = (tmp_path / "ledger.jsonl").read_text(encoding="utf-8")
    assert ledger.count("canary-trace") >= 4
    logs = "\n".join(
        f"{r.getMessage()} {r.args!r} {r.exc_text or ''} {vars(r)!r}" for r in caplog.records
    )
    assert caplog.records
    for canary in CANARIES:
        for index, output in enumerate(outputs):
            assert canary not in output, (index, output)
        assert canary not in ledger
        assert canary not in logs
