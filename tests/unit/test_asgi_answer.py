"""An answer sent by AnswerApp is the ASGIResponse the proposal handler used to return, message
for message: status, headers (names, values, order) and body."""

from __future__ import annotations

from typing import Any

import pytest
from litestar.response.base import ASGIResponse

from broker.api.asgi_answer import AnswerApp
from broker.responses import JSON, PROBLEM_JSON, Answer

ANSWERS = [
    Answer(200, b'{"decision":"approved"}', JSON, {}),
    Answer(200, b'{"replayed":true}', JSON, {"Idempotent-Replayed": "true", "Age": "12"}),
    Answer(409, b'{"status":409}', PROBLEM_JSON, {}),
    Answer(429, b'{"status":429}', PROBLEM_JSON, {"Retry-After": "3"}),
    Answer(401, b'{"status":401}', PROBLEM_JSON, {"WWW-Authenticate": "Bearer"}),
    Answer(503, b"{}", "application/x-other", {"Retry-After": "1"}),
]


async def _messages(app: Any) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        raise AssertionError("an answer never reads the request")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app({"type": "http", "method": "POST"}, receive, send)
    return sent


@pytest.mark.parametrize("answer", ANSWERS, ids=lambda a: f"{a.status}-{len(a.headers)}")
async def test_the_messages_are_those_of_an_asgi_response(answer: Answer) -> None:
    litestars = ASGIResponse(
        body=answer.body,
        status_code=answer.status,
        media_type=answer.media_type,
        headers=answer.headers,
    )
    assert await _messages(AnswerApp(answer)) == await _messages(litestars)
