"""``POST /v1/proposals`` and ``GET /v1/proposals/{id}``."""

from __future__ import annotations

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
from broker.api.json_body import not_json_detail
from broker.api.proposal_body import Malformed, decode_proposal
from broker.api.shared import BrokerState, broker_state, principal_of
from broker.model import Principal
from broker.responses import Answer
from broker.taxonomy import AuthError, Code

__all__ = [
    "PROPOSALS_PATH",
    "RAISE_AGAIN",
    "ProposalController",
    "ProposalHeaders",
    "answer",
    "body_reader",
    "proposal_headers",
    "read_asgi_body",
    "receive",
]

PROPOSALS_PATH = "/v1/proposals"


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
