"""``POST /v1/proposals`` and ``GET /v1/proposals/{id}``."""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import msgspec
from litestar import Controller, Request, Response, get, post
from litestar.exceptions import InternalServerException
from litestar.params import FromPath
from litestar.types import ASGIApp, Receive

from broker.api.asgi_answer import AnswerApp
from broker.api.errors import problem_response
from broker.api.ingress_limits import single_authorization, valid_traceparent
from broker.api.json_body import (
    REPEATED_KEYS,
    count_keys,
    duplicate_key_pointers,
    not_json_detail,
    repeated_key_errors,
)
from broker.api.proposal_problems import body_problems, tool_naming_problems
from broker.api.shared import BrokerState, broker_state, principal_of
from broker.model import FieldError, Principal, ProposalRequest
from broker.responses import Answer
from broker.taxonomy import AuthError, Code

__all__ = [
    "MAX_DEPTH",
    "PROPOSALS_PATH",
    "RAISE_AGAIN",
    "Malformed",
    "ProposalController",
    "ProposalHeaders",
    "answer",
    "body_reader",
    "decode_proposal",
    "proposal_headers",
    "read_asgi_body",
    "receive",
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
    """Decode strictly; a body that is not a proposal says why, with JSON Pointers.

    A body that repeats a key is refused as such (I-JSON, ``broker.api.json_body``) before
    anything else is said about it.
    """
    # Cheap first, in line: few brackets cannot nest deeply.
    if body.count(b"[") + body.count(b"{") > MAX_DEPTH and _too_deep(body):
        return _malformed(f"the body is nested more than {MAX_DEPTH} levels deep")
    try:
        decoded = _decoder.decode(body)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as exc:
        repeated = duplicate_key_pointers(body)
        if repeated:
            return _repeated_keys(repeated)
        return _undecodable(body, exc)
    repeated = duplicate_key_pointers(body, _distinct_keys(body, decoded))
    if repeated:
        return _repeated_keys(repeated)
    if decoded.tool and decoded.tool_id is None:
        return decoded
    # Named by tool_id, or by an empty name: was it named exactly once?
    naming = tool_naming_problems(_lenient.decode(body))
    if naming:
        return Malformed(Code.SCHEMA_INVALID, "the body is not a valid proposal", naming)
    return decoded


_envelope = msgspec.json.Decoder(dict[str, msgspec.Raw])


def _distinct_keys(body: bytes, decoded: ProposalRequest) -> int:
    """How many distinct keys ``body``, which decoded as ``decoded``, has: the envelope's
    (their values only delimited, not decoded again) and its arguments' (the only member whose
    type admits objects; were there another, the count would only be low)."""
    return len(_envelope.decode(body)) + count_keys(decoded.args)


def _repeated_keys(pointers: list[str]) -> Malformed:
    return Malformed(Code.MALFORMED_REQUEST, REPEATED_KEYS, repeated_key_errors(pointers))


def _undecodable(body: bytes, exc: BaseException) -> Malformed:
    """Why ``body`` is not a proposal, from what the strict decoder raised reading it."""
    if isinstance(exc, UnicodeDecodeError):
        return _malformed("the body is not valid UTF-8")
    if not isinstance(exc, msgspec.ValidationError):
        return _malformed("the body is not valid JSON")
    message = str(exc)
    # The strict decoder stopped at the first problem: read the body again for all of them.
    try:
        errors = body_problems(body)
    except (msgspec.DecodeError, RecursionError):  # the rest of the body is not JSON
        return _malformed("the body is not valid JSON")
    if not errors:
        pointer = _pointer(message)
        if pointer is None:  # msgspec could not name the key: find the offending numbers
            errors = [FieldError(p, "number out of range") for p in _non_finite_paths(body)]
        else:
            errors = [FieldError(pointer, _AT.sub("", message))]
    return Malformed(Code.SCHEMA_INVALID, "the body is not a valid proposal", errors)


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


class ProposalHeaders(msgspec.Struct, frozen=True):
    authorization: str | None
    traceparent: str | None
    idempotency_key: str | None
    content_length: int | None
    host: bytes | None
    content_type: bytes | None = None
    repeated_authorization: bool = False
    """A second ``Authorization`` header came (refused: see ``broker.api.ingress_limits``)."""


def proposal_headers(raw: Iterable[tuple[bytes, bytes]]) -> ProposalHeaders:
    """The headers a proposal uses, first of each, in one pass over the ASGI header list (names
    arrive lower-cased): on the hot path, cheaper than building the full header mapping."""
    authorization = traceparent = key = None
    length = None
    host = content_type = None
    repeated = False
    for name, value in raw:
        if name == b"authorization":
            repeated = authorization is not None
            authorization = authorization or value.decode("latin-1")
        elif name == b"traceparent" and traceparent is None:
            traceparent = value.decode("latin-1")
        elif name == b"idempotency-key" and key is None:
            key = value.decode("latin-1")
        elif name == b"content-length" and length is None and value.isdigit():
            length = int(value)
        elif name == b"host" and host is None:
            host = value
        elif name == b"content-type" and content_type is None:
            content_type = value
    return ProposalHeaders(authorization, traceparent, key, length, host, content_type, repeated)


RAISE_AGAIN = "broker.proposal_exception"
"""Where the fast path (``broker.api.fast_path``) leaves an exception for the handler to raise
again (in the request's ``scope["state"]``), so that Litestar answers it exactly as its own."""


async def answer(
    state: BrokerState,
    headers: ProposalHeaders,
    read_body: Callable[[], Awaitable[bytes | None]],
) -> Answer:
    """:func:`answer_admitted`, unless the process sheds it first (``broker.resilience.shedding``):
    then 503 before anything is read, claimed, charged or recorded."""
    load = state.load
    refused = load.refusal()
    if refused is not None:
        return refused
    load.started()
    try:
        return await answer_admitted(state, headers, read_body)
    finally:
        load.finished()


async def receive(
    state: BrokerState,
    headers: ProposalHeaders,
    read_body: Callable[[], Awaitable[bytes | None]],
) -> tuple[Principal, bytes, str | None] | Answer:
    """What every front door that takes proposals does first: authenticate (401 whatever was
    sent), refuse admin tokens, a body that is not JSON (415) or too large (413); each refusal
    recorded by the pipeline. Gives the caller, the body and the traceparent to forward (only a
    W3C one)."""
    pipeline = state.pipeline
    traceparent = valid_traceparent(headers.traceparent)
    try:
        authorization = single_authorization(headers.authorization, headers.repeated_authorization)
        principal = state.authenticator.authenticate(authorization)
    except AuthError as exc:
        refused = await pipeline.refuse(None, exc.code, exc.detail, traceparent=traceparent)
        refused.headers["WWW-Authenticate"] = "Bearer"
        return refused
    if principal.admin or principal.route is None:
        return await pipeline.refuse(
            principal,
            Code.FORBIDDEN,
            "admin tokens cannot propose; use a route token",
            traceparent=traceparent,
        )
    unsupported = not_json_detail(headers.content_type)
    if unsupported is not None:
        return await pipeline.refuse(
            principal, Code.UNSUPPORTED_MEDIA_TYPE, unsupported, traceparent=traceparent
        )
    body = await read_body()
    if body is None:
        return await pipeline.refuse(
            principal,
            Code.PAYLOAD_TOO_LARGE,
            "the request body is too large",
            traceparent=traceparent,
        )
    return principal, body, traceparent


def body_reader(
    request: Request[Any, Any, Any], headers: ProposalHeaders, state: BrokerState
) -> Callable[[], Awaitable[bytes | None]]:
    """The request's body, or ``None`` past ``[service] max_body_bytes`` (announced or
    streamed past it): a refusal :func:`receive` records, not Litestar's own 413.

    Read from the request's ASGI ``receive`` with the limit Litestar would apply (the app's
    ``request_max_body_size`` is the same setting): ``Request.body()`` first builds the whole
    header mapping to learn the announced length, which :func:`proposal_headers` already
    read. The body is read once, by the handler that takes it whole.
    """
    limit = state.config.service.max_body_bytes
    announced, receive = headers.content_length, request.receive

    async def read_body() -> bytes | None:
        return await read_asgi_body(receive, limit, announced)

    return read_body


async def read_asgi_body(receive: Receive, limit: int, announced: int | None) -> bytes | None:
    """The whole body from ASGI ``receive``, or ``None`` when it is (or is announced as) larger
    than ``limit``."""
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


async def answer_admitted(
    state: BrokerState,
    headers: ProposalHeaders,
    read_body: Callable[[], Awaitable[bytes | None]],
) -> Answer:
    """The pipeline's answer to one proposal, whichever way it came in.

    Authentication comes first (an unauthenticated caller is answered 401 whatever it sent);
    ``read_body`` gives ``None`` for a body over ``[service] max_body_bytes``, a refusal the
    pipeline records like any other.
    """
    received = await receive(state, headers, read_body)
    if isinstance(received, Answer):
        return received
    principal, body, traceparent = received
    pipeline = state.pipeline
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

    @post(
        "/",
        status_code=200,
        operation_id="createProposal",
        summary="Propose one tool call",
        description=(
            "Validate the proposal (schema, authorization, preconditions, idempotency, budgets "
            "and rate limits), execute it when approved and not a dry run, record it in the "
            "ledger, and answer the decision. Every outcome carries the full decision shape; a "
            "rejection or failed execution is application/problem+json with the RFC 9457 "
            "members beside it."
        ),
        tags=["proposals"],
    )
    async def propose(self, request: Request[Any, Any, Any]) -> ASGIApp:
        """``POST /v1/proposals``: the pipeline's answer, byte for byte.

        Why the handler reads its body itself instead of taking ``data: ProposalRequest``:
        Litestar reads and decodes ``data`` before the handler runs, but a proposal is
        authenticated first, and a body that is too large or not a proposal is a refusal the
        pipeline records in the ledger, with JSON Pointers to what is wrong; Litestar's decoding
        would answer both itself, unrecorded.

        Why an ASGI app (``broker.api.asgi_answer``): the answer is already encoded bytes with
        its final status and headers, and no layer here adds headers or cookies, so the
        ``Response`` a handler usually returns, or even an ``ASGIResponse``, would only rebuild
        the same two messages per request. Litestar runs a returned ASGI app as it runs an
        ``ASGIResponse`` (the same after-request hooks and exception handling).
        """
        failed = request.scope["state"].pop(RAISE_AGAIN, None)
        if failed is not None:  # the fast path's, answered as if raised here
            raise failed

        state = broker_state(request)  # looked up once, for the body reader too
        headers = proposal_headers(request.scope["headers"])
        done = await answer(state, headers, body_reader(request, headers, state))
        return AnswerApp(done)

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
