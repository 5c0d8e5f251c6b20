"""``POST /v1/proposals`` as a Litestar route: the pipeline's bytes on the wire, and what every
route gets (host checks, the problem+json handlers) applies to it too."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import httpx
import pytest

from adapters.demo import DemoBackend
from broker.api.fast_path import ProposalsBeforeRouting
from broker.app import create_app
from broker.config import BrokerConfig
from broker.plugins import Backend
from broker.stores import MemoryStore
from broker.stores.base import Admission, AdmitResult
from tests.conftest import BILLING, credit, ticket, with_fast_path, with_private_ledger
from tests.fakes import assert_problem

StartBroker = Callable[..., tuple[str, Mapping[str, Backend]]]


class _BrokenStore(MemoryStore):
    """A store with a bug: admission raises something no layer expects."""

    async def admit(self, admission: Admission, *, now: float, dry_run: bool) -> AdmitResult:
        raise RuntimeError("a bug in the store")


@pytest.mark.parametrize(
    ("proposal", "status", "media"),
    [
        (credit(key="bytes-approved"), 200, "application/json"),
        (ticket("C-20001", key="bytes-rejected"), 409, "application/problem+json"),
        ({"tool": "no_such_tool", "args": {}}, 422, "application/problem+json"),
    ],
    ids=["approved", "precondition_failed", "unknown_tool"],
)
async def test_the_answer_is_the_recorded_decision_byte_for_byte(
    client: httpx.AsyncClient, proposal: dict[str, object], status: int, media: str
) -> None:
    answer = await client.post("/v1/proposals", json=proposal, headers=BILLING)
    assert answer.status_code == status, answer.text
    # Exactly the pipeline's media type: no charset or other parameter added on the way out.
    assert answer.headers["content-type"] == media
    assert answer.headers["content-length"] == str(len(answer.content))
    stored = await client.get(f"/v1/proposals/{answer.json()['proposal_id']}", headers=BILLING)
    assert stored.status_code == 200
    assert stored.content == answer.content


async def test_an_unexpected_error_is_a_500_problem_that_leaks_nothing(
    make_broker: StartBroker, caplog: pytest.LogCaptureFixture
) -> None:
    url, _ = make_broker(store=_BrokenStore())
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        response = await client.post("/v1/proposals", json=ticket(), headers=BILLING)
    body = assert_problem(response, 500, "internal_error", "INTERNAL")
    assert body["detail"] == "internal error"
    assert "a bug in the store" not in response.text
    logged = [r for r in caplog.records if r.name == "broker.api" and r.exc_info]
    assert len(logged) == 1  # the app's handler logs the bug whole, once
    exc_info = logged[0].exc_info
    assert exc_info is not None and "a bug in the store" in str(exc_info[1])


async def test_an_invalid_host_is_refused_before_anything_runs(make_broker: StartBroker) -> None:
    url, backends = make_broker()
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        response = await client.post(
            "/v1/proposals", json=ticket(), headers={**BILLING, "Host": "broker.example/evil"}
        )
    assert_problem(response, 400, "malformed_request", "SCHEMA")
    demo = backends["demo"]
    assert isinstance(demo, DemoBackend)
    assert demo.tickets == []


def test_the_fast_path_is_opt_in_and_skips_no_layer_the_app_has(
    demo_config: BrokerConfig, tmp_path: Path
) -> None:
    config = with_private_ledger(demo_config, tmp_path)
    # Two apps on one data directory: each needs a store of its own (the SQLite file has one owner).
    plain = create_app(config, secrets={}, store=MemoryStore())
    assert not isinstance(plain, ProposalsBeforeRouting)
    app = create_app(with_fast_path(config), secrets={}, store=MemoryStore())
    assert isinstance(app, ProposalsBeforeRouting)
    # What the fast path would skip: none of it is configured, so both paths answer alike.
    assert app.middleware == []
    assert not app.before_send
    assert not app.before_request
    assert not app.after_request
    assert not app.guards
    assert app.cors_config is None
    assert not app.allowed_hosts
