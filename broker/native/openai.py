"""OpenAI Chat Completions: the assistant message (or its ``tool_calls`` list) in, ``tool``
messages out. ``function.arguments`` is a JSON *string*; one that is not JSON is that call's own
error."""

from __future__ import annotations

from typing import Any

import msgspec

from broker.native.calls import (
    CallOutcome,
    MalformedCalls,
    NativeCall,
    decode_arguments,
    field_error,
)

__all__ = ["ChatCompletions"]


class _Function(msgspec.Struct):
    name: str
    arguments: str


class _ToolCall(msgspec.Struct):
    id: str
    function: _Function


class _AssistantMessage(msgspec.Struct):
    tool_calls: list[_ToolCall] | None = None


class _ToolMessage(msgspec.Struct):
    tool_call_id: str
    content: str
    role: str = "tool"


_decoder = msgspec.json.Decoder(list[_ToolCall] | _AssistantMessage)
_text = msgspec.json.Encoder()


class ChatCompletions:
    """``format: "openai"``."""

    def read(self, calls: msgspec.Raw) -> list[NativeCall]:
        try:
            payload = _decoder.decode(calls)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise MalformedCalls([field_error(exc, "/calls")]) from None
        if isinstance(payload, _AssistantMessage):
            items, prefix = payload.tool_calls or [], "/calls/tool_calls"
        else:
            items, prefix = payload, "/calls"
        read: list[NativeCall] = []
        for index, item in enumerate(items):
            pointer = f"{prefix}/{index}/function/arguments"
            args = decode_arguments(item.function.arguments, pointer)
            if isinstance(args, dict):
                read.append(NativeCall(item.id, item.function.name, args))
            else:
                read.append(NativeCall(item.id, item.function.name, None, args))
        return read

    def results(self, calls: list[NativeCall], outcomes: list[CallOutcome]) -> Any:
        return [
            _ToolMessage(call.call_id or "", _text.encode(outcome.content).decode())
            for call, outcome in zip(calls, outcomes, strict=True)
        ]
