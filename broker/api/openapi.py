"""The OpenAPI 3.1 description of the HTTP API: Litestar's skeleton, the wire contract filled in.

Why not Litestar's generator alone: the handlers take the raw ``Request`` and decode and encode
with msgspec themselves (to own the error shapes and the speed), so Litestar sees no request body
and a ``Response[bytes]`` return: it documents every answer as ``{"type": "string"}`` and adds a
400 "Validation Exception" shape the broker never sends. ``ResponseSpec`` on the decorators does
not close the gap: it cannot describe response headers (``Retry-After``, ``Idempotent-Replayed``,
``WWW-Authenticate``), it generates random examples by default, its struct schemas are not what
msgspec decodes (no ``additionalProperties: false`` for ``forbid_unknown_fields``), and Litestar
overwrites ``components.schemas`` from its own registry, so exact schemas cannot be injected there.

So the document is built in two layers:

1. Litestar produces the skeleton from the typed handlers: paths, path and query parameters
   (typed in their signatures, with their ``Parameter`` descriptions), and the human parts the
   route decorators carry (``operation_id``, ``summary``, ``description``, ``tags``). A new
   route therefore shows up by itself.
2. :func:`build_spec` post-processes ``app.openapi_schema.to_schema()``: each operation's
   responses, header parameters, request body and security come from :func:`_contract`
   (keyed by method and path), and ``components.schemas`` from ``msgspec.json.schema_components`` over the
   very structs the handlers encode and decode (``broker.model``, ``VerifyReport``,
   ``LedgerRecord``; a few documentation-only structs below mirror the dict-shaped answers).
   Problem statuses, codes and their descriptions are derived from ``broker.taxonomy.CODE_STATUS``,
   so the spec cannot drift from the taxonomy. Output structs list every field as ``required``
   (msgspec encodes defaults), except where the struct omits defaults.

The same document is served at ``/schema/openapi.json`` and ``/schema/openapi.yaml`` (through
render plugins that call :func:`build_spec`, so what is served is what is committed), and written
to ``openapi/`` by ``broker openapi export`` (:func:`export`): sorted keys, no timestamps.
``tests/integration/test_openapi.py`` fails when the committed files are stale, when a route has
no contract here (``build_spec(strict=True)``), or when the document is not valid OpenAPI 3.1;
``test_schemathesis.py`` checks the running app against it. A new route needs an entry in
:func:`_contract` and a ``broker openapi export``.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import msgspec
from litestar.enums import OpenAPIMediaType
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import OpenAPIRenderPlugin

from broker.config import REGISTERED_NAME
from broker.implied_checks import CheckRequest, CheckResult
from broker.ledger.model import LedgerRecord
from broker.ledger.verify import VerifyReport
from broker.model import Decision, FieldError, Problem, ProblemDetails, ProposalRequest, Risk
from broker.registration import ConfigToolView, Registration, RegistrationAnswer
from broker.taxonomy import CODE_STATUS, Category, Code

if TYPE_CHECKING:
    from litestar import Litestar, Request

__all__ = [
    "SPEC_FILES",
    "UndocumentedOperationError",
    "build_spec",
    "export",
    "openapi_config",
    "render_json",
    "render_yaml",
]

TITLE = "Action broker"
API_VERSION = "1.0.0"
"""The version of this HTTP contract (``/v1``); bump it when the document changes meaning."""
SCHEMA_PATH = "/schema"
SPEC_FILES = ("openapi.json", "openapi.yaml")

JSON = "application/json"
PROBLEM_JSON = "application/problem+json"
METRICS_TEXT = "text/plain"

_REF = "#/components/schemas/{name}"
_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


# -- documentation-only structs: the answers the handlers build as dicts --------------------------


class ToolDescription(msgspec.Struct, kw_only=True):
    """A tool as an agent runtime needs it; never adapters or credentials."""

    name: str
    tool_id: str
    description: str
    input_schema: dict[str, Any]
    risk: Risk
    preconditions: list[str]
    idempotent: bool


class ToolList(msgspec.Struct, kw_only=True):
    """The tools the caller's route may call (every tool, for an admin)."""

    tools: list[ToolDescription]


class TraceRecords(msgspec.Struct, kw_only=True):
    """The ledger records of one trace, in chain order: proposal, decision, execution."""

    trace_id: str
    records: list[LedgerRecord]


class Liveness(msgspec.Struct, kw_only=True):
    """The process is alive."""

    status: Literal["ok"]


class ReadinessChecks(msgspec.Struct, kw_only=True):
    config: Literal["ok"]
    store: Literal["ok", "unavailable"]
    ledger: Literal["ok", "unavailable"]


class Readiness(msgspec.Struct, kw_only=True):
    """Whether the store and the ledger are reachable (the config is loaded by construction)."""

    status: Literal["ok", "unavailable"]
    checks: ReadinessChecks


_INPUT_STRUCTS: tuple[type[msgspec.Struct], ...] = (ProposalRequest, CheckRequest, Registration)
_OUTPUT_STRUCTS: tuple[type[msgspec.Struct], ...] = (
    RegistrationAnswer,
    ConfigToolView,
    Decision,
    Problem,
    ProblemDetails,
    ToolList,
    TraceRecords,
    VerifyReport,
    CheckResult,
    Liveness,
    Readiness,
)

_FIELD_DOCS: dict[str, dict[str, str]] = {
    "ProposalRequest": {
        "tool": "The tool to run, as listed by GET /v1/tools.",
        "args": "The tool's arguments; checked against its input_schema.",
        "preconditions": (
            "What the model believes holds. The broker always checks the tool's own declared "
            "preconditions whatever is listed; a name the broker does not know is a SCHEMA "
            "rejection (unknown_precondition)."
        ),
        "idempotency_key": (
            "Required for every tool whose risk is not read: 1-255 printable ASCII characters, "
            "scoped to (tenant, route). Same key, same tool and equal args replays the stored "
            "answer; different tool or args is 422 idempotency_key_reused. May be sent as the "
            "Idempotency-Key header instead; if both are given they must be equal."
        ),
        "reason": "Why the model proposes this, for the audit trail.",
        "trace_id": (
            "1-128 printable ASCII characters without spaces; when absent or not of that form, "
            "taken from traceparent or generated, and returned."
        ),
        "session_id": "The conversation this proposal belongs to.",
        "dry_run": (
            "Run the whole chain but execute nothing and spend no budget, rate or idempotency "
            "state; a dry run never satisfies a later real run with the same key."
        ),
    },
    "Decision": {
        "proposal_id": "prp_ followed by a ULID.",
        "decision": "approved or rejected; a failed execution of an approved proposal is approved.",
        "category": "The failure category (null when the proposal succeeded).",
        "code": "The failure code (null when the proposal succeeded).",
        "remediation": "What the agent should do next, in one line (e.g. ASK_FOR_MORE: ...).",
        "errors": "For SCHEMA failures: each problem located by an RFC 6901 JSON Pointer.",
        "replayed": "true when this is the stored answer to an earlier request with the same key.",
        "execution": "The adapter call; null when nothing was executed.",
        "audit": "Where the proposal landed in the ledger's hash chain.",
    },
    "Execution": {
        "status": "succeeded, failed (then error is set and the HTTP status is 502/504), dry_run.",
        "result": "The adapter's result (or its preview for a dry run).",
        "started_at": "RFC 3339 UTC with milliseconds.",
        "ended_at": "RFC 3339 UTC with milliseconds.",
    },
}

_CATEGORY_MEANING: dict[Category, str] = {
    Category.SCHEMA: "args missing or invalid, unknown tool, malformed proposal",
    Category.AUTHZ: "the caller may not do this",
    Category.PRECONDITION: "a check against the data plane, a budget, a rate limit or a policy failed",
    Category.IDEMPOTENCY: "the duplicate-request machinery answered",
    Category.PROVIDER: "the adapter or the backend behind it failed",
    Category.TIMEOUT: "the adapter did not answer within its deadline",
    Category.UNAVAILABLE: "the broker cannot reach its own state (store or ledger); nothing was executed",
    Category.INTERNAL: "an unexpected fault (a bug); no internals are leaked",
}

_INFO_DESCRIPTION = "\n".join(
    [
        "Every rejection and failed execution carries one `category` and one finer `code` and is "
        "answered as RFC 9457 `application/problem+json`. Categories:",
        "",
        *(f"- `{category.value}`: {meaning}." for category, meaning in _CATEGORY_MEANING.items()),
        "",
        "Every endpoint but the probes and /metrics needs `Authorization: Bearer <token>`. "
        f"This document is served at {SCHEMA_PATH}/openapi.json and {SCHEMA_PATH}/openapi.yaml.",
    ]
)

_STATUS_TITLE = {
    400: "Bad request",
    401: "Unauthenticated",
    403: "Forbidden",
    404: "Not found",
    409: "Conflict",
    413: "Payload too large",
    422: "Unprocessable content",
    429: "Too many requests",
    500: "Internal error",
    502: "Provider error",
    503: "Unavailable",
    504: "Timeout",
}


# -- building blocks ------------------------------------------------------------------------------


def _ref(name: str) -> dict[str, str]:
    return {"$ref": _REF.format(name=name)}


def _header_ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/headers/{name}"}


_HEADERS: dict[str, dict[str, Any]] = {
    "Retry-After": {
        "description": "Seconds to wait before retrying.",
        "schema": {"type": "integer", "minimum": 1},
    },
    "Idempotent-Replayed": {
        "description": (
            "Present (true) when this is the stored answer to an earlier request with the same "
            "idempotency key; the adapter was not called again."
        ),
        "schema": {"type": "string", "enum": ["true"]},
    },
    "Location": {
        "description": "Where the tool is read: /v1/tools/{name}.",
        "schema": {"type": "string"},
    },
    "Cache-Control": {
        "description": "no-store: the answer may carry the tool's signing secret.",
        "schema": {"type": "string", "enum": ["no-store"]},
    },
    "WWW-Authenticate": {
        "description": "The scheme to authenticate with.",
        "schema": {"type": "string", "enum": ["Bearer"]},
    },
}

_IDEMPOTENCY_KEY_PARAM: dict[str, Any] = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": (
        "Same meaning as the body's idempotency_key; if both are given they must be equal "
        "(else 400 idempotency_key_invalid)."
    ),
    "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[\\x20-\\x7e]+$"},
}

_TRACEPARENT_PARAM: dict[str, Any] = {
    "name": "traceparent",
    "in": "header",
    "required": False,
    # Any string: W3C Trace Context says a receiver ignores a traceparent it cannot parse (and
    # starts a new trace) rather than failing the request, so a malformed one is not refused.
    "description": (
        "W3C Trace Context, `version-traceid-parentid-flags` in lower-case hex "
        "(`00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01`). Its trace id becomes the "
        "proposal's trace_id when the body has none. A value of any other form never fails the "
        "request (W3C: a receiver ignores a traceparent it cannot parse); it is not used for "
        "the trace_id."
    ),
    "schema": {"type": "string"},
}

_PATH_PARAM_DOCS = {
    "name": "A tool's name, e.g. billing.refund (registered tools are <namespace>.<name>).",
    "proposal_id": "The proposal_id of a decision (prp_…).",
    "trace_id": "The trace_id of a decision.",
}


def _codes_for(status: int) -> list[Code]:
    return [code for code, (_, code_status) in CODE_STATUS.items() if code_status == status]


def _describe(status: int, codes: Sequence[Code], note: str | None) -> str:
    by_category: dict[Category, list[str]] = {}
    for code in codes:
        by_category.setdefault(CODE_STATUS[code][0], []).append(f"`{code.value}`")
    parts = [f"{category.value}: {', '.join(names)}" for category, names in by_category.items()]
    text = f"{_STATUS_TITLE.get(status, str(status))}. " + "; ".join(parts) + "."
    return f"{text} {note}" if note else text


def _problem(
    status: int,
    *,
    shape: Sequence[str] = ("ProblemDetails",),
    codes: Sequence[Code] | None = None,
    headers: Iterable[str] = (),
    required_headers: Iterable[str] = (),
    note: str | None = None,
) -> dict[str, Any]:
    """A problem+json response: ``shape`` names the schema(s), ``codes`` default to the status's."""
    codes = list(codes) if codes is not None else _codes_for(status)
    for code in codes:
        if CODE_STATUS[code][1] != status:
            raise ValueError(f"{code.value} answers {CODE_STATUS[code][1]}, not {status}")
    base: dict[str, Any] = (
        _ref(shape[0]) if len(shape) == 1 else {"anyOf": [_ref(s) for s in shape]}
    )
    schema = {
        "allOf": [
            base,
            {
                "type": "object",
                "properties": {
                    "status": {"const": status},
                    "code": {"enum": [code.value for code in codes]},
                },
            },
        ]
    }
    response: dict[str, Any] = {
        "description": _describe(status, codes, note),
        "content": {PROBLEM_JSON: {"schema": schema}},
    }
    _add_headers(response, headers, required_headers)
    return response


def _add_headers(
    response: dict[str, Any], headers: Iterable[str], required_headers: Iterable[str] = ()
) -> None:
    # A Reference Object cannot carry "required": required headers are written out in full.
    required = list(required_headers)
    names = list(dict.fromkeys([*headers, *required]))
    if names:
        response["headers"] = {
            name: {**_HEADERS[name], "required": True} if name in required else _header_ref(name)
            for name in names
        }


def _json(
    description: str, schema: dict[str, Any], *, headers: Iterable[str] = ()
) -> dict[str, Any]:
    response: dict[str, Any] = {"description": description, "content": {JSON: {"schema": schema}}}
    _add_headers(response, headers)
    return response


def _unauthenticated() -> dict[str, Any]:
    return _problem(
        401,
        required_headers=["WWW-Authenticate"],
        note="The bearer token is missing, unknown or expired.",
    )


def _internal() -> dict[str, Any]:
    return _problem(500)


def _store_down(note: str) -> dict[str, Any]:
    return _problem(503, codes=[Code.STORE_UNAVAILABLE], headers=["Retry-After"], note=note)


# -- the contract, operation by operation ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Operation:
    responses: dict[str, dict[str, Any]]
    headers: tuple[dict[str, Any], ...] = ()
    request_body: dict[str, Any] | None = None
    public: bool = False
    """Needs no bearer token (probes and scrapes)."""


def _example_decision() -> dict[str, Any]:
    from broker.model import AuditInfo, Execution

    decision = Decision(
        proposal_id="prp_01JC8Z6W3F5K3Q7V9X2B4N6M8P",
        trace_id="x-9af3",
        tool="issue_credit",
        decision="approved",
        execution=Execution(
            status="succeeded",
            result={"credit_id": "CR-1001", "amount": 25, "currency": "USD", "status": "issued"},
            attempts=1,
            started_at="2026-11-22T10:00:00.000Z",
            ended_at="2026-11-22T10:00:00.012Z",
        ),
        audit=AuditInfo(seq=17, hash="sha256:" + "5e" * 32),
    )
    builtins: dict[str, Any] = msgspec.to_builtins(decision)
    return builtins


def _example_problem() -> dict[str, Any]:
    code = Code.SCHEMA_INVALID
    problem = Problem(
        proposal_id="prp_01JC8Z7A1D2E3F4G5H6J7K8M9N",
        trace_id="x-9af4",
        tool="issue_credit",
        decision="rejected",
        category=CODE_STATUS[code][0].value,
        code=code.value,
        reason="1 problem(s) with the arguments of issue_credit",
        remediation="REPAIR: fix the arguments listed in errors and resend",
        errors=[FieldError("/args/amount", "must be greater than 0")],
        type=f"urn:action-broker:problem:{code.value}",
        title="Schema invalid",
        status=422,
        detail="1 problem(s) with the arguments of issue_credit",
        audit=None,
    )
    builtins: dict[str, Any] = msgspec.to_builtins(problem)
    return builtins


_PROPOSAL_EXAMPLES: dict[str, dict[str, Any]] = {
    "issue_credit": {
        "summary": "A partial refund (risk write: needs an idempotency key)",
        "value": {
            "tool": "issue_credit",
            "args": {"order_id": "O-55291", "amount": 25, "currency": "USD"},
            "preconditions": ["order_paid", "within_return_window"],
            "idempotency_key": "O-55291-USD-25-2025-10-16",
            "reason": "customer asked for a partial refund",
            "trace_id": "x-9af3",
            "session_id": "chat-881",
            "dry_run": False,
        },
    },
    "lookup_order": {
        "summary": "A read (no key needed)",
        "value": {"tool": "lookup_order", "args": {"order_id": "O-55291"}},
    },
    "dry_run": {
        "summary": "A dry run: the whole chain, nothing executed or spent",
        "value": {
            "tool": "create_support_ticket",
            "args": {
                "customer_id": "C-10429",
                "subject": "Billing discrepancy",
                "priority": "high",
            },
            "preconditions": ["customer_verified", "open_invoice_present"],
            "idempotency_key": "ticket-C-10429-1",
            "dry_run": True,
        },
    },
}


def _proposal_operation() -> _Operation:
    store_down = (
        "`provider_unavailable`: the backend said so. `store_unavailable`: nothing executed."
    )
    operation = _Operation(
        headers=(_IDEMPOTENCY_KEY_PARAM, _TRACEPARENT_PARAM),
        request_body={
            "required": True,
            "description": (
                "The proposal. Unknown top-level fields are rejected (SCHEMA), so a caller "
                "cannot smuggle tenant or approved. Bodies over the configured limit (1 MiB in "
                "the demo) are refused with 413."
            ),
            "content": {JSON: {"schema": _ref("ProposalRequest"), "examples": _PROPOSAL_EXAMPLES}},
        },
        responses={
            "200": _json(
                "Approved: executed (execution.status succeeded) or a dry run "
                "(execution.status dry_run), or the replay of such an answer.",
                _ref("Decision"),
                headers=["Idempotent-Replayed"],
            ),
            "400": _problem(400, shape=["Problem"], note="`errors` locates what is wrong."),
            "401": _problem(
                401,
                shape=["Problem"],
                required_headers=["WWW-Authenticate"],
                note="The bearer token is missing, unknown or expired.",
            ),
            "403": _problem(
                403, shape=["Problem"], note="`forbidden`: admin tokens cannot propose."
            ),
            "409": _problem(
                409,
                shape=["Problem"],
                headers=["Retry-After"],
                note="`idempotency_in_progress` carries Retry-After.",
            ),
            "413": _problem(413, shape=["Problem"]),
            "422": _problem(
                422, shape=["Problem"], note="`errors` lists {path, message} pointers."
            ),
            "429": _problem(429, shape=["Problem"], required_headers=["Retry-After"]),
            "500": _problem(500, shape=["Problem", "ProblemDetails"]),
            "502": _problem(
                502,
                shape=["Problem"],
                headers=["Idempotent-Replayed"],
                note=(
                    "The execution failed: execution.error says why. A definite failure is "
                    "stored under the key and replays."
                ),
            ),
            "503": _problem(
                503,
                shape=["Problem", "ProblemDetails"],
                headers=["Retry-After"],
                note=store_down,
            ),
            "504": _problem(504, shape=["Problem"], note="The execution timed out."),
        },
    )
    operation.responses["200"]["content"][JSON]["examples"] = {
        "executed": {"summary": "Approved and executed", "value": _example_decision()}
    }
    operation.responses["422"]["content"][PROBLEM_JSON]["examples"] = {
        "schema_invalid": {"summary": "Invalid arguments", "value": _example_problem()}
    }
    return operation


def _contract() -> dict[tuple[str, str], _Operation]:
    return {
        ("post", "/v1/proposals"): _proposal_operation(),
        ("get", "/v1/proposals/{proposal_id}"): _Operation(
            responses={
                "200": _json(
                    "The decision as it was answered: a Decision, or for a rejection or failed "
                    "execution the Problem (its HTTP status is not repeated here).",
                    {"anyOf": [_ref("Decision"), _ref("Problem")]},
                ),
                "401": _unauthenticated(),
                "404": _problem(
                    404, note="No such proposal, or another route's: both answer the same."
                ),
                "500": _internal(),
                "503": _store_down("The decision store is unreachable."),
            }
        ),
        ("get", "/v1/tools"): _Operation(
            responses={
                "200": _json("The tools this route may call.", _ref("ToolList")),
                "401": _unauthenticated(),
                "500": _internal(),
            }
        ),
        ("get", "/v1/traces/{trace_id}"): _Operation(
            responses={
                "200": _json("The trace's records, in chain order.", _ref("TraceRecords")),
                "401": _unauthenticated(),
                "404": _problem(404, note="No records of this trace visible to the caller."),
                "500": _internal(),
                "503": _store_down("The ledger is unreachable."),
            }
        ),
        ("get", "/v1/audit/verify"): _Operation(
            responses={
                "200": _json(
                    "The verdict on the whole chain and its signed checkpoints.",
                    _ref("VerifyReport"),
                ),
                "401": _unauthenticated(),
                "403": _problem(403, codes=[Code.FORBIDDEN], note="Needs an admin token."),
                "500": _internal(),
                "503": _store_down("The ledger is unreachable."),
            }
        ),
        ("post", "/v1/implied-writes/check"): _Operation(
            request_body={
                "required": True,
                "description": (
                    "The message to check, and the trace_id or the session_id (one is "
                    "required) whose executions it is judged against."
                ),
                "content": {
                    JSON: {
                        "schema": _ref("CheckRequest"),
                        "examples": {
                            "claim": {
                                "summary": "A message that claims a credit was issued",
                                "value": {
                                    "text": "I've issued a credit of 25 USD for order O-55291.",
                                    "trace_id": "x-9af3",
                                },
                            }
                        },
                    }
                },
            },
            responses={
                "200": _json(
                    "Every claim with its verdict; violations are the claims not supported.",
                    _ref("CheckResult"),
                ),
                "400": _problem(400, codes=[Code.MALFORMED_REQUEST], note="Not JSON."),
                "401": _unauthenticated(),
                "413": _problem(413),
                "422": _problem(
                    422,
                    codes=[Code.SCHEMA_INVALID],
                    note="Not a check request, or neither trace_id nor session_id named.",
                ),
                "500": _internal(),
                "503": _store_down("The ledger is unreachable."),
            },
        ),
        ("get", "/livez"): _Operation(
            public=True,
            responses={"200": _json("The process is alive.", _ref("Liveness"))},
        ),
        ("get", "/readyz"): _Operation(
            public=True,
            responses={
                "200": _json("The store and the ledger are reachable.", _ref("Readiness")),
                "503": _json("The store or the ledger is unreachable.", _ref("Readiness")),
                "500": _internal(),
            },
        ),
        ("get", "/metrics"): _Operation(
            public=True,
            responses={
                "200": {
                    "description": (
                        "Prometheus text exposition format (with several workers, every "
                        "worker's values)."
                    ),
                    "content": {METRICS_TEXT: {"schema": {"type": "string"}}},
                },
                "500": _internal(),
            },
        ),
        **_registration_operations(),
    }


def _registration_operations() -> dict[tuple[str, str], _Operation]:
    """``POST /v1/tools``, ``GET`` and ``DELETE /v1/tools/{name}`` (broker/api/tools.py)."""
    forbidden = _problem(
        403,
        codes=[Code.FORBIDDEN],
        note=(
            "A route token; a backend token outside its namespace; removing a tool defined in "
            "the config."
        ),
    )
    example = {
        "name": "ops.restart_service",
        "description": "Restart one service of the tenant.",
        "input_schema": {
            "type": "object",
            "additionalProperties": False,
            "required": ["service"],
            "properties": {"service": {"type": "string"}},
        },
        "risk": "write",
        "idempotent": False,
        "preconditions": [],
        "routes": ["billing_help"],
        "adapter": {"kind": "http", "url": "http://127.0.0.1:9000/restart", "timeout_s": 2.0},
        "claims": {"verbs": ["restart", "reboot"], "nouns": ["service"]},
    }
    return {
        ("post", "/v1/tools"): _Operation(
            request_body={
                "required": True,
                "description": (
                    "The tool: schema (Draft 2020-12, safe regexes), risk, preconditions "
                    "(existing, or brought as HTTP verifiers), routes to grant it to, adapter "
                    "(an http or mcp URL the broker's http_allowlist allows) and claim words."
                ),
                "content": {
                    JSON: {
                        "schema": _ref("Registration"),
                        "examples": {"http": {"summary": "An HTTP tool", "value": example}},
                    }
                },
            },
            responses={
                "200": _json(
                    "Replaced; the earlier signing secret is kept unless rotated.",
                    _ref("RegistrationAnswer"),
                    headers=["Location", "Cache-Control"],
                ),
                "201": _json(
                    "Registered; the answer carries the signing secret, once.",
                    _ref("RegistrationAnswer"),
                    headers=["Location", "Cache-Control"],
                ),
                "400": _problem(400, codes=[Code.MALFORMED_REQUEST], note="Not JSON."),
                "401": _unauthenticated(),
                "403": forbidden,
                "413": _problem(413),
                "422": _problem(
                    422,
                    codes=[Code.SCHEMA_INVALID],
                    note="Every problem with the registration, located by JSON Pointer.",
                ),
                "500": _internal(),
                "503": _store_down("The store is unreachable; nothing was registered."),
            },
        ),
        ("get", "/v1/tools/{name}"): _Operation(
            responses={
                "200": _json(
                    "The tool: as registered (never its signing secret), or from the config.",
                    {"anyOf": [_ref("RegisteredToolView"), _ref("ConfigToolView")]},
                ),
                "401": _unauthenticated(),
                "403": forbidden,
                "404": _problem(404, note="No such tool."),
                "500": _internal(),
                "503": _store_down("The store is unreachable."),
            }
        ),
        ("delete", "/v1/tools/{name}"): _Operation(
            responses={
                "204": {"description": "Removed: no route can call it any longer."},
                "401": _unauthenticated(),
                "403": forbidden,
                "404": _problem(404, note="No such registered tool."),
                "500": _internal(),
                "503": _store_down("The store is unreachable; nothing was removed."),
            }
        ),
    }


# -- components -----------------------------------------------------------------------------------


def _struct_types(roots: Iterable[type[msgspec.Struct]]) -> dict[str, type[msgspec.Struct]]:
    """Every struct reachable from ``roots``, by the name msgspec gives its component."""
    found: dict[str, type[msgspec.Struct]] = {}
    for info in msgspec.inspect.multi_type_info(list(roots)):
        _collect(info, found)
    return found


def _collect(info: msgspec.inspect.Type, found: dict[str, type[msgspec.Struct]]) -> None:
    if isinstance(info, msgspec.inspect.StructType):
        if info.cls.__name__ in found:
            return
        found[info.cls.__name__] = info.cls
        for item in info.fields:
            _collect(item.type, found)
        return
    for attr in ("item_type", "key_type", "value_type"):
        inner = getattr(info, attr, None)
        if isinstance(inner, msgspec.inspect.Type):
            _collect(inner, found)
    for inner in getattr(info, "types", None) or getattr(info, "item_types", None) or ():
        if isinstance(inner, msgspec.inspect.Type):
            _collect(inner, found)


def _schemas() -> dict[str, Any]:
    _, schemas = msgspec.json.schema_components(
        [*_INPUT_STRUCTS, *_OUTPUT_STRUCTS], ref_template=_REF
    )
    inputs = {cls.__name__ for cls in _INPUT_STRUCTS}
    for name, cls in _struct_types(_OUTPUT_STRUCTS).items():
        if name in inputs or cls.__struct_config__.omit_defaults:
            continue
        # msgspec encodes every field of these, defaults included: a client may rely on them.
        schema = schemas[name]
        schema["required"] = list(schema.get("properties", {}))
    for name, docs in _FIELD_DOCS.items():
        for prop, text in docs.items():
            schemas[name]["properties"][prop]["description"] = text
    schemas["ProposalRequest"]["properties"]["idempotency_key"]["anyOf"][0].update(
        {"minLength": 1, "maxLength": 255, "pattern": "^[\\x20-\\x7e]+$"}
    )
    # What the handlers check beyond the structs' types, so that a body the document allows is
    # one the broker accepts: a registered tool's name, and the trace or session a check names.
    schemas["Registration"]["properties"]["name"]["pattern"] = REGISTERED_NAME.pattern
    schemas["CheckRequest"]["anyOf"] = [
        {"required": [key], "properties": {key: {"type": "string", "minLength": 1}}}
        for key in ("trace_id", "session_id")
    ]
    categories = [category.value for category in Category]
    codes = [code.value for code in Code]
    for name in ("Problem", "ProblemDetails"):
        properties = schemas[name]["properties"]
        properties["category"] = {"enum": categories, "description": "The failure category."}
        properties["code"] = {"enum": codes, "description": "The failure code."}
        properties["type"]["description"] = "urn:action-broker:problem:<code>"
        properties["status"].update({"minimum": 400, "maximum": 599})
    schemas["ToolDescription"]["properties"]["input_schema"]["description"] = (
        "The JSON Schema the tool's args are checked against."
    )
    return schemas


# -- assembling the document ----------------------------------------------------------------------


class UndocumentedOperationError(RuntimeError):
    """A route has no entry in the contract (or the contract names a route that is gone)."""


def build_spec(app: Litestar, *, strict: bool = True) -> dict[str, Any]:
    """The finished OpenAPI document for ``app`` as plain JSON data.

    Args:
        app: an app built by :func:`broker.app.create_app` (its ``openapi_config`` set).
        strict: raise :class:`UndocumentedOperationError` when an operation has no contract
            here; otherwise leave such an operation as Litestar describes it.
    """
    spec: dict[str, Any] = json.loads(
        json.dumps(msgspec.to_builtins(app.openapi_schema.to_schema()))
    )
    contract = _contract()
    seen: set[tuple[str, str]] = set()
    undocumented: list[str] = []
    for path, item in spec.get("paths", {}).items():
        for method, operation in item.items():
            if method not in _METHODS:
                continue
            entry = contract.get((method, path))
            if entry is None:
                undocumented.append(f"{method.upper()} {path}")
                continue
            seen.add((method, path))
            _apply(operation, entry)
    stale = [f"{method.upper()} {path}" for method, path in contract if (method, path) not in seen]
    if strict and (undocumented or stale):
        raise UndocumentedOperationError(
            "the OpenAPI contract in broker/api/openapi.py does not match the routes: "
            f"undocumented {undocumented or 'none'}, no longer routed {stale or 'none'}"
        )
    spec["security"] = [{"bearer": []}]
    components = spec.setdefault("components", {})
    components["schemas"] = _schemas()
    used = json.dumps(spec["paths"])
    components["headers"] = {
        name: copy.deepcopy(header)
        for name, header in _HEADERS.items()
        if json.dumps(_header_ref(name)) in used
    }
    components["securitySchemes"] = {
        "bearer": {
            "type": "http",
            "scheme": "bearer",
            "description": (
                "A route token (the principal: service account, route, tenant, allowed tools) "
                "or an admin token; short-lived signed tokens come from `broker token mint`. "
                "Nothing in a request body can widen it."
            ),
        }
    }
    spec["tags"] = [
        {"name": "proposals", "description": "Propose tool calls and read decisions."},
        {"name": "tools", "description": "The tools a route may call."},
        {"name": "audit", "description": "The hash-chained ledger."},
        {
            "name": "implied-writes",
            "description": "Claims in an agent's prose that no execution backs.",
        },
        {"name": "operations", "description": "Probes and metrics; no token needed."},
    ]
    # Plain JSON values only (msgspec schemas carry Python defaults such as ``()``), so the
    # document is the same whether it is built, served or read back from openapi/.
    normalized: dict[str, Any] = json.loads(json.dumps(spec))
    return normalized


def _apply(operation: dict[str, Any], entry: _Operation) -> None:
    if operation.get("deprecated") is False:
        del operation["deprecated"]
    parameters: list[dict[str, Any]] = []
    for parameter in operation.get("parameters", []):
        if parameter.get("deprecated") is False:
            del parameter["deprecated"]
        if parameter.get("in") == "path":
            parameter["schema"] = {**parameter.get("schema", {}), "minLength": 1}
            doc = _PATH_PARAM_DOCS.get(parameter["name"])
            if doc:
                parameter["description"] = doc
        parameters.append(parameter)
    parameters.extend(copy.deepcopy(list(entry.headers)))
    if parameters:
        operation["parameters"] = parameters
    if entry.request_body is not None:
        operation["requestBody"] = copy.deepcopy(entry.request_body)
    operation["responses"] = copy.deepcopy(entry.responses)
    if entry.public:
        operation["security"] = []


# -- rendering, serving, exporting ----------------------------------------------------------------


def render_json(spec: Mapping[str, Any]) -> str:
    """Indent 2, sorted keys, trailing newline: the committed form."""
    return json.dumps(spec, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def render_yaml(spec: Mapping[str, Any]) -> str:
    import yaml

    text: str = yaml.safe_dump(
        dict(spec), sort_keys=True, allow_unicode=True, default_flow_style=False, width=100
    )
    return text


class _SpecPlugin(OpenAPIRenderPlugin):
    """Serves the finished document (not Litestar's skeleton) in one format."""

    def __init__(self, fmt: Literal["json", "yaml"]) -> None:
        if fmt == "json":
            super().__init__(path="/openapi.json", media_type=OpenAPIMediaType.OPENAPI_JSON)
        else:
            super().__init__(
                path=["/openapi.yaml", "/openapi.yml"], media_type=OpenAPIMediaType.OPENAPI_YAML
            )
        self._format = fmt
        self._rendered: bytes | None = None

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        if self._rendered is None:
            spec = build_spec(request.app, strict=False)
            text = render_json(spec) if self._format == "json" else render_yaml(spec)
            self._rendered = text.encode()
        return self._rendered


def openapi_config() -> OpenAPIConfig:
    """What :func:`broker.app.create_app` passes as ``openapi_config`` (a fresh one per app)."""
    return OpenAPIConfig(
        title=TITLE,
        version=API_VERSION,
        summary="Models propose, the broker validates, executes with least privilege and records.",
        description=_INFO_DESCRIPTION,
        path=SCHEMA_PATH,
        render_plugins=[_SpecPlugin("json"), _SpecPlugin("yaml")],
    )


def export(spec: Mapping[str, Any], out: str | os.PathLike[str]) -> list[Path]:
    """Write ``openapi.json`` and ``openapi.yaml`` under ``out``; return their paths."""
    directory = Path(out)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in zip(SPEC_FILES, (render_json(spec), render_yaml(spec)), strict=True):
        path = directory / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
