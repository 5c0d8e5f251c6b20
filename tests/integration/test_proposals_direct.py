"""``POST /v1/proposals`` answered before Litestar's router: the same answers as through it.

``BrokerApp`` answers the exact path itself; ``/v1/proposals/`` (which Litestar normalizes to
the same route) still goes through the router, so each test asks both ways and compares.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.demo import DemoBackend
from broker.api.proposals import create_proposal
from broker.app import BrokerApp, create_app
from broker.config import BrokerConfig
from broker.plugins import Backend
from broker.stores import MemoryStore
from broker.stores.base import Admission, AdmitResult
from tests.conftest import BILLING, ticket, with_private_ledger
from tests.fakes import assert_problem

DIRECT, ROUTED = "/v1/proposals", "/v1/proposals/"
StartBroker = Callable[..., tuple[str, Mapping[str, Backend]]]


class _BrokenStore(MemoryStore):
    """A store with a bug: admission raises something no layer expects."""

    async def admit(self, admission: Admission, *, now: float, dry_run: bool) -> AdmitResult:
        raise RuntimeError("a bug in the store")


def _without_ids(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in ("proposal_id", "trace_id", "audit")}


async def _both_ways(url: str, **request: Any) -> tuple[httpx.Response, httpx.Response]:
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        direct = await client.post(DIRECT, **request)
        routed = await client.post(ROUTED, **request)
    return direct, routed


def _same_headers(direct: httpx.Response, routed: httpx.Response) -> None:
    for name in ("content-type", "content-length", "retry-after", "www-authenticate"):
        if name != "content-length" or direct.content == routed.content:
            assert direct.headers.get(name) == routed.headers.get(name), name


async def test_a_rejection_is_answered_alike_directly_and_through_the_router(
    make_broker: StartBroker,
) -> None:
    url, _ = make_broker()
    direct, routed = await _both_ways(
        url, json={"tool": "no_such_tool", "args": {}}, headers=BILLING
    )
    assert_problem(direct, 422, "unknown_tool", "SCHEMA")
    assert direct.status_code == routed.status_code
    assert _without_ids(direct.json()) == _without_ids(routed.json())
    _same_headers(direct, routed)


async def test_an_unauthenticated_proposal_is_answered_alike_both_ways(
    make_broker: StartBroker,
) -> None:
    url, _ = make_broker()
    direct, routed = await _both_ways(url, json=ticket(), headers={"Authorization": "Bearer no"})
    assert_problem(direct, 401, "unauthenticated", "AUTHZ")
    assert direct.headers["www-authenticate"] == "Bearer"
    assert _without_ids(direct.json()) == _without_ids(routed.json())
    _same_headers(direct, routed)


async def test_an_unexpected_error_is_the_500_litestar_answers_for_the_route(
    make_broker: StartBroker, caplog: pytest.LogCaptureFixture
) -> None:
    url, _ = make_broker(store=_BrokenStore())
    direct, routed = await _both_ways(url, json=ticket(), headers=BILLING)
    body = assert_problem(direct, 500, "internal_error", "INTERNAL")
    assert body["detail"] == "internal error"
    assert direct.content == routed.content
    _same_headers(direct, routed)
    logged = [r for r in caplog.records if r.name == "broker.api" and r.exc_info]
    assert len(logged) == 2  # both ways reached the app's handler, which logs the bug whole
    assert all("a bug in the store" in str(r.exc_info[1]) for r in logged if r.exc_info)


async def test_an_invalid_host_is_refused_as_litestar_refuses_it(
    make_broker: StartBroker,
) -> None:
    url, backends = make_broker()
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        response = await client.post(
            DIRECT, json=ticket(), headers={**BILLING, "Host": "broker.example/evil"}
        )
    assert_problem(response, 400, "malformed_request", "SCHEMA")
    assert response.json()["detail"] == "Invalid host header"
    demo = backends["demo"]
    assert isinstance(demo, DemoBackend)
    assert demo.tickets == []


async def test_other_methods_on_the_path_still_get_405(make_broker: StartBroker) -> None:
    url, _ = make_broker()
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        response = await client.put(DIRECT, json=ticket(), headers=BILLING)
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"


def test_the_app_has_no_layers_the_direct_path_would_skip(
    demo_config: BrokerConfig, tmp_path: Path
) -> None:
    app = create_app(with_private_ledger(demo_config, tmp_path), secrets={})
    assert isinstance(app, BrokerApp)
    assert app.middleware == []
    assert not app.before_send
    assert not app.guards
    assert not create_proposal.resolve_guards()
    assert app.broker is app.state.broker
