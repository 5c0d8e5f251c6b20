"""``POST/GET/DELETE /v1/tools`` over real HTTP, with a real backend on loopback."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import httpx
import pytest

from adapters.http import verify_signature
from broker.plugins import Backend
from broker.stores import MemoryStore
from broker.tool_id import schema_hash8
from tests.conftest import ADMIN, BILLING, GLOBEX, SCHEDULING
from tests.fakes import assert_problem
from tests.loopback import LoopbackBackend, running
from tests.registrations import BACKEND, OTHER_BACKEND, registration, registration_config

StartBroker = Callable[..., tuple[str, Mapping[str, Backend]]]


@pytest.fixture
def backend() -> Iterator[tuple[str, LoopbackBackend]]:
    loopback = LoopbackBackend()
    with running(loopback) as url:
        yield url, loopback


@pytest.fixture
def broker_url(make_broker: StartBroker) -> str:
    url, _ = make_broker(registration_config())
    return url


def refund(key: str = "refund-1", payment: str = "P-1") -> dict[str, Any]:
    return {"tool": "billing.refund", "args": {"payment_id": payment}, "idempotency_key": key}


async def test_registration_round_trip(
    broker_url: str, backend: tuple[str, LoopbackBackend]
) -> None:
    backend_url, loopback = backend
    body = registration("billing.refund", backend_url + "/tools/refund", version="2.1")
    async with httpx.AsyncClient(base_url=broker_url, timeout=10) as http:
        created = await http.post("/v1/tools", json=body, headers=ADMIN)
        assert created.status_code == 201, created.text
        answer = created.json()
        secret = answer["signing_secret"]
        assert isinstance(secret, str) and len(secret) >= 32
        assert answer["tool_id"] == "billing:refund@2.1"
        assert answer["created"] is True
        assert created.headers["cache-control"] == "no-store"
        loopback.secrets["/tools/refund"] = secret

        read = await http.get("/v1/tools/billing.refund", headers=ADMIN)
        assert read.status_code == 200
        assert secret not in read.text and "signing_secret" not in read.json()
        assert read.json()["routes"] == ["billing_help"]
        assert read.json()["status"] == "active"

        listed = (await http.get("/v1/tools", headers=BILLING)).json()["tools"]
        described = {t["name"]: t for t in listed}["billing.refund"]
        assert described["tool_id"] == "billing:refund@2.1"
        assert described["risk"] == "write" and "adapter" not in described
        assert secret not in (await http.get("/v1/tools", headers=ADMIN)).text

        done = await http.post("/v1/proposals", json=refund(), headers=BILLING)
        assert done.status_code == 200, done.text
        assert done.json()["execution"]["result"]["args"] == {"payment_id": "P-1"}
        assert len(loopback.hits_on("/tools/refund")) == 1 and not loopback.refused

        # Replacing keeps the secret (so running backends keep verifying) and says so.
        replaced = await http.post(
            "/v1/tools", json={**body, "description": "Refund, v2."}, headers=ADMIN
        )
        assert replaced.status_code == 200, replaced.text
        assert replaced.json()["signing_secret"] is None and replaced.json()["created"] is False
        again = await http.post("/v1/proposals", json=refund("refund-2"), headers=BILLING)
        assert again.status_code == 200 and not loopback.refused

        # Rotation hands out a new secret, once; the old one no longer verifies.
        rotated = await http.post("/v1/tools?rotate_secret=true", json=body, headers=ADMIN)
        new_secret = rotated.json()["signing_secret"]
        assert new_secret and new_secret != secret
        third = await http.post("/v1/proposals", json=refund("refund-3"), headers=BILLING)
        assert third.status_code == 502 and len(loopback.refused) == 1
        assert verify_signature(
            new_secret, loopback.refused[0].headers["x-broker-signature"], loopback.refused[0].body
        )

        removed = await http.delete("/v1/tools/billing.refund", headers=ADMIN)
        assert removed.status_code == 204
        gone = await http.post("/v1/proposals", json=refund("refund-4"), headers=BILLING)
        assert_problem(gone, 422, "unknown_tool", "SCHEMA")
        assert_problem(
            await http.get("/v1/tools/billing.refund", headers=ADMIN), 404, "not_found", "SCHEMA"
        )
        assert_problem(
            await http.delete("/v1/tools/billing.refund", headers=ADMIN), 404, "not_found", "SCHEMA"
        )


async def test_a_registered_tool_is_callable_only_from_granted_routes(
    broker_url: str, backend: tuple[str, LoopbackBackend]
) -> None:
    backend_url, loopback = backend
    body = registration(
        "billing.refund", backend_url + "/tools/refund", risk="read", idempotent=True
    )
    async with httpx.AsyncClient(base_url=broker_url, timeout=10) as http:
        assert (await http.post("/v1/tools", json=body, headers=ADMIN)).status_code == 201
        proposal = {"tool": "billing.refund", "args": {"payment_id": "P-9"}}
        assert (await http.post("/v1/proposals", json=proposal, headers=BILLING)).status_code == 200
        assert (await http.post("/v1/proposals", json=proposal, headers=GLOBEX)).status_code == 200
        refused = await http.post("/v1/proposals", json=proposal, headers=SCHEDULING)
        assert_problem(refused, 403, "tool_not_allowed", "AUTHZ")
        scheduling_tools = (await http.get("/v1/tools", headers=SCHEDULING)).json()["tools"]
        assert "billing.refund" not in {t["name"] for t in scheduling_tools}
    tenants = [hit.json()["tenant"] for hit in loopback.hits_on("/tools/refund")]
    assert tenants == ["acme", "globex"]


async def test_a_bad_registration_lists_every_problem(broker_url: str) -> None:
    body = registration(
        "billing.refund",
        "http://169.254.169.254/latest/meta-data",
        risk="sometimes",
        preconditions=["order_paid", "no_such_check"],
        routes=["billing_help", "no_such_route"],
        input_schema={
            "type": "object",
            "properties": {"id": {"type": "string", "pattern": "^(a+)+$"}, "n": {"type": "nope"}},
        },
        claims={"verbs": ["refund", "", 3], "nouns": ["payment", "payment"]},
        verifiers={"order_ok": {"url": "http://127.0.0.1:9/v", "remediation": "x"}},
        surprise=True,
    )
    body["adapter"]["timeout_s"] = 0
    async with httpx.AsyncClient(base_url=broker_url, timeout=10) as http:
        answer = await http.post("/v1/tools", json=body, headers=ADMIN)
    problem = assert_problem(answer, 422, "schema_invalid", "SCHEMA")
    paths = {e["path"] for e in problem["errors"]}
    expected = {
        "/surprise",
        "/risk",
        "/adapter/timeout_s",
        "/adapter/url",
        "/preconditions/1",
        "/routes/1",
        "/claims/verbs/1",
        "/claims/verbs/2",
        "/claims/nouns/1",
        "/verifiers/order_ok",
    }
    assert expected <= paths, problem["errors"]
    assert any(p.startswith("/input_schema") for p in paths), problem["errors"]
    assert "signing_secret" not in answer.text


async def test_an_unsafe_regex_is_refused_at_registration(broker_url: str) -> None:
    schema = {
        "type": "object",
        "properties": {"id": {"type": "string", "pattern": "^(a+)+$"}},
    }
    body = registration("billing.refund", "http://127.0.0.1:9/x", input_schema=schema)
    async with httpx.AsyncClient(base_url=broker_url, timeout=10) as http:
        answer = await http.post("/v1/tools", json=body, headers=ADMIN)
    problem = assert_problem(answer, 422, "schema_invalid", "SCHEMA")
    assert problem["errors"] == [
        {"path": "/input_schema/properties/id/pattern", "message": problem["errors"][0]["message"]}
    ]
    assert "refused" in problem["errors"][0]["message"]


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://example.com/x", "not in the broker's http_allowlist"),
        ("http://127.0.0.1:80@169.254.169.254/", "credentials"),
        ("ftp://127.0.0.1/x", ""),
        ("http://127.0.0.1:9000/a/../admin", ". or .."),
    ],
)
async def test_urls_outside_the_allowlist_are_refused(broker_url: str, url: str, why: str) -> None:
    body = registration("billing.refund", url)
    async with httpx.AsyncClient(base_url=broker_url, timeout=10) as http:
        answer = await http.post("/v1/tools", json=body, headers=ADMIN)
    problem = assert_problem(answer, 422, "schema_invalid", "SCHEMA")
    messages = [e["message"] for e in problem["errors"] if e["path"] == "/adapter/url"]
    assert messages and why in messages[0], problem["errors"]


async def test_tokens_decide_who_registers_what(
    broker_url: str, backend: tuple[str, LoopbackBackend]
) -> None:
    backend_url, _ = backend
    body = registration("billing.refund", backend_url + "/tools/refund")
    async with httpx.AsyncClient(base_url=broker_url, timeout=10) as http:
        assert_problem(
            await http.post("/v1/tools", json=body, headers=BILLING), 403, "forbidden", "AUTHZ"
        )
        assert_problem(await http.post("/v1/tools", json=body), 401, "unauthenticated", "AUTHZ")
        # A backend token registers within its namespace only...
        elsewhere = await http.post("/v1/tools", json=body, headers=OTHER_BACKEND)
        assert_problem(elsewhere, 403, "forbidden", "AUTHZ")
        # ...and grants only the routes the operator allowed it.
        wide = await http.post(
            "/v1/tools", json={**body, "routes": ["billing_help", "scheduling"]}, headers=BACKEND
        )
        problem = assert_problem(wide, 422, "schema_invalid", "SCHEMA")
        assert [e["path"] for e in problem["errors"]] == ["/routes/1"]
        ok = await http.post("/v1/tools", json=body, headers=BACKEND)
        assert ok.status_code == 201, ok.text
        assert (await http.get("/v1/tools/billing.refund", headers=BACKEND)).status_code == 200
        assert_problem(
            await http.get("/v1/tools/billing.refund", headers=OTHER_BACKEND),
            403,
            "forbidden",
            "AUTHZ",
        )
        assert_problem(
            await http.delete("/v1/tools/billing.refund", headers=OTHER_BACKEND),
            403,
            "forbidden",
            "AUTHZ",
        )
        mine = (await http.get("/v1/tools", headers=BACKEND)).json()["tools"]
        assert [t["name"] for t in mine] == ["billing.refund"]
        # Proposals need a route token, whoever registered the tool.
        assert_problem(
            await http.post("/v1/proposals", json=refund(), headers=BACKEND),
            403,
            "forbidden",
            "AUTHZ",
        )
        # Config tools are read-only here.
        assert_problem(
            await http.delete("/v1/tools/issue_credit", headers=ADMIN), 403, "forbidden", "AUTHZ"
        )
        config_tool = await http.get("/v1/tools/issue_credit", headers=ADMIN)
        assert config_tool.json()["source"] == "config"
        assert (await http.delete("/v1/tools/billing.refund", headers=BACKEND)).status_code == 204


async def test_names_and_ids_must_be_distinct(broker_url: str) -> None:
    async with httpx.AsyncClient(base_url=broker_url, timeout=10) as http:
        clash = registration("issue_credit", "http://127.0.0.1:9/x")
        problem = assert_problem(
            await http.post("/v1/tools", json=clash, headers=ADMIN), 422, "schema_invalid", "SCHEMA"
        )
        assert {e["path"] for e in problem["errors"]} == {"/name"}
        same_id = registration("demo.issue_credit", "http://127.0.0.1:9/x", version="1")
        problem = assert_problem(
            await http.post("/v1/tools", json=same_id, headers=ADMIN),
            422,
            "schema_invalid",
            "SCHEMA",
        )
        assert "tool_id" in problem["errors"][0]["message"]
        unversioned = registration("billing.refund", "http://127.0.0.1:9/x")
        answer = await http.post("/v1/tools", json=unversioned, headers=ADMIN)
        expected = "billing:refund#" + schema_hash8("billing.refund", unversioned["input_schema"])
        assert answer.json()["tool_id"] == expected
        not_json = await http.post("/v1/tools", content=b"{oops", headers=ADMIN)
        assert_problem(not_json, 400, "malformed_request", "SCHEMA")
        not_object = await http.post("/v1/tools", json=[1], headers=ADMIN)
        assert_problem(not_object, 422, "schema_invalid", "SCHEMA")


async def test_a_registration_may_bring_http_verifiers(
    broker_url: str, backend: tuple[str, LoopbackBackend]
) -> None:
    backend_url, loopback = backend
    loopback.behaviours["/verify/fails"] = "verify:fail"
    loopback.behaviours["/verify/holds"] = "verify:ok"
    body = registration(
        "billing.refund",
        backend_url + "/tools/refund",
        preconditions=["billing.payment_exists", "billing.not_refunded"],
        verifiers={
            "billing.payment_exists": {
                "url": backend_url + "/verify/holds",
                "remediation": "ASK_FOR_MORE: the payment id",
            },
            "billing.not_refunded": {
                "url": backend_url + "/verify/fails",
                "remediation": "REPLAN: it was refunded already",
            },
        },
    )
    async with httpx.AsyncClient(base_url=broker_url, timeout=10) as http:
        created = await http.post("/v1/tools", json=body, headers=ADMIN)
        assert created.status_code == 201, created.text
        secret = created.json()["signing_secret"]
        for path in ("/verify/holds", "/verify/fails", "/tools/refund"):
            loopback.secrets[path] = secret
        answer = await http.post(
            "/v1/proposals",
            json={**refund(), "preconditions": ["billing.payment_exists"]},
            headers=BILLING,
        )
    problem = assert_problem(answer, 409, "precondition_failed", "PRECONDITION")
    assert problem["reason"] == "the backend says no"
    assert problem["remediation"] == "ASK_FOR_MORE: try again"
    assert not loopback.refused and not loopback.hits_on("/tools/refund")
    checked = loopback.hits_on("/verify/holds")[0].json()
    assert checked["precondition"] == "billing.payment_exists"
    assert checked["tenant"] == "acme" and checked["args"] == {"payment_id": "P-1"}


class CountingStore(MemoryStore):
    """Counts the catalog reads a broker makes (the hot path must make none)."""

    def __init__(self) -> None:
        super().__init__()
        self.catalog_reads: list[str] = []

    async def list_tools(self) -> Any:
        self.catalog_reads.append("list_tools")
        return await super().list_tools()

    async def get_tool(self, name: str) -> Any:
        self.catalog_reads.append("get_tool")
        return await super().get_tool(name)

    async def tools_version(self) -> int:
        self.catalog_reads.append("tools_version")
        return await super().tools_version()


async def test_proposals_never_read_the_catalog_from_the_store(
    make_broker: StartBroker, backend: tuple[str, LoopbackBackend]
) -> None:
    store = CountingStore()
    url, _ = make_broker(registration_config(registry_poll_s=0.2), store=store)
    backend_url, _ = backend
    body = registration("billing.refund", backend_url + "/tools/refund", risk="read")
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        assert (await http.post("/v1/tools", json=body, headers=ADMIN)).status_code == 201
        store.catalog_reads.clear()
        started = time.monotonic()
        for _ in range(200):
            answer = await http.post(
                "/v1/proposals",
                json={"tool": "billing.refund", "args": {"payment_id": "P-1"}},
                headers=BILLING,
            )
            assert answer.status_code == 200
        elapsed = time.monotonic() - started
    # Only the follower's version poll, once per registry_poll_s, whatever the traffic.
    assert set(store.catalog_reads) <= {"tools_version"}
    assert len(store.catalog_reads) <= elapsed / 0.2 + 2


async def test_an_unknown_query_parameter_is_refused_and_nothing_is_stored(
    broker_url: str, backend: tuple[str, LoopbackBackend]
) -> None:
    backend_url, _ = backend
    body = registration("billing.refund", backend_url + "/tools/refund")
    async with httpx.AsyncClient(base_url=broker_url, timeout=10) as http:
        misspelt = await http.post("/v1/tools?rotate_secrets=true", json=body, headers=ADMIN)
        assert misspelt.status_code == 400, misspelt.text
        assert "rotate_secrets" in misspelt.json()["detail"]
        assert (await http.get("/v1/tools/billing.refund", headers=ADMIN)).status_code == 404
