"""``POST /v1/proposals`` and ``GET /v1/proposals/{id}``."""

from __future__ import annotations

import math
import re
from typing import Any

import msgspec
from litestar import Controller, Request, Response, get, post
from litestar.exceptions.http_exceptions import RequestEntityTooLarge
from litestar.params import FromPath

from broker.api.errors import problem_response
from broker.api.state import BrokerState, broker_state, principal_of
from broker.model import FieldError, ProposalRequest
from broker.responses import Answer
from broker.taxonomy import AuthError, Code

__all__ = [
    "MAX_DEPTH",
    "PROPOSALS_PATH",
    "Malformed",
    "ProposalController",
    "decode_proposal",
]

PROPOSALS_PATH = "/v1/proposals"

_AT = re.compile(r" - at `\$(.*)`$")
_FIELD = re.compile(r"(?:unknown|missing required) field `([^`]+)`")


def _float_hook(text: str) -> float | int:
    # Canonical JSON numbers: 25.0 and 25 are the same argument (and the same fingerprint).
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("number out of range")
    return int(value) if value.is_integer() and abs(value) < 2**53 else value


_decoder = msgspec.json.Decoder(ProposalRequest, float_hook=_float_hook)


MAX_DEPTH = 32
"""How deeply a proposal may nest (arrays and objects, the envelope included)."""

_STRUCTURE = re.compile(rb'"(?:[^"\\]|\\.)*"|[][{}]')


class Malformed(msgspec.Struct, frozen=True):
    """Why a body is not a proposal: the code and the located errors."""

    code: Code
    detail: str
    errors: list[FieldError]


def decode_proposal(body: bytes) -> ProposalRequest | Malformed:
    """Decode strictly; a body that is not a proposal says why, with JSON Pointers."""
    # Cheap first, in line: few brackets cannot nest deeply.
    if body.count(b"[") + body.count(b"{") > MAX_DEPTH and _too_deep(body):
        return _malformed(f"the body is nested more than {MAX_DEPTH} levels deep")
    try:
        return _decoder.decode(body)
    except msgspec.ValidationError as exc:
        message = str(exc)
        pointer = _pointer(message)
        if pointer is None:  # msgspec could not name the key: find the offending numbers
            errors = [FieldError(p, "number out of range") for p in _non_finite_paths(body)]
        else:
            errors = [FieldError(pointer, _AT.sub("", message))]
        return Malformed(Code.SCHEMA_INVALID, "the body is not a valid proposal", errors)
    except UnicodeDecodeError:
        return _malformed("the body is not valid UTF-8")
    except (msgspec.DecodeError, RecursionError):
        return _malformed("the body is not valid JSON")


def _malformed(detail: str) -> Malformed:
    return Malformed(Code.MALFORMED_REQUEST, detail, [FieldError("", detail)])


def _too_deep(body: bytes) -> bool:
    # Walk the structure, skipping strings, and stop at the first level past the limit (so
    # "[" * 100000 costs 33 steps).
    depth = 0
    for match in _STRUCTURE.finditer(body):
        token = match.group()
        if token in (b"[", b"{"):
            depth += 1
            if depth > MAX_DEPTH:
                return True
        elif token in (b"]", b"}"):
            depth -= 1
    return False


def _pointer(message: str) -> str | None:
    """msgspec's ``$.args[0].x`` location as an RFC 6901 pointer (``/args/0/x``)."""
    where = _AT.search(message)
    path = where.group(1) if where else ""
    if "[...]" in path:
        return None
    parts = re.findall(r"\.([^.\[]+)|\[(\d+)\]", path)
    pointer = "".join("/" + (name or index) for name, index in parts)
    field = _FIELD.search(message)
    if field:
        pointer += "/" + field.group(1)
    return pointer


class _NonFinite:
    """Marks where a number too large for a double stood."""


def _lenient_float(text: str) -> object:
    value = float(text)
    return value if math.isfinite(value) else _NonFinite()


_lenient = msgspec.json.Decoder(float_hook=_lenient_float)


def _non_finite_paths(body: bytes) -> list[str]:
    found: list[str] = []

    def walk(value: object, pointer: str) -> None:
        if isinstance(value, _NonFinite):
            found.append(pointer)
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{pointer}/{json_pointer_token(str(key))}")
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, f"{pointer}/{index}")

    walk(_lenient.decode(body), "")
    return found or [""]


def json_pointer_token(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


_PROPOSE_DESCRIPTION = (
    "Validate the proposal (schema, authorization, preconditions, idempotency, budgets and rate "
    "limits), execute it when approved and not a dry run, record it in the ledger, and answer "
    "the decision. Every outcome carries the full decision shape; a rejection or failed "
    "execution is application/problem+json with the RFC 9457 members beside it."
)


async def _answer(state: BrokerState, request: Request[Any, Any, Any]) -> Answer:
    pipeline = state.pipeline
    headers = request.headers
    traceparent = headers.get("traceparent")
    try:
        principal = state.authenticator.authenticate(headers.get("authorization"))
    except AuthError as exc:
        answer = await pipeline.refuse(None, exc.code, exc.detail, traceparent=traceparent)
        answer.headers["WWW-Authenticate"] = "Bearer"
        return answer
    if principal.admin or principal.route is None:
        return await pipeline.refuse(
            principal,
            Code.FORBIDDEN,
            "admin tokens cannot propose; use a route token",
            traceparent=traceparent,
        )
    try:
        body = await request.body()  # refused past [service] max_body_bytes, even if unannounced
    except RequestEntityTooLarge:
        return await pipeline.refuse(
            principal,
            Code.PAYLOAD_TOO_LARGE,
            "the request body is too large",
            traceparent=traceparent,
        )
    decoded = decode_proposal(body)
    if isinstance(decoded, Malformed):
        return await pipeline.refuse(
            principal, decoded.code, decoded.detail, errors=decoded.errors, traceparent=traceparent
        )
    return await pipeline.propose(
        principal, decoded, header_key=headers.get("idempotency-key"), traceparent=traceparent
    )


class ProposalController(Controller):
    path = PROPOSALS_PATH

    @post(
        "/",
        status_code=200,
        operation_id="createProposal",
        summary="Propose one tool call",
        description=_PROPOSE_DESCRIPTION,
        tags=["proposals"],
    )
    async def propose(self, request: Request[Any, Any, Any]) -> Response[bytes]:
        """``POST /v1/proposals``: the pipeline's answer, byte for byte.

        Why the handler reads its body itself instead of taking ``data: ProposalRequest``: Litestar
        reads and decodes ``data`` before the handler runs, but a proposal is authenticated first (an
        unauthenticated caller is answered 401 whatever it sent), and a body that is too large or not
        a proposal is a refusal the pipeline records in the ledger, with JSON Pointers to what is
        wrong; Litestar's decoding would answer both itself, unrecorded.
        """
        answer = await _answer(broker_state(request), request)
        return Response(
            content=answer.body,
            status_code=answer.status,
            media_type=answer.media_type,
            headers=answer.headers,
        )

    @get(
        "/{proposal_id:str}",
        operation_id="getProposal",
        summary="Read a decision",
        description=(
            "The decision as it was answered, for the route that made the proposal or an admin. "
            "Another route's proposal answers 404, exactly like a missing one."
        ),
        tags=["proposals"],
    )
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
