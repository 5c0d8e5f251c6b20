"""The running app and the committed document agree where schemathesis once found them apart:
what ``OPTIONS`` lists, which bodies and parameters are refused. Each case asks both."""

from __future__ import annotations

import re
from typing import Any

import httpx
import jsonschema
import msgspec
import pytest

from tests.conftest import ADMIN, BILLING, ROOT

DOCUMENT: dict[str, Any] = msgspec.json.decode((ROOT / "openapi/openapi.json").read_bytes())
METHODS = {"get", "put", "post", "delete", "patch"}


def allows(schema_name: str, body: object) -> bool:
    """Whether the document's schema ``schema_name`` accepts ``body``."""
    root = {"$ref": f"#/components/schemas/{schema_name}", "components": DOCUMENT["components"]}
    return jsonschema.Draft202012Validator(root).is_valid(body)


@pytest.mark.parametrize("path", sorted(DOCUMENT["paths"]))
async def test_options_lists_exactly_the_documented_methods(
    client: httpx.AsyncClient, path: str
) -> None:
    documented = {m.upper() for m in DOCUMENT["paths"][path] if m in METHODS} | {"OPTIONS"}
    response = await client.options(re.sub(r"{[^}]+}", "ops.some_tool", path))
    assert response.status_code == 204
    assert set(response.headers["allow"].split(", ")) == documented


@pytest.mark.parametrize(
    "where",
    [
        {"trace_id": "t-1"},
        {"session_id": "chat-1"},
        {"trace_id": None, "session_id": "chat-1"},
        {"trace_id": "t-1", "session_id": ""},
        {},
        {"session_id": ""},
        {"trace_id": "", "session_id": ""},
        {"trace_id": None, "session_id": None},
    ],
)
async def test_an_implied_write_check_is_refused_exactly_when_the_document_refuses_it(
    client: httpx.AsyncClient, where: dict[str, str | None]
) -> None:
    body = {"text": "I've issued the refund.", **where}
    response = await client.post("/v1/implied-writes/check", json=body, headers=BILLING)
    assert response.status_code == (200 if allows("CheckRequest", body) else 422), response.text


REGISTRATION = {
    "description": "Restart one service of the tenant.",
    "input_schema": {"type": "object", "properties": {"service": {"type": "string"}}},
    "risk": "write",
    "adapter": {"kind": "http", "url": "http://127.0.0.1:9000/restart", "timeout_s": 2.0},
}


@pytest.mark.parametrize(
    "name", ["ops.restart_service", "ops-2.Restart.v2", "restart_service", "Ops.restart", "ops."]
)
async def test_a_tool_name_is_refused_exactly_when_the_document_refuses_it(
    client: httpx.AsyncClient, name: str
) -> None:
    body = {**REGISTRATION, "name": name}
    response = await client.post("/v1/tools", json=body, headers=ADMIN)
    if allows("Registration", body):
        assert response.status_code in (200, 201), response.text
    else:
        assert response.status_code == 422
        assert "/name" in [error["path"] for error in response.json()["errors"]]


@pytest.mark.parametrize(("value", "status"), [("true", 201), ("false", 201), ("maybe", 400)])
async def test_rotate_secret_is_a_boolean(
    client: httpx.AsyncClient, value: str, status: int
) -> None:
    body = {**REGISTRATION, "name": "ops.restart_service"}
    response = await client.post(f"/v1/tools?rotate_secret={value}", json=body, headers=ADMIN)
    assert response.status_code == status, response.text
    if status == 400:
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["code"] == "malformed_request"
