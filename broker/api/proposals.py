"""``POST /v1/proposals`` and ``GET /v1/proposals/{id}``."""

from __future__ import annotations

import math
import re
from typing import Any

import msgspec
from litestar import Controller, Request, Response, get, post
from litestar.params import FromPath

from broker.api.errors import problem_response
from broker.api.state import answer_response, broker_state, principal_of
from broker.model import FieldError, ProposalRequest
from broker.taxonomy import Code

__all__ = ["ProposalController", "decode_proposal"]

_AT = re.compile(r" - at `\$(.*)`$")
_FIELD = re.compile(r"(?:unknown|missing required) field `([^`]+)`")


def _float_hook(text: str) -> float | int:
    # Canonical JSON numbers: 25.0 and 25 are the same argument (and the same fingerprint).
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("number out of range")
    return int(value) if value.is_integer() and abs(value) < 2**53 else value


_decoder = msgspec.json.Decoder(ProposalRequest, float_hook=_float_hook)


def decode_proposal(body: bytes) -> ProposalRequest | Response[bytes]:
    """Decode strictly; a body that is not a proposal gets a 400/422 problem with a pointer."""
    try:
        return _decoder.decode(body)
    except msgspec.ValidationError as exc:
        message = str(exc)
        pointer = _pointer(message)
        return problem_response(
            Code.SCHEMA_INVALID,
            "the body is not a valid proposal",
            errors=[FieldError(pointer, _AT.sub("", message))],
        )
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as exc:
        detail = "the body is not valid JSON"
        if isinstance(exc, UnicodeDecodeError):
            detail = "the body is not valid UTF-8"
        elif isinstance(exc, RecursionError):
            detail = "the body is nested too deeply"
        return problem_response(Code.MALFORMED_REQUEST, detail, errors=[FieldError("", detail)])


def _pointer(message: str) -> str:
    """msgspec's ``$.args[0].x`` location as an RFC 6901 pointer (``/args/0/x``)."""
    where = _AT.search(message)
    path = where.group(1) if where else ""
    parts = re.findall(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]", path)
    pointer = "".join("/" + (name or index) for name, index in parts)
    field = _FIELD.search(message)
    if field:
        pointer += "/" + field.group(1)
    return pointer


class ProposalController(Controller):
    path = "/v1/proposals"

    @post("/", status_code=200)
    async def propose(self, request: Request[Any, Any, Any]) -> Response[bytes]:
        principal = principal_of(request)
        if principal.admin or principal.route is None:
            return problem_response(
                Code.FORBIDDEN, "admin tokens cannot propose; use a route token"
            )
        decoded = decode_proposal(await request.body())
        if isinstance(decoded, Response):
            return decoded
        answer = await broker_state(request).pipeline.propose(
            principal,
            decoded,
            header_key=request.headers.get("idempotency-key"),
            traceparent=request.headers.get("traceparent"),
        )
        return answer_response(answer)

    @get("/{proposal_id:str}")
    async def read(
        self, request: Request[Any, Any, Any], proposal_id: FromPath[str]
    ) -> Response[bytes]:
        principal = principal_of(request)
        record = await broker_state(request).pipeline.decision(proposal_id)
        visible = record is not None and (
            principal.admin
            or (record.route == principal.route and record.tenant == principal.tenant)
        )
        if record is None or not visible:
            # Another route's proposal answers exactly like a missing one.
            return problem_response(Code.NOT_FOUND, f"no proposal {proposal_id!r}")
        return Response(
            content=record.response.body, status_code=200, media_type="application/json"
        )
