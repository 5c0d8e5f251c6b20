"""Gemini: a ``Content`` (``{"role": "model", "parts": [...]}``) or its ``parts`` in,
``functionCall`` parts taken and the rest ignored; one ``user`` content of ``functionResponse``
parts out. A Gemini call may have no ``id``; its response then has none either."""

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

__all__ = ["Gemini"]


class _FunctionCall(msgspec.Struct):
    name: str
    args: msgspec.Raw = msgspec.Raw(b"{}")  # a call without arguments leaves them out
    id: str | None = None


class _Part(msgspec.Struct):
    # The REST API and the SDK's by-alias dumps spell it functionCall; the SDK's plain dumps
    # function_call.
    functionCall: _FunctionCall | None = None
    function_call: _FunctionCall | None = None


class _Content(msgspec.Struct):
    parts: list[_Part]


class _FunctionResponse(msgspec.Struct, omit_defaults=True):
    name: str
    response: dict[str, Any]
    id: str | None = None


class _ResponsePart(msgspec.Struct):
    functionResponse: _FunctionResponse


class _UserContent(msgspec.Struct):
    parts: list[_ResponsePart]
    role: str = "user"


_payload = msgspec.json.Decoder(list[_Part] | _Content)


class Gemini:
    """``format: "gemini"``."""

    def read(self, calls: msgspec.Raw) -> list[NativeCall]:
        try:
            payload = _payload.decode(calls)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise MalformedCalls([field_error(exc, "/calls")]) from None
        if isinstance(payload, _Content):
            parts, prefix = payload.parts, "/calls/parts"
        else:
            parts, prefix = payload, "/calls"
        read: list[NativeCall] = []
        for index, part in enumerate(parts):
            call = part.functionCall or part.function_call
            if call is None:
                continue
            member = "functionCall" if part.functionCall is not None else "function_call"
            args = decode_arguments(bytes(call.args), f"{prefix}/{index}/{member}/args")
            if isinstance(args, dict):
                read.append(NativeCall(call.id, call.name, args))
            else:
                read.append(NativeCall(call.id, call.name, None, args))
        return read

    def results(self, calls: list[NativeCall], outcomes: list[CallOutcome]) -> Any:
        return _UserContent(
            [
                _ResponsePart(_FunctionResponse(call.name, outcome.content, call.call_id))
                for call, outcome in zip(calls, outcomes, strict=True)
            ]
        )
