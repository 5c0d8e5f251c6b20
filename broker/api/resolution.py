"""``POST /v1/resolutions``: resolve an idempotency key whose call's outcome is unknown.

Admin tokens and the backend token of the tool's namespace only (see :mod:`broker.resolution`).
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Controller, Request, Response, post

from broker.api.errors import problem_response
from broker.api.json_body import read_json_body
from broker.api.proposal_body import error_pointer, float_hook
from broker.api.shared import principal_of
from broker.model import FieldError
from broker.resolution import Refused, ResolutionRequest, Resolver
from broker.taxonomy import Code

__all__ = ["ResolutionController"]

# The proposal's own number hook: args must decode to the very values the fingerprint hashed.
_decoder = msgspec.json.Decoder(ResolutionRequest, float_hook=float_hook)
_encoder = msgspec.json.Encoder()


def _resolver(request: Request[Any, Any, Any]) -> Resolver:
    resolver: Resolver = request.app.state.resolver
    return resolver


class ResolutionController(Controller):
    path = "/v1/resolutions"

    @post(
        "/",
        status_code=200,
        operation_id="resolveOutcome",
        summary="Resolve an idempotency key whose outcome is unknown",
        description=(
            "Say what happened to a call answered outcome_unknown: succeeded (with its result), "
            "failed (with the error) or not_executed (the key is released and a retry executes). "
            "Name the key as the agent used it (tenant, route, idempotency_key) with the tool "
            "and args it proposed. Admin tokens, and the backend token of the tool's namespace. "
            "Recorded in the ledger."
        ),
        tags=["resolutions"],
    )
    async def resolve(self, request: Request[Any, Any, Any]) -> Response[bytes]:
        principal = principal_of(request)
        received = await read_json_body(request)  # 415, or 400 for a repeated key
        if isinstance(received, Response):
            return received
        try:
            body = _decoder.decode(received)
        except msgspec.ValidationError as exc:
            message = str(exc)
            pointer = error_pointer(message) or ""
            return problem_response(
                Code.SCHEMA_INVALID,
                "the body is not a valid resolution",
                errors=[FieldError(pointer, message.split(" - at ")[0])],
            )
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError, ValueError):
            return problem_response(
                Code.MALFORMED_REQUEST,
                "the body is not valid JSON",
                errors=[FieldError("", "expected a JSON object")],
            )
        outcome = await _resolver(request).resolve(principal, body)
        if isinstance(outcome, Refused):
            headers = {"Retry-After": "1"} if outcome.code is Code.STORE_UNAVAILABLE else None
            return problem_response(
                outcome.code, outcome.detail, errors=outcome.errors, headers=headers
            )
        return Response(content=_encoder.encode(outcome.answer), media_type="application/json")
