"""Minted tokens whose claims have the wrong type: correctly signed, refused 401 (never a 500)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import httpx
import jwt
import pytest

from adapters.demo import DemoBackend
from broker.plugins import Backend
from tests.conftest import Clock, ticket
from tests.fakes import assert_problem

StartBroker = Callable[..., tuple[str, Mapping[str, Backend]]]

# The key make_broker gives the broker (BROKER_TOKEN_SIGNING_KEY).
KEY = b"test-signing-key-0123456789abcdef"


def _token(clock: Clock, **overrides: Any) -> str:
    issued = int(clock.now)
    claims: dict[str, Any] = {
        "iss": "action-broker",
        "aud": "action-broker",
        "sub": "route-billing-help@bots",
        "route": "billing_help",
        "tenant": "acme",
        "iat": issued,
        "exp": issued + 600,
    }
    claims.update(overrides)
    return jwt.encode(claims, KEY, algorithm="HS256")


async def test_a_well_typed_minted_token_is_accepted(
    make_broker: StartBroker, clock: Clock
) -> None:
    url, _ = make_broker()
    headers = {"Authorization": f"Bearer {_token(clock)}"}
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        response = await client.post("/v1/proposals", json=ticket(key="typed"), headers=headers)
    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    ("claim", "value"),
    [
        ("exp", "9999999999"),  # PyJWT accepts it (int() does); arithmetic on it did not
        ("iat", "yesterday"),
        ("route", ["billing_help"]),
        ("tenant", 7),
        ("tools", "create_support_ticket"),  # was ignored: the route's every tool
        ("tools", [1, 2]),
    ],
)
async def test_a_signed_token_with_a_claim_of_the_wrong_type_is_refused_401(
    make_broker: StartBroker, clock: Clock, claim: str, value: Any
) -> None:
    url, backends = make_broker()
    token = _token(clock, **{claim: value})
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        proposed = await client.post("/v1/proposals", json=ticket(key=claim), headers=headers)
        listed = await client.get("/v1/tools", headers=headers)
    body = assert_problem(proposed, 401, "unauthenticated", "AUTHZ")
    assert f"$.{claim}" in body["detail"]  # names the claim
    assert proposed.headers["www-authenticate"] == "Bearer"
    assert_problem(listed, 401, "unauthenticated", "AUTHZ")
    demo = backends["demo"]
    assert isinstance(demo, DemoBackend)
    assert demo.tickets == []
