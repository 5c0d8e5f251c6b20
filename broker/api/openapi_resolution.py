"""The OpenAPI contract of ``POST /v1/resolutions`` (kept apart from the other operations': it
belongs to :mod:`broker.resolution`)."""

from __future__ import annotations

from broker.api.openapi_contract import Operation
from broker.api.openapi_responses import (
    JSON,
    internal,
    json_answer,
    problem,
    ref,
    store_down,
    unauthenticated,
)
from broker.taxonomy import Code

__all__ = ["resolution_operation"]


def resolution_operation() -> Operation:
    return Operation(
        request_body={
            "required": True,
            "description": (
                "The key as the agent used it, the tool and args it proposed (they must match "
                "the key's fingerprint), and what happened to the call."
            ),
            "content": {
                JSON: {
                    "schema": ref("ResolutionRequest"),
                    "examples": {
                        "succeeded": {
                            "summary": "The backend did issue the credit",
                            "value": {
                                "tenant": "acme",
                                "route": "billing_help",
                                "idempotency_key": "O-55291-USD-25-2025-10-16",
                                "tool": "issue_credit",
                                "args": {"order_id": "O-55291", "amount": 25, "currency": "USD"},
                                "outcome": "succeeded",
                                "result": {"credit_id": "CR-1001", "status": "issued"},
                            },
                        },
                        "not_executed": {
                            "summary": "The call never reached the backend: release the key",
                            "value": {
                                "tenant": "acme",
                                "route": "billing_help",
                                "idempotency_key": "O-55291-USD-25-2025-10-16",
                                "tool": "issue_credit",
                                "args": {"order_id": "O-55291", "amount": 25, "currency": "USD"},
                                "outcome": "not_executed",
                            },
                        },
                    },
                }
            },
        },
        responses={
            "200": json_answer(
                "Resolved: the key now replays the result or failure, or is released.",
                ref("ResolutionAnswer"),
            ),
            "400": problem(400, codes=[Code.MALFORMED_REQUEST], note="Not JSON."),
            "401": unauthenticated(),
            "403": problem(
                403,
                codes=[Code.FORBIDDEN],
                note="Not an admin token, nor the backend token of the tool's namespace.",
            ),
            "404": problem(404, note="No such key (tenant, route and key as the agent used them)."),
            "409": problem(
                409,
                codes=[Code.IDEMPOTENCY_IN_PROGRESS, Code.PRECONDITION_FAILED],
                note="The key's call is still running, or its outcome is already known.",
            ),
            "413": problem(413),
            "415": problem(415, note="The Content-Type is not JSON."),
            "422": problem(
                422,
                codes=[Code.SCHEMA_INVALID, Code.IDEMPOTENCY_KEY_REUSED],
                note="Not a valid resolution, or the key was claimed with another tool or args.",
            ),
            "500": internal(),
            "503": store_down("The store or the ledger is unreachable; nothing was changed."),
        },
    )
