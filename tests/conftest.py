"""Shared fixtures: the demo config, and a real broker served over HTTP on a free loopback port."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
import uvicorn

from adapters.demo import DemoBackend
from adapters.demo.data import seed
from broker.app import create_app
from broker.config import BrokerConfig, load_config
from broker.plugins import Backend
from tests.ports import free_port

ROOT = Path(__file__).resolve().parent.parent
DEMO_CONFIG = ROOT / "deploy" / "demo.toml"

BILLING = {"Authorization": "Bearer demo-billing-token"}
SCHEDULING = {"Authorization": "Bearer demo-scheduling-token"}
GLOBEX = {"Authorization": "Bearer demo-globex-token"}
ADMIN = {"Authorization": "Bearer demo-admin-token"}

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")

TLS = httpx.create_ssl_context()
"""httpx's default TLS context, made once: a client made without one reads the CA bundle again,
tens of milliseconds of CPU for every test's client (the tests' brokers speak plain HTTP)."""

ORDER_CURRENCY = {
    order.order_id: order.currency
    for tenant in seed(datetime.now(UTC)).values()
    for order in tenant.orders.values()
}
"""Every demo order's currency: a credit is in its order's currency (the demo checks it)."""


class Clock:
    """A settable wall clock for expiry and window tests."""

    def __init__(self, start: float | None = None) -> None:
        self.now = time.time() if start is None else start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """Run ``app`` under uvicorn in a thread on a free port; yield its base URL."""
    # The listening socket is bound here and handed to uvicorn, so the port is never free
    # between being chosen and being served (another xdist worker could take it then).
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@pytest.fixture(scope="session")
def demo_config() -> BrokerConfig:
    return load_config(DEMO_CONFIG)


@pytest.fixture
def clock() -> Clock:
    return Clock()


def with_private_ledger(config: BrokerConfig, directory: Path) -> BrokerConfig:
    """The same config, with its ledger file and signing key under ``directory``."""
    service = msgspec.structs.replace(
        config.service,
        ledger_path=str(directory / "ledger.jsonl"),
        ledger_key_path=str(directory / "ledger-key.pem"),
    )
    return msgspec.structs.replace(config, service=service)


# The suites that hold POST /v1/proposals to its contract: each of their tests runs twice, on
# the typed Litestar handler and on the opt-in fast path ([service] proposal_fast_path).
PROPOSAL_SUITES = {
    "test_ingress_limits",
    "test_proposals_concurrency",
    "test_proposals_dry_run",
    "test_proposals_explain",
    "test_proposals_idempotency",
    "test_proposals_ingress",
    "test_proposals_robustness",
    "test_proposals_taxonomy",
    "test_schemathesis",
    "test_smoke",
}
INGRESSES = ("routed", "fast_path")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    suite = metafunc.module.__name__.rpartition(".")[2]
    if suite in PROPOSAL_SUITES and "ingress" in metafunc.fixturenames:
        metafunc.parametrize("ingress", INGRESSES, indirect=True, scope="module")


@pytest.fixture(scope="module")
def ingress(request: pytest.FixtureRequest) -> str:
    """How ``make_broker`` answers proposals: ``routed`` (the default) or ``fast_path``."""
    return str(getattr(request, "param", "routed"))


def with_fast_path(config: BrokerConfig) -> BrokerConfig:
    """The same config, answering proposals before Litestar's routing."""
    service = msgspec.structs.replace(config.service, proposal_fast_path=True)
    return msgspec.structs.replace(config, service=service)


@pytest.fixture
def make_broker(
    demo_config: BrokerConfig, clock: Clock, tmp_path: Path, ingress: str
) -> Iterator[Callable[..., tuple[str, Mapping[str, Backend]]]]:
    """Start a broker over real HTTP; returns ``(base_url, backends)``.

    Keyword arguments go to :func:`create_app`; ``backends`` defaults to a fresh demo backend.
    """
    stack: list[Any] = []

    def start(
        config: BrokerConfig | None = None,
        *,
        backends: Mapping[str, Backend] | None = None,
        **kwargs: Any,
    ) -> tuple[str, Mapping[str, Backend]]:
        backends = backends if backends is not None else {"demo": DemoBackend()}
        kwargs.setdefault("clock", clock)
        kwargs.setdefault(
            "secrets", {"BROKER_TOKEN_SIGNING_KEY": "test-signing-key-0123456789abcdef"}
        )
        config = with_private_ledger(config or demo_config, tmp_path)
        if ingress == "fast_path":
            config = with_fast_path(config)
        app = create_app(config, backends=backends, **kwargs)
        context = serve(app)
        url = context.__enter__()
        stack.append(context)
        return url, backends

    yield start
    for context in reversed(stack):
        context.__exit__(None, None, None)


@pytest.fixture
def broker(
    make_broker: Callable[..., tuple[str, Mapping[str, Backend]]],
) -> tuple[str, DemoBackend]:
    """The demo broker with a fresh memory store and demo backend."""
    url, backends = make_broker()
    demo = backends["demo"]
    assert isinstance(demo, DemoBackend)
    return url, demo


@pytest.fixture
async def client(broker: tuple[str, DemoBackend]) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=broker[0], timeout=10, verify=TLS) as http:
        yield http


@pytest.fixture
def demo(broker: tuple[str, DemoBackend]) -> DemoBackend:
    return broker[1]


def credit(
    key: str = "O-55291-USD-25", amount: float = 25, order: str = "O-55300"
) -> dict[str, Any]:
    """A credit on ``order`` in its currency; the default order is large (900 USD), so the
    budget (500 a day), not the order's total, is what many credits run into."""
    return {
        "tool": "issue_credit",
        "args": {"order_id": order, "amount": amount, "currency": ORDER_CURRENCY.get(order, "USD")},
        "preconditions": ["order_paid", "within_return_window"],
        "idempotency_key": key,
    }


def ticket(customer: str = "C-10429", key: str = "ticket-1") -> dict[str, Any]:
    return {
        "tool": "create_support_ticket",
        "args": {"customer_id": customer, "subject": "Billing discrepancy", "priority": "high"},
        "preconditions": ["customer_verified", "open_invoice_present"],
        "idempotency_key": key,
    }


__all__ = [
    "ADMIN",
    "BILLING",
    "GLOBEX",
    "REDIS_URL",
    "SCHEDULING",
    "Clock",
    "credit",
    "free_port",
    "serve",
    "ticket",
]
