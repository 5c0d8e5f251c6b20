"""The example backend (adapters/examples/ticket_backend.py) beside a broker, as a reader runs it.

It registers its tools when it starts, serves them through the broker, and refuses any request
whose signature does not verify: missing, made with another key, over a tampered body, or older
than 300 seconds.
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
import msgspec
import pytest

from adapters.examples.ticket_backend import TicketBackend, create_app
from adapters.http import SIGNATURE_HEADER, TENANT_HEADER, sign
from broker.plugins import Backend
from tests.conftest import ADMIN, BILLING, GLOBEX, ROOT, free_port, serve
from tests.fakes import assert_problem
from tests.registrations import registration_config

StartBroker = Callable[..., tuple[str, Mapping[str, Backend]]]


@pytest.fixture
def broker_url(make_broker: StartBroker) -> str:
    return make_broker(registration_config())[0]


@pytest.fixture
def example_process(broker_url: str, tmp_path: Path) -> Iterator[str]:
    port = free_port()
    command = [
        sys.executable, "-m", "adapters.examples.ticket_backend",
        "--broker", broker_url, "--admin-token", "demo-admin-token", "--port", str(port),
    ]  # fmt: skip
    with (tmp_path / "example.log").open("wb") as log:
        proc = subprocess.Popen(
            command, cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def open_ticket(customer: str, key: str) -> dict[str, Any]:
    return {
        "tool": "tickets.open_ticket",
        "args": {"customer_id": customer, "subject": "Printer on fire"},
        "preconditions": ["tickets.customer_known"],
        "idempotency_key": key,
    }


async def test_the_example_registers_at_start_and_serves_through_the_broker(
    broker_url: str, example_process: str
) -> None:
    async with httpx.AsyncClient(base_url=broker_url, timeout=10) as http:
        deadline = time.monotonic() + 20
        names: set[str] = set()
        while {"tickets.open_ticket", "tickets.get_ticket"} - names:
            assert time.monotonic() < deadline, "the example backend did not register"
            tools = (await http.get("/v1/tools", headers=BILLING)).json()["tools"]
            names = {t["name"] for t in tools}
            time.sleep(0.05)
        opened = await http.post(
            "/v1/proposals", json=open_ticket("C-10429", "t-1"), headers=BILLING
        )
        assert opened.status_code == 200, opened.text
        ticket = opened.json()["execution"]["result"]
        assert ticket["status"] == "open" and ticket["ticket_id"].startswith("TK-")
        read = await http.post(
            "/v1/proposals",
            json={"tool": "tickets.get_ticket", "args": {"ticket_id": ticket["ticket_id"]}},
            headers=BILLING,
        )
        assert read.status_code == 200 and read.json()["execution"]["result"] == ticket
        # Another tenant neither sees the ticket nor passes the verifier with acme's customer.
        hidden = await http.post(
            "/v1/proposals",
            json={"tool": "tickets.get_ticket", "args": {"ticket_id": ticket["ticket_id"]}},
            headers=GLOBEX,
        )
        assert_problem(hidden, 502, "provider_error", "PROVIDER")
        unknown = await http.post(
            "/v1/proposals", json=open_ticket("C-10429", "t-2"), headers=GLOBEX
        )
        problem = assert_problem(unknown, 409, "precondition_failed", "PRECONDITION")
        assert "unknown customer" in problem["reason"]
        # A request that did not come from the broker is refused by the backend itself.
        forged = await http.post(
            example_process + "/tools/open_ticket", json={"tool": "tickets.open_ticket"}
        )
        assert forged.status_code == 401


@pytest.fixture
def example_in_process(broker_url: str) -> Iterator[tuple[str, TicketBackend]]:
    backend = TicketBackend()
    with serve(create_app(backend)) as url:
        yield url, backend


async def test_the_example_refuses_tampered_and_stale_requests(
    broker_url: str, example_in_process: tuple[str, TicketBackend]
) -> None:
    url, backend = example_in_process
    await backend.register(broker_url, "demo-admin-token", url, ["billing_help"])
    secret = backend.secrets["tickets.open_ticket"]
    body = msgspec.json.encode(
        {
            "tool": "tickets.open_ticket",
            "args": {"customer_id": "C-10429", "subject": "hello"},
            "tenant": "acme",
            "trace_id": "t",
            "proposal_id": "prp_1",
        }
    )

    def headers(signature: str) -> dict[str, str]:
        return {
            SIGNATURE_HEADER: signature,
            TENANT_HEADER: "acme",
            "Content-Type": "application/json",
        }

    now = int(time.time())
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        good = await http.post(
            "/tools/open_ticket", content=body, headers=headers(sign(secret, body))
        )
        assert good.status_code == 200, good.text
        tampered = body.replace(b"hello", b"HELLO")
        refused = [
            await http.post(
                "/tools/open_ticket", content=tampered, headers=headers(sign(secret, body))
            ),
            await http.post(
                "/tools/open_ticket",
                content=body,
                headers=headers(sign(secret, body, timestamp=now - 301)),
            ),
            await http.post(
                "/tools/open_ticket", content=body, headers=headers(sign("guess", body))
            ),
            await http.post(
                "/tools/open_ticket",
                content=body,
                headers=headers(sign(backend.secrets["tickets.get_ticket"], body)),
            ),
            await http.post("/tools/open_ticket", content=body, headers={TENANT_HEADER: "acme"}),
        ]
    assert [r.status_code for r in refused] == [401] * 5
    assert len(backend.tickets) == 1


async def test_the_example_binds_its_port_before_it_registers_and_exits_when_it_is_taken(
    broker_url: str,
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        command = [
            sys.executable, "-m", "adapters.examples.ticket_backend",
            "--broker", broker_url, "--admin-token", "demo-admin-token", "--port", str(port),
        ]  # fmt: skip
        result = subprocess.run(
            command, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
        )
    assert result.returncode != 0, result.stderr
    assert "already in use" in result.stderr  # uvicorn's own message
    async with httpx.AsyncClient(base_url=broker_url, timeout=10) as http:
        for name in ("tickets.open_ticket", "tickets.get_ticket"):
            stored = await http.get(f"/v1/tools/{name}", headers=ADMIN)
            assert stored.status_code == 404, f"{name} was registered: {stored.text}"
