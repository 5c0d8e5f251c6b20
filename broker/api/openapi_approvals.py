"""The OpenAPI contract of ``/v1/approvals`` (kept apart: it belongs to :mod:`broker.approvals`)."""

from __future__ import annotations

from typing import Any

from broker.api.openapi_contract import Operation
from broker.api.openapi_responses import JSON, internal, json_answer, problem, ref, store_down
from broker.api.openapi_responses import unauthenticated as _unauthenticated
from broker.taxonomy import Code

__all__ = ["approval_operations"]

_DIGEST = "sha256:" + "0" * 64


def _common() -> dict[str, dict[str, Any]]:
    return {
        "401": _unauthenticated(),
        "403": problem(
            403, codes=[Code.FORBIDDEN], note="Not an approver or admin token (route tokens never)."
        ),
        "500": internal(),
        "503": store_down("The store is unreachable; nothing was decided."),
    }


def _body(schema: str, description: str, example: dict[str, Any]) -> dict[str, Any]:
    return {
        "required": True,
        "description": description,
        "content": {JSON: {"schema": ref(schema), "examples": {"one": {"value": example}}}},
    }


def _decision(schema: str, description: str, example: dict[str, Any]) -> Operation:
    return Operation(
        request_body=_body(schema, description, example),
        responses={
            "200": json_answer(
                "The approval as decided (the same state when decided before).", ref("ApprovalView")
            ),
            "400": problem(400, codes=[Code.MALFORMED_REQUEST], note="Not JSON."),
            **_common(),
            "404": problem(404, note="No such approval, or another tenant's."),
            "409": problem(
                409,
                codes=[Code.APPROVAL_CONFLICT],
                note="Another digest than the approval's, or the other decision was taken.",
            ),
            "413": problem(413),
            "422": problem(422, codes=[Code.SCHEMA_INVALID], note="`errors` locates the field."),
        },
    )


def approval_operations() -> dict[tuple[str, str], Operation]:
    return {
        ("get", "/v1/approvals"): Operation(
            responses={
                "200": json_answer(
                    "The approvals this token decides, oldest first.", ref("ApprovalList")
                ),
                **_common(),
                "422": problem(422, codes=[Code.SCHEMA_INVALID], note="An unknown `status`."),
            }
        ),
        ("get", "/v1/approvals/{approval_id}"): Operation(
            responses={
                "200": json_answer("The approval.", ref("ApprovalView")),
                **_common(),
                "404": problem(404, note="No such approval, or another tenant's."),
            }
        ),
        ("post", "/v1/approvals/{approval_id}/approve"): _decision(
            "ApproveRequest",
            "The digest shown with the approval (it binds the approval to exactly that action).",
            {"digest": _DIGEST, "comment": "order checked"},
        ),
        ("post", "/v1/approvals/{approval_id}/deny"): _decision(
            "DenyRequest", "Why: the agent reads it in `reason`.", {"comment": "too large"}
        ),
    }
