"""Schemathesis: the real app, over real HTTP, against the OpenAPI document it exports.

Every test gets its own demo broker from ``make_broker`` (uvicorn on a loopback port, fresh memory
store, private ledger) and sends a valid bearer token: ``demo-billing-token``, or
``demo-admin-token`` for the admin-only operations (``GET /v1/audit/verify``, registering, reading
and removing tools). Checks on every response: no server error, and the status code, content type,
headers and body each conform to the document.

- ``test_the_app_keeps_its_documented_contract``: one test per operation (``parametrize()``),
  positive and negative cases: the document's examples, schemathesis's coverage cases and 30
  generated examples.
- ``test_the_pipeline_keeps_its_documented_contract``: random proposals mostly stop at
  ``unknown_tool``, so ``POST /v1/proposals`` is fuzzed once more (100 examples) with the body
  narrowed, in the test only, to the demo's tools, their input schemas, the demo's ids and mostly
  fresh idempotency keys. The whole chain then runs: preconditions, replays and reused keys,
  budgets and rate limits (429 with Retry-After), executions, provider failures, dry runs.
- ``test_real_decisions_and_their_reads_conform``: random ids never find a record, so the 200
  answers of ``GET /v1/proposals/{id}`` and ``GET /v1/traces/{id}`` are checked on real decisions.

Bounded and reproducible: derandomized, no deadline, no example database; about 10 s in all.
The broker's own 5xx are bugs; a 502/503/504 whose problem says the provider or its timeout
failed (``PROVIDER``/``TIMEOUT``) is the documented contract, not a server error.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import msgspec
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import CHECKS as ALL_CHECKS
from schemathesis.checks import not_a_server_error, positive_data_acceptance

from broker.app import spec_for_config
from broker.config import load_config
from broker.plugins import Backend
from tests.conftest import ADMIN, BILLING, DEMO_CONFIG, credit, ticket

CONFIG = load_config(DEMO_CONFIG)
SPEC = spec_for_config(CONFIG, strict=False)  # test_openapi.py insists on strict
schema = schemathesis.openapi.from_dict(SPEC)

DEMO_IDS = {
    "order_id": ["O-55291", "O-60000", "O-70000", "O-80001", "O-99999"],
    "customer_id": ["C-10429", "C-20001", "C-30001", "C-99999"],
}


def narrowed(spec: dict[str, Any]) -> dict[str, Any]:
    """The document with ProposalRequest narrowed to real demo proposals (see the docstring)."""
    spec = copy.deepcopy(spec)
    proposal = spec["components"]["schemas"]["ProposalRequest"]
    variants = []
    for name in sorted(CONFIG.routes["billing_help"].tools):
        args = copy.deepcopy(CONFIG.tools[name].input_schema)
        for key, ids in DEMO_IDS.items():
            if key in args.get("properties", {}):
                args["properties"][key] = {"enum": ids}
        properties = copy.deepcopy(proposal["properties"])
        properties["tool"] = {"const": name}
        properties["args"] = args
        properties["preconditions"] = {
            "type": "array",
            "maxItems": 2,
            "items": {"enum": sorted(CONFIG.preconditions)},
        }
        # Mostly fresh keys (executions, budgets, rate limits), sometimes a few shared ones
        # (replays, and keys reused with other args).
        properties["idempotency_key"] = {
            "anyOf": [
                {"enum": ["key-1", "key-2", "key-3"]},
                {"type": "string", "pattern": "^k-[0-9a-f]{12}$"},
            ]
        }
        variants.append(
            {**proposal, "properties": properties, "required": ["tool", "args", "idempotency_key"]}
        )
    spec["components"]["schemas"]["ProposalRequest"] = {"oneOf": variants}
    # Keys go in the body only: a header that differs from it stops every proposal at 400.
    operation = spec["paths"]["/v1/proposals"]["post"]
    operation["parameters"] = [p for p in operation["parameters"] if p["name"] != "Idempotency-Key"]
    return spec


pipeline_schema = schemathesis.openapi.from_dict(narrowed(SPEC)).include(
    path="/v1/proposals", method="POST"
)
pipeline_schema.config.generation.update(modes=["positive"])
# Coverage cases vary one field at a time around one key: nearly all would be idempotency_key_reused.
pipeline_schema.config.phases.coverage.enabled = False

UPSTREAM = {"PROVIDER", "TIMEOUT"}


def not_a_broker_error(ctx: Any, response: Any, case: Any) -> bool | None:
    """``not_a_server_error``, except the documented upstream failures (502/503/504 PROVIDER or
    TIMEOUT problems): those say the backend failed, which the broker must report, not hide."""
    if response.status_code in (502, 503, 504):
        try:
            category = msgspec.json.decode(response.content).get("category")
        except (msgspec.DecodeError, AttributeError):
            category = None
        if category in UPSTREAM:
            return None
    return not_a_server_error(ctx, response, case)


# What a caller's own setup decides, which no document can say: the tools, routes and
# preconditions the broker knows (and each tool's args schema and risk), and whether a key sent
# in both the header and the body is the same one. For a registration, the same holds of its
# semantic checks (an input_schema that is valid Draft 2020-12 with safe regexes, URLs the
# config's allowlist admits, known routes and preconditions, verifiers in the tool's namespace):
# the document states them in prose, and the 422 lists each one found.
CALLER_SPECIFIC = {
    "unknown_tool",
    "unknown_precondition",
    "tool_not_allowed",
    "idempotency_key_missing",
    "idempotency_key_reused",
}


# What the document cannot say of a mediated request: that tool_choice names a tool the
# request declares, that no function is declared twice, and that a declaration holds no
# number RFC 8785 cannot represent (its description says so).
CROSS_REFERENCES = (
    "names no tool declared in tools",
    "declared twice",
    "cannot be hashed as RFC 8785 JSON",
)


def _caller_specific(response: Any, case: Any) -> bool:
    operation = (case.method.upper(), case.path)
    if operation not in (
        ("POST", "/v1/proposals"),
        ("POST", "/v1/tools"),
        ("POST", "/v1/catalog/mediate"),
    ):
        return False
    try:
        problem = msgspec.json.decode(response.content)
    except msgspec.DecodeError:
        return False
    code = problem.get("code") if isinstance(problem, dict) else None
    if operation == ("POST", "/v1/catalog/mediate"):
        return code == "schema_invalid" and all(
            e["message"].startswith(CROSS_REFERENCES) for e in problem["errors"]
        )
    if operation == ("POST", "/v1/tools"):
        return code == "schema_invalid"
    if code in CALLER_SPECIFIC:
        return True
    if code == "schema_invalid":  # only the args, which the tool's own schema judges
        return all(e["path"].startswith("/args") for e in problem["errors"])
    return code == "idempotency_key_invalid" and any(
        e["message"] == "differs from the Idempotency-Key header" for e in problem["errors"]
    )


def accepted_unless_caller_specific(ctx: Any, response: Any, case: Any) -> bool | None:
    """``positive_data_acceptance``, except refusals only the caller's setup explains."""
    if _caller_specific(response, case):
        return None
    return positive_data_acceptance(ctx, response, case)  # type: ignore[no-any-return]


# Every check schemathesis has (``--checks all``), two of them narrowed as above.
CHECKS = [
    check
    for check in ALL_CHECKS.get_all()
    if check not in (not_a_server_error, positive_data_acceptance)
] + [not_a_broker_error, accepted_unless_caller_specific]


@pytest.fixture
def base_url(make_broker: Callable[..., tuple[str, Mapping[str, Backend]]]) -> str:
    url, _ = make_broker()
    return url


ADMIN_ONLY = {("GET", "/v1/audit/verify"), ("POST", "/v1/tools")}


def token_for(case: Any) -> dict[str, str]:
    """The admin token where only an admin gets past 403, the billing route's token elsewhere."""
    admin = (case.method.upper(), case.path) in ADMIN_ONLY or case.path == "/v1/tools/{name}"
    return ADMIN if admin else BILLING


BOUNDED = settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,  # one broker per operation, shared by its examples
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
    ],
)


@schema.parametrize()
@BOUNDED
def test_the_app_keeps_its_documented_contract(case: Any, base_url: str) -> None:
    case.call_and_validate(base_url=base_url, headers=token_for(case), checks=CHECKS, timeout=10)


@pipeline_schema.parametrize()
@settings(BOUNDED, max_examples=100)
def test_the_pipeline_keeps_its_documented_contract(case: Any, base_url: str) -> None:
    case.call_and_validate(base_url=base_url, headers=BILLING, checks=CHECKS, timeout=10)


# Random ids never find a record, so the 200 answers of the reads are checked on real ones here.
SCENARIOS = {
    "executed": credit(key="scenario-credit"),
    "dry_run": {**ticket(key="scenario-ticket"), "dry_run": True},
    "schema_invalid": {"tool": "issue_credit", "args": {"order_id": "O-55291"}},
    "precondition_failed": credit(key="scenario-unpaid", order="O-60000"),
    "provider_error": {"tool": "lookup_order", "args": {"order_id": "O-99999"}},
    "unknown_tool": {"tool": "no_such_tool", "args": {}},
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_real_decisions_and_their_reads_conform(scenario: str, base_url: str) -> None:
    proposal = SCENARIOS[scenario]
    propose = schema["/v1/proposals"]["POST"].Case(body=proposal, media_type="application/json")
    answer = propose.call_and_validate(base_url=base_url, headers=BILLING, checks=CHECKS)
    assert answer.json().get("code") == (None if scenario in ("executed", "dry_run") else scenario)
    replay = propose.call_and_validate(base_url=base_url, headers=BILLING, checks=CHECKS)
    assert replay.status_code == answer.status_code
    ids = {"proposal_id": answer.json()["proposal_id"], "trace_id": answer.json()["trace_id"]}
    for path in ("/v1/proposals/{proposal_id}", "/v1/traces/{trace_id}"):
        name = path.split("{")[1].rstrip("}")
        read = schema[path]["GET"].Case(path_parameters={name: ids[name]})
        response = read.call_and_validate(base_url=base_url, headers=BILLING, checks=CHECKS)
        assert response.status_code == 200, (path, response.text)
