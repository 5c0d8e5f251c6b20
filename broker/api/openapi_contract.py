"""The contract of each operation that Litestar cannot generate: its responses (with their
headers and the taxonomy's codes per status), header parameters the handler reads itself, the
request bodies it decodes itself, and examples. Keyed by method and path; ``build_spec`` fails
(strict) when a route has no entry here or an entry no route.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from broker.api.openapi_responses import (
    JSON,
    METRICS_TEXT,
    PROBLEM_JSON,
    internal,
    json_answer,
    problem,
    ref,
    store_down,
    unauthenticated,
)
from broker.model import Decision, FieldError, Problem
from broker.taxonomy import CODE_STATUS, Code

__all__ = ["Operation", "contract"]

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


@dataclass(frozen=True, slots=True)
class Operation:
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


def _proposal_operation() -> Operation:
    store_down = (
        "`provider_unavailable`: the backend (or a precondition's verifier) is unavailable or "
        "busy; nothing is stored under the key, retry after Retry-After. "
        "`store_unavailable`: nothing executed."
    )
    operation = Operation(
        headers=(_IDEMPOTENCY_KEY_PARAM, _TRACEPARENT_PARAM),
        request_body={
            "required": True,
            "description": (
                "The proposal. Unknown top-level fields are rejected (SCHEMA), so a caller "
                "cannot smuggle tenant or approved. Bodies over the configured limit (1 MiB in "
                "the demo) are refused with 413."
            ),
            "content": {JSON: {"schema": ref("ProposalRequest"), "examples": _PROPOSAL_EXAMPLES}},
        },
        responses={
            "200": json_answer(
                "Approved: executed (execution.status succeeded) or a dry run "
                "(execution.status dry_run), or the replay of such an answer.",
                ref("Decision"),
                headers=["Idempotent-Replayed"],
            ),
            "202": json_answer(
                "Pending approval: admitted and held, nothing executed; resend the same "
                "proposal (same key) for the final answer.",
                ref("PendingDecision"),
                headers=["Idempotent-Replayed"],
            ),
            "400": problem(400, shape=["Problem"], note="`errors` locates what is wrong."),
            "401": problem(
                401,
                shape=["Problem"],
                required_headers=["WWW-Authenticate"],
                note="The bearer token is missing, unknown or expired.",
            ),
            "403": problem(
                403, shape=["Problem"], note="`forbidden`: admin tokens cannot propose."
            ),
            "409": problem(
                409,
                shape=["Problem"],
                headers=["Retry-After"],
                note="`idempotency_in_progress` carries Retry-After.",
            ),
            "413": problem(413, shape=["Problem"]),
            "415": problem(415, shape=["Problem"], note="The Content-Type is not JSON."),
            "422": problem(422, shape=["Problem"], note="`errors` lists {path, message} pointers."),
            "429": problem(429, shape=["Problem"], required_headers=["Retry-After"]),
            "500": problem(500, shape=["Problem", "ProblemDetails"]),
            "502": problem(
                502,
                shape=["Problem"],
                headers=["Idempotent-Replayed"],
                note=(
                    "The execution failed: execution.error says why. A definite failure is "
                    "stored under the key and replays."
                ),
            ),
            "503": problem(
                503,
                shape=["Problem", "ProblemDetails"],
                headers=["Retry-After"],
                note=store_down,
            ),
            "504": problem(504, shape=["Problem"], note="The execution timed out."),
        },
    )
    operation.responses["200"]["content"][JSON]["examples"] = {
        "executed": {"summary": "Approved and executed", "value": _example_decision()}
    }
    operation.responses["422"]["content"][PROBLEM_JSON]["examples"] = {
        "schema_invalid": {"summary": "Invalid arguments", "value": _example_problem()}
    }
    return operation


def contract() -> dict[tuple[str, str], Operation]:
    from broker.api import openapi_native  # it imports Operation from here
    from broker.api.openapi_approvals import approval_operations  # it imports Operation
    from broker.api.openapi_catalog import catalog_operations  # it imports Operation
    from broker.api.openapi_resolution import resolution_operation  # it imports Operation
    from broker.api.openapi_tools import tool_operations  # it imports Operation

    return {
        **approval_operations(),
        **catalog_operations(),
        ("post", "/v1/resolutions"): resolution_operation(),
        ("post", "/v1/proposals"): _proposal_operation(),
        ("get", "/v1/proposals/{proposal_id}"): Operation(
            responses={
                "200": json_answer(
                    "The decision as it was answered: a Decision, or for a rejection or failed "
                    "execution the Problem (its HTTP status is not repeated here).",
                    {"anyOf": [ref("Decision"), ref("Problem")]},
                ),
                "401": unauthenticated(),
                "404": problem(
                    404, note="No such proposal, or another route's: both answer the same."
                ),
                "500": internal(),
                "503": store_down("The decision store is unreachable."),
            }
        ),
        ("get", "/v1/tools"): Operation(
            responses={
                "200": openapi_native.tools_listing(),
                "400": problem(400, codes=[Code.MALFORMED_REQUEST], note="An unknown format."),
                "401": unauthenticated(),
                "500": internal(),
                "503": problem(
                    503,
                    codes=[Code.SERVICE_UNAVAILABLE],
                    note=(
                        "A gateway or proxy route's catalog cannot be listed: a stored tool's "
                        "card breaks its bounds (checked at start and at registration, so only "
                        "a tool stored by an older version can)."
                    ),
                ),
            }
        ),
        ("get", "/v1/traces/{trace_id}"): Operation(
            responses={
                "200": json_answer("The trace's records, in chain order.", ref("TraceRecords")),
                "401": unauthenticated(),
                "404": problem(404, note="No records of this trace visible to the caller."),
                "500": internal(),
                "503": store_down("The ledger is unreachable."),
            }
        ),
        ("get", "/v1/audit/verify"): Operation(
            responses={
                "200": json_answer(
                    "The verdict on the whole chain and its signed checkpoints.",
                    ref("VerifyReport"),
                ),
                "401": unauthenticated(),
                "403": problem(403, codes=[Code.FORBIDDEN], note="Needs an admin token."),
                "500": internal(),
                "503": store_down("The ledger is unreachable."),
            }
        ),
        ("post", "/v1/implied-writes/check"): Operation(
            request_body={
                "required": True,
                "description": (
                    "The message to check, and the trace_id or the session_id (one is "
                    "required) whose executions it is judged against."
                ),
                "content": {
                    JSON: {
                        "schema": ref("CheckRequest"),
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
                "200": json_answer(
                    "Every claim with its verdict; violations are the claims not supported.",
                    ref("CheckResult"),
                ),
                "400": problem(
                    400,
                    codes=[Code.MALFORMED_REQUEST],
                    note="Not JSON, or a key repeated.",
                ),
                "401": unauthenticated(),
                "413": problem(413),
                "415": problem(415, note="The Content-Type is not JSON."),
                "422": problem(
                    422,
                    codes=[Code.SCHEMA_INVALID],
                    note="Not a check request, or neither trace_id nor session_id named.",
                ),
                "500": internal(),
                "503": store_down("The ledger is unreachable."),
            },
        ),
        ("get", "/livez"): Operation(
            public=True,
            responses={"200": json_answer("The process is alive.", ref("Liveness"))},
        ),
        ("get", "/readyz"): Operation(
            public=True,
            responses={
                "200": json_answer("The store and the ledger are reachable.", ref("Readiness")),
                "503": json_answer("The store or the ledger is unreachable.", ref("Readiness")),
                "500": internal(),
            },
        ),
        ("get", "/metrics"): Operation(
            public=True,
            responses={
                "200": {
                    "description": (
                        "Prometheus text exposition format (with several workers, every "
                        "worker's values)."
                    ),
                    "content": {METRICS_TEXT: {"schema": {"type": "string"}}},
                },
                "500": internal(),
            },
        ),
        **tool_operations(),
        **openapi_native.operations(),
    }
