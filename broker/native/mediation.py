"""``POST /v1/tool-calls``: a model's native tool calls, each proposed through the whole chain.

Each call becomes exactly the proposal ``POST /v1/proposals`` would take (the same pipeline, the
same ledger record, the same answer, listed in ``decisions``), and each answer becomes the
provider's own result message. Calls run one after another in the order the model made them; a
rejection stops none of the others.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from broker.approvals.records import pending_content
from broker.gateway.calls import Gateway, MetaCall
from broker.model import FieldError, Principal, ProposalRequest
from broker.native.anthropic import Messages
from broker.native.calls import (
    CallOutcome,
    MalformedCalls,
    NativeCall,
    Normaliser,
    field_error,
)
from broker.native.gemini import Gemini
from broker.native.names import NameTable
from broker.native.openai import ChatCompletions
from broker.native.openai_responses import Responses
from broker.phases import Phase, conversation_phase
from broker.pipeline.orchestrator import Pipeline
from broker.responses import JSON, Answer
from broker.taxonomy import Code

__all__ = ["NORMALISERS", "ToolCallsRequest", "answer_tool_calls"]

Format = Literal["openai", "openai-responses", "anthropic", "gemini"]

NORMALISERS: dict[str, Normaliser] = {
    "openai": ChatCompletions(),
    "openai-responses": Responses(),
    "anthropic": Messages(),
    "gemini": Gemini(),
}


class ToolCallsRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The body: which provider's shape ``calls`` has, and what every call's proposal shares."""

    format: Format
    calls: msgspec.Raw
    session_id: str | None = None
    trace_id: str | None = None
    dry_run: bool = False
    idempotency_keys: dict[str, str] = {}
    """A call id's idempotency key, where the caller wants its own (``<format>:<id>`` otherwise)."""
    conversation: list[dict[str, Any]] | None = None
    """The messages the model read before making these calls, in the same format (optional):
    when they end with tool results, the calls' phase is ``result_interpretation``
    (``broker.phases``)."""


class _Execution(msgspec.Struct):
    result: dict[str, Any] | None = None


class _Answered(msgspec.Struct):
    """The members of a proposal's answer that its result message carries."""

    category: str | None = None
    code: str | None = None
    reason: str | None = None
    remediation: str | None = None
    errors: list[FieldError] = []
    execution: _Execution | None = None


class _Reply(msgspec.Struct):
    format: str
    results: Any
    decisions: list[msgspec.Raw | None]


_request = msgspec.json.Decoder(ToolCallsRequest)
_answered = msgspec.json.Decoder(_Answered)
_encoder = msgspec.json.Encoder()


async def answer_tool_calls(
    pipeline: Pipeline,
    principal: Principal,
    body: bytes,
    *,
    names: NameTable,
    max_calls: int,
    traceparent: str | None,
    gateway: Gateway | None = None,
) -> Answer:
    """Every call's answer in the provider's shape (200), or why the body as a whole is refused
    (a problem recorded like any refused proposal; nothing runs).

    On a gateway or proxy route (``gateway`` serves it) the calls are meta-tool calls: each
    ``tool_execute`` is a proposal, and its decision is listed; a read of the catalog
    (``tool_browse``, ``tool_hydrate``, ``tool_view``) is none, and lists ``null``."""
    try:
        request = _request.decode(body)
    except msgspec.ValidationError as exc:
        return await _refuse(pipeline, principal, [field_error(exc, "")], traceparent)
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        detail = "the body is not valid JSON"
        return await pipeline.refuse(
            principal,
            Code.MALFORMED_REQUEST,
            detail,
            errors=[FieldError("", detail)],
            traceparent=traceparent,
        )
    normaliser = NORMALISERS[request.format]
    try:
        calls = normaliser.read(request.calls)
    except MalformedCalls as exc:
        return await _refuse(pipeline, principal, exc.errors, traceparent)
    if len(calls) > max_calls:
        too_many = FieldError("/calls", f"at most {max_calls} calls per request; got {len(calls)}")
        return await _refuse(pipeline, principal, [too_many], traceparent)

    phase = conversation_phase(request.format, request.conversation, dry_run=request.dry_run)
    outcomes: list[CallOutcome] = []
    decisions: list[msgspec.Raw | None] = []
    for call in calls:
        if gateway is not None and gateway.serves(principal):
            outcome, proposed = await _meta(
                pipeline, gateway, principal, request, call, traceparent
            )
        else:
            proposed = await _propose(pipeline, principal, request, call, names, traceparent, phase)
            outcome = _outcome(proposed)
        outcomes.append(outcome)
        decisions.append(None if proposed is None else msgspec.Raw(proposed.body))
    reply = _Reply(request.format, normaliser.results(calls, outcomes), decisions)
    return Answer(200, _encoder.encode(reply), JSON, {})


async def _refuse(
    pipeline: Pipeline, principal: Principal, errors: list[FieldError], traceparent: str | None
) -> Answer:
    return await pipeline.refuse(
        principal,
        Code.SCHEMA_INVALID,
        "the body is not a valid tool-calls request",
        errors=errors,
        traceparent=traceparent,
    )


async def _propose(
    pipeline: Pipeline,
    principal: Principal,
    request: ToolCallsRequest,
    call: NativeCall,
    names: NameTable,
    traceparent: str | None,
    phase: Phase,
) -> Answer:
    if call.args is None:
        return await _unusable(pipeline, principal, call, traceparent)
    proposal = ProposalRequest(
        tool=names.resolve(call.name),
        args=call.args,
        idempotency_key=_key(request, call),
        trace_id=request.trace_id,
        session_id=request.session_id,
        dry_run=request.dry_run,
    )
    return await pipeline.propose(principal, proposal, traceparent=traceparent, phase=phase)


async def _meta(
    pipeline: Pipeline,
    gateway: Gateway,
    principal: Principal,
    request: ToolCallsRequest,
    call: NativeCall,
    traceparent: str | None,
) -> tuple[CallOutcome, Answer | None]:
    """A call on a gateway or proxy route: a meta-tool's outcome, or the refusal of a name
    the route does not declare (its tools are reached through ``tool_execute``)."""
    if call.args is None:
        refused = await _unusable(pipeline, principal, call, traceparent)
        return _outcome(refused), refused
    if not gateway.offers(principal, call.name):
        detail = (
            f"unknown tool {call.name!r}: this route's tools are called through "
            "tool_execute(tool_id, args)"
        )
        refused = await pipeline.refuse(
            principal,
            Code.UNKNOWN_TOOL,
            detail,
            errors=[FieldError("", detail)],
            traceparent=traceparent,
        )
        return _outcome(refused), refused
    done = await gateway.call(
        principal,
        MetaCall(
            call.name,
            call.args,
            session_id=request.session_id,
            idempotency_key=_key(request, call),
            trace_id=request.trace_id,
            dry_run=request.dry_run,
            traceparent=traceparent,
        ),
    )
    return CallOutcome(done.content, done.is_error), done.proposal


def _key(request: ToolCallsRequest, call: NativeCall) -> str | None:
    """The call's idempotency key: the caller's for its id, else ``<format>:<call id>``."""
    if call.call_id is None:
        return None
    return request.idempotency_keys.get(call.call_id) or f"{request.format}:{call.call_id}"


async def _unusable(
    pipeline: Pipeline, principal: Principal, call: NativeCall, traceparent: str | None
) -> Answer:
    """A call whose arguments are unusable: its own refusal, recorded like any."""
    problem = call.problem or FieldError("", "the arguments are unusable")
    return await pipeline.refuse(
        principal,
        Code.SCHEMA_INVALID,
        f"{problem.message} (tool call {call.call_id or call.name!r})",
        errors=[problem],
        traceparent=traceparent,
    )


def _outcome(answer: Answer) -> CallOutcome:
    if answer.status == 202:  # waits for a person (broker.approvals): nothing ran yet
        return CallOutcome(pending_content(msgspec.json.decode(answer.body)), True)
    answered = _answered.decode(answer.body)
    if answered.code is not None:
        error: dict[str, Any] = {
            "category": answered.category,
            "code": answered.code,
            "reason": answered.reason,
            "remediation": answered.remediation,
        }
        if answered.errors:
            error["errors"] = [{"path": e.path, "message": e.message} for e in answered.errors]
        return CallOutcome({"error": error}, True)
    execution = answered.execution
    result = execution.result if execution is not None else None
    return CallOutcome(result or {}, False)
