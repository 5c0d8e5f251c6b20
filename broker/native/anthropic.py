"""Anthropic Messages: the assistant message (or its ``content`` list) in, ``tool_use`` blocks
taken and the rest ignored; one ``user`` message of ``tool_result`` blocks out."""

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

__all__ = ["Messages"]


class _Block(msgspec.Struct):
    type: str


class _ToolUse(msgspec.Struct):
    id: str
    name: str
    input: msgspec.Raw


class _Message(msgspec.Struct):
    content: list[msgspec.Raw]


class _ToolResult(msgspec.Struct):
    tool_use_id: str
    content: str
    is_error: bool
    type: str = "tool_result"


class _UserMessage(msgspec.Struct):
    content: list[_ToolResult]
    role: str = "user"


_payload = msgspec.json.Decoder(list[msgspec.Raw] | _Message)
_block = msgspec.json.Decoder(_Block)
_tool_use = msgspec.json.Decoder(_ToolUse)
_text = msgspec.json.Encoder()


class Messages:
    """``format: "anthropic"``."""

    def read(self, calls: msgspec.Raw) -> list[NativeCall]:
        try:
            payload = _payload.decode(calls)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise MalformedCalls([field_error(exc, "/calls")]) from None
        if isinstance(payload, _Message):
            blocks, prefix = payload.content, "/calls/content"
        else:
            blocks, prefix = payload, "/calls"
        read: list[NativeCall] = []
        for index, raw in enumerate(blocks):
            where = f"{prefix}/{index}"
            try:
                if _block.decode(raw).type != "tool_use":
                    continue
                block = _tool_use.decode(raw)
            except msgspec.ValidationError as exc:
                raise MalformedCalls([field_error(exc, where)]) from None
            args = decode_arguments(bytes(block.input), f"{where}/input")
            if isinstance(args, dict):
                read.append(NativeCall(block.id, block.name, args))
            else:
                read.append(NativeCall(block.id, block.name, None, args))
        return read

    def results(self, calls: list[NativeCall], outcomes: list[CallOutcome]) -> Any:
        return _UserMessage(
            [
                _ToolResult(
                    call.call_id or "", _text.encode(outcome.content).decode(), outcome.is_error
                )
                for call, outcome in zip(calls, outcomes, strict=True)
            ]
        )
