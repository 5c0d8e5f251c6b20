"""Gateway and proxy catalogs checked before they are served: at start, at registration, and a
clear refusal (never a 500) for a stored tool that still breaks a card's bounds."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import httpx
import msgspec
import pytest

from broker.config import parse_config
from broker.plugins import Backend
from broker.stores import MemoryStore, RegisteredTool
from broker.taxonomy import ConfigError
from tests.conftest import ADMIN
from tests.fakes import assert_problem, demo_raw
from tests.registrations import registration, registration_config

StartBroker = Callable[..., tuple[str, Mapping[str, Backend]]]

PROXY = {"Authorization": "Bearer demo-proxy-token"}
# Rare letter pairs cost a token or two each: a card naming this tool (its id carries the name
# too) is over the 80-token hard cap before any description, so no cut can make it fit.
UNFITTING = "q" + "x9qv" * 14
DEAD_URL = "http://127.0.0.1:9/tools/refund"


def _with_config_tool(route: str) -> dict[str, Any]:
    raw = demo_raw()
    raw["tools"][UNFITTING] = copy.deepcopy(raw["tools"]["lookup_order"])
    raw["routes"][route]["tools"].append(UNFITTING)
    return raw


def test_a_config_tool_whose_card_cannot_fit_refuses_the_start(make_broker: StartBroker) -> None:
    with pytest.raises(ConfigError) as refused:
        make_broker(parse_config(_with_config_tool("proxy_billing")))
    (where, problem), *rest = refused.value.problems
    assert where == "routes.proxy_billing"
    assert "hard cap" in problem
    assert rest == []


def test_the_same_tool_on_a_tools_route_starts(make_broker: StartBroker) -> None:
    url, _ = make_broker(parse_config(_with_config_tool("billing_help")))
    answer = httpx.get(f"{url}/v1/tools", headers=ADMIN, timeout=10)
    assert UNFITTING in answer.text


async def test_a_registration_whose_card_cannot_fit_a_proxy_route_is_refused(
    make_broker: StartBroker,
) -> None:
    url, _ = make_broker(registration_config())
    name = f"billing.{UNFITTING}"
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        refused = await http.post(
            "/v1/tools", json=registration(name, DEAD_URL, routes=["proxy_billing"]), headers=ADMIN
        )
        assert_problem(refused, 422, "schema_invalid", "SCHEMA")
        (error,) = refused.json()["errors"]
        assert error["path"] == "/name"
        assert "proxy_billing" in error["message"] and "hard cap" in error["message"]
        # Nothing was stored, and the route's catalog still lists.
        assert (await http.get(f"/v1/tools/{name}", headers=ADMIN)).status_code == 404
        listed = await http.get("/v1/tools?format=openai", headers=PROXY)
        assert listed.status_code == 200, listed.text
        # The same tool on a route that lists schemas has no card to fit.
        accepted = await http.post(
            "/v1/tools", json=registration(name, DEAD_URL, routes=["billing_help"]), headers=ADMIN
        )
        assert accepted.status_code == 201, accepted.text


async def test_a_stored_tool_that_breaks_a_card_answers_503_not_500(
    make_broker: StartBroker,
) -> None:
    # What an older version could have stored: written to the store, never checked.
    store = MemoryStore()
    name = f"billing.{UNFITTING}"
    body = registration(name, DEAD_URL, routes=["proxy_billing"])
    await store.put_tool(
        RegisteredTool(
            name=name,
            spec=msgspec.json.encode(body),
            signing_secret="s" * 32,
            updated_at=0.0,
            updated_by="admin",
        ),
        keep_secret=True,
    )
    url, _ = make_broker(registration_config(), store=store)
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        assert (await http.get(f"/v1/tools/{name}", headers=ADMIN)).status_code == 200
        answer = await http.get("/v1/tools?format=openai", headers=PROXY)
        assert_problem(answer, 503, "service_unavailable", "UNAVAILABLE")
        assert "hard cap" in answer.json()["detail"]
