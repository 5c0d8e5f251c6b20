"""OpenAI Responses: the output item list (or the response holding it) in, ``function_call``
items taken and the rest ignored; ``function_call_output`` items out."""

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

__all__ = ["Responses"]


class _Item(msgspec.Struct):
    type: str


class _FunctionCall(msgspec.Struct):
    call_id: str
    name: str
    arguments: str


class _Response(msgspec.Struct):
    output: list[msgspec.Raw]


class _Output(msgspec.Struct):
    call_id: str
    output: str
    type: str = "function_call_output"


_payload = msgspec.json.Decoder(list[msgspec.Raw] | _Response)
_item = msgspec.json.Decoder(_Item)
_function_call = msgspec.json.Decoder(_FunctionCall)
_text = msgspec.json.Encoder()


class Responses:
    """``format: "openai-responses"``."""

    def read(self, calls: msgspec.Raw) -> list[NativeCall]:
        try:
            payload = _payload.decode(calls)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise MalformedCalls([field_error(exc, "/calls")]) from None
        if isinstance(payload, _Response):
            items, prefix = payload.output, "/calls/output"
        else:
            items, prefix = payload, "/calls"
        read: list[NativeCall] = []
        for index, raw in enumerate(items):
            where = f"{prefix}/{index}"
            try:
                if _item.decode(raw).type != "function_call":
                    continue
                item = _function_call.decode(raw)
            except msgspec.ValidationError as exc:
                raise MalformedCalls([field_error(exc, where)]) from None
            args = decode_arguments(item.arguments, f"{where}/arguments")
            if isinstance(args, dict):
                read.append(NativeCall(item.call_id, item.name, args))
            else:
                read.append(NativeCall(item.call_id, item.name, None, args))
        return read

    def results(self, calls: list[NativeCall], outcomes: list[CallOutcome]) -> Any:
        return [
            _Output(call.call_id or "", _text.encode(outcome.content).decode())
            for call, outcome in zip(calls, outcomes, strict=True)
        ]
