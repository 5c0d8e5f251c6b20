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
from broker.pipeline import Pipeline
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
    decisions: list[msgspec.Raw]


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
) -> Answer:
    """Every call's answer in the provider's shape (200), or why the body as a whole is refused
    (a problem recorded like any refused proposal; nothing runs)."""
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
    answers = [
        await _propose(pipeline, principal, request, call, names, traceparent, phase)
        for call in calls
    ]
    outcomes = [_outcome(answer) for answer in answers]
    reply = _Reply(
        request.format,
        normaliser.results(calls, outcomes),
        [msgspec.Raw(answer.body) for answer in answers],
    )
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
    if call.args is None:  # its arguments are unusable: its own refusal, recorded like any
        problem = call.problem or FieldError("", "the arguments are unusable")
        return await pipeline.refuse(
            principal,
            Code.SCHEMA_INVALID,
            f"{problem.message} (tool call {call.call_id or call.name!r})",
            errors=[problem],
            traceparent=traceparent,
        )
    key = None
    if call.call_id is not None:
        key = request.idempotency_keys.get(call.call_id) or f"{request.format}:{call.call_id}"
    proposal = ProposalRequest(
        tool=names.resolve(call.name),
        args=call.args,
        idempotency_key=key,
        trace_id=request.trace_id,
        session_id=request.session_id,
        dry_run=request.dry_run,
    )
    return await pipeline.propose(principal, proposal, traceparent=traceparent, phase=phase)


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
