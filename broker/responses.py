"""Encoding answers: decisions as JSON, rejections and failures as RFC 9457 problem+json."""

from __future__ import annotations

import msgspec

from broker.model import Decision, Problem
from broker.taxonomy import CODE_STATUS, Code

__all__ = ["Answer", "problem_fields", "render", "replayed"]

JSON = "application/json"
PROBLEM_JSON = "application/problem+json"

_encoder = msgspec.json.Encoder()
_decision_decoder = msgspec.json.Decoder(Decision)
_problem_decoder = msgspec.json.Decoder(Problem)


class Answer(msgspec.Struct):
    """An HTTP answer, independent of the web framework (a struct: one is built per proposal,
    and a named tuple's constructor is Python code)."""

    status: int
    body: bytes
    media_type: str
    headers: dict[str, str]


def problem_fields(code: Code) -> tuple[str, str, int]:
    """The RFC 9457 ``type``, ``title`` and ``status`` for ``code``."""
    _, status = CODE_STATUS[code]
    return (
        f"urn:action-broker:problem:{code.value}",
        code.value.replace("_", " ").capitalize(),
        status,
    )


def render(decision: Decision, *, retry_after_s: float | None = None) -> Answer:
    headers: dict[str, str] = {}
    if retry_after_s is not None:
        headers["Retry-After"] = str(max(1, int(retry_after_s + 0.999)))
    if isinstance(decision, Problem):
        return Answer(decision.status, _encoder.encode(decision), PROBLEM_JSON, headers)
    return Answer(200, _encoder.encode(decision), JSON, headers)


def replayed(status: int, body: bytes) -> Answer:
    """The stored answer again, marked ``replayed: true``; the adapter is not called."""
    stored: Decision = (_problem_decoder if status >= 400 else _decision_decoder).decode(body)
    stored.replayed = True
    media = PROBLEM_JSON if status >= 400 else JSON
    return Answer(status, _encoder.encode(stored), media, {"Idempotent-Replayed": "true"})
