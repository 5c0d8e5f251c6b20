"""``POST /v1/proposals`` and ``GET /v1/proposals/{id}``."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

import msgspec
from litestar import Controller, Request, Response, asgi, get
from litestar.enums import ScopeType
from litestar.exceptions import (
    InternalServerException,
    LitestarException,
    MethodNotAllowedException,
)
from litestar.params import FromPath
from litestar.types import ASGIApp, HTTPScope, Receive, Scope, Send

from broker.api.errors import problem_response
from broker.api.state import BrokerState, broker_state, principal_of, send_answer
from broker.model import FieldError, ProposalRequest
from broker.responses import Answer
from broker.taxonomy import AuthError, Code

__all__ = [
    "MAX_DEPTH",
    "PROPOSALS_PATH",
    "Malformed",
    "ProposalController",
    "answer_directly",
    "create_proposal",
    "decode_proposal",
]

PROPOSALS_PATH = "/v1/proposals"

_AT = re.compile(r" - at `\$(.*)`$")
# Names, IPv4/IPv6 addresses and ports: a subset of what Litestar's router accepts as a Host, so
# a request it would refuse never takes the direct path (see answer_directly).
_PLAIN_HOST = re.compile(rb"[0-9A-Za-z.\-:\[\]]*")
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


class _ProposalHeaders(msgspec.Struct, frozen=True):
    authorization: str | None
    traceparent: str | None
    idempotency_key: str | None
    content_length: int | None
    host: bytes | None


def _proposal_headers(raw: Iterable[tuple[bytes, bytes]]) -> _ProposalHeaders:
    """The headers a proposal uses, first of each, in one pass over the ASGI header list
    (names arrive lower-cased): on the hot path, cheaper than building the request's full
    header mapping for a few look-ups."""
    authorization = traceparent = key = None
    length = None
    host = None
    for name, value in raw:
        if name == b"authorization" and authorization is None:
            authorization = value.decode("latin-1")
        elif name == b"traceparent" and traceparent is None:
            traceparent = value.decode("latin-1")
        elif name == b"idempotency-key" and key is None:
            key = value.decode("latin-1")
        elif name == b"content-length" and length is None and value.isdigit():
            length = int(value)
        elif name == b"host" and host is None:
            host = value
    return _ProposalHeaders(authorization, traceparent, key, length, host)


async def _read_body(receive: Receive, limit: int, announced: int | None) -> bytes | None:
    """The whole body, or ``None`` when it is (or is announced as) larger than ``limit``:
    what ``Request.body()`` does, minus the header mapping it builds for ``content-length``."""
    if announced is not None and announced > limit:
        return None  # refused before reading a byte of it
    chunks: list[bytes] = []
    size = 0
    while True:
        received = await receive()
        if received["type"] != "http.request":
            raise InternalServerException("client disconnected prematurely")
        chunk = received["body"]
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not received.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


_PROPOSE_OPERATION = {
    "operationId": "createProposal",
    "summary": "Propose one tool call",
    "description": (
        "Validate the proposal (schema, authorization, preconditions, idempotency, budgets "
        "and rate limits), execute it when approved and not a dry run, record it in the "
        "ledger, and answer the decision. Every outcome carries the full decision shape; a "
        "rejection or failed execution is application/problem+json with the RFC 9457 "
        "members beside it."
    ),
    "tags": ["proposals"],
}
"""What Litestar would say about ``POST /v1/proposals`` if it were an HTTP handler: the OpenAPI
builder (``broker.api.openapi``) puts it where Litestar's generator leaves a gap."""


_RAISE_AGAIN = "broker.proposal_exception"
"""Where ``answer_directly`` leaves an exception for ``create_proposal`` to raise again (in the
request's ``scope["state"]``), so that Litestar answers it exactly as if raised in the route."""


@asgi(PROPOSALS_PATH, opt={"openapi": {"post": _PROPOSE_OPERATION}}, copy_scope=False)
async def create_proposal(scope: Scope, receive: Receive, send: Send) -> None:
    """``POST /v1/proposals``, as a plain ASGI route.

    Why not ``@post``: the handler reads its headers and body straight from ASGI and sends an
    already-encoded answer, so Litestar's HTTP handler machinery (signature model, kwargs,
    response pipeline) had nothing left to do but cost about 57k instructions per proposal,
    a twelfth of the whole proposal path. Errors raised here still reach the app's
    problem+json handlers. Most proposals never come this way: the app answers them before
    routing (``answer_directly``); this route serves the rest and the direct path's errors.
    """
    if scope["type"] != ScopeType.HTTP or scope["method"] != "POST":
        raise MethodNotAllowedException(headers={"Allow": "POST"})
    failed = scope["state"].pop(_RAISE_AGAIN, None)
    if isinstance(failed, Exception):
        raise failed
    state: BrokerState = scope["litestar_app"].state.broker
    await send_answer(send, await _answer(state, _proposal_headers(scope["headers"]), receive))


async def answer_directly(
    state: BrokerState, scope: HTTPScope, receive: Receive, send: Send, litestar: ASGIApp
) -> bool:
    """Answer ``POST /v1/proposals`` without Litestar's routing; ``False`` (nothing read or
    sent) when the request is not one that Litestar would route to ``create_proposal`` as is.

    Why: the app's middleware, router and route layers cost about 45k instructions per
    proposal (a tenth of the path without the ledger) to reach a handler that uses none of
    what they prepare. What they check is checked here too: the exact path (anything Litestar
    would first normalize goes its way) and a valid ``Host``. An exception before the answer
    is handed, through ``litestar``, to ``create_proposal`` to raise, so it is answered exactly
    as there; one while sending is what Litestar reports once a response has started.
    """
    if scope["method"] != "POST" or scope["path"] != PROPOSALS_PATH or scope.get("root_path"):
        return False
    headers = _proposal_headers(scope["headers"])
    if headers.host is not None and _PLAIN_HOST.fullmatch(headers.host) is None:
        return False  # Litestar decides (and may refuse) anything but a plain name or address
    try:
        answer = await _answer(state, headers, receive)
    except Exception as exc:
        scope.setdefault("state", {})[_RAISE_AGAIN] = exc
        await litestar(scope, receive, send)
        return True
    try:
        await send_answer(send, answer)
    except Exception as exc:
        raise LitestarException("Exception caught after response started") from exc
    return True


async def _answer(state: BrokerState, headers: _ProposalHeaders, receive: Receive) -> Answer:
    pipeline = state.pipeline
    traceparent = headers.traceparent
    try:
        principal = state.authenticator.authenticate(headers.authorization)
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
    body = await _read_body(receive, state.config.service.max_body_bytes, headers.content_length)
    if body is None:
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
        principal, decoded, header_key=headers.idempotency_key, traceparent=traceparent
    )


class ProposalController(Controller):
    path = PROPOSALS_PATH

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
