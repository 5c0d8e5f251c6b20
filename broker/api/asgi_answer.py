"""An :class:`~broker.responses.Answer` sent as it is: two ASGI messages, headers built once.

Both ways ``POST /v1/proposals`` answers use it: the typed handler returns an :class:`AnswerApp`
(an ASGI app, which Litestar runs as it runs an ``ASGIResponse``), and the fast path
(``broker.api.fast_path``) sends with :func:`send_answer` directly.

Why not Litestar's ``ASGIResponse``: its constructor keeps headers in a ``MutableScopeHeaders``
and adds ``content-type`` and ``content-length`` with ``setdefault``, each a scan of the list
and a ``KeyError`` raised and caught, then encodes them again when it starts the response; for
an answer that is already encoded bytes with known headers, that was several times the cost of
sending it. The messages are the ones it sent, header for header and in its order: the answer's
own headers (names lower-cased), then ``content-type`` and ``content-length``.
"""

from __future__ import annotations

from litestar.types import HTTPResponseBodyEvent, HTTPResponseStartEvent, Receive, Scope, Send

from broker.responses import JSON, PROBLEM_JSON, Answer

__all__ = ["AnswerApp", "send_answer"]

# The two media types of every answer, as header pairs built once.
_CONTENT_TYPES = {
    media: (b"content-type", media.encode("latin-1")) for media in (JSON, PROBLEM_JSON)
}


async def send_answer(send: Send, done: Answer) -> None:
    """Send ``done``: the start of the response, then its whole body."""
    content_type = _CONTENT_TYPES.get(done.media_type)
    if content_type is None:
        content_type = (b"content-type", done.media_type.encode("latin-1"))
    length = (b"content-length", b"%d" % len(done.body))
    if done.headers:  # most answers have none: no comprehension for them
        headers = [
            (name.lower().encode("latin-1"), value.encode("latin-1"))
            for name, value in done.headers.items()
        ]
        headers += (content_type, length)
    else:
        headers = [content_type, length]
    start: HTTPResponseStartEvent = {
        "type": "http.response.start",
        "status": done.status,
        "headers": headers,
    }
    body: HTTPResponseBodyEvent = {
        "type": "http.response.body",
        "body": done.body,
        "more_body": False,
    }
    await send(start)
    await send(body)


class AnswerApp:
    """The ASGI app a handler returns to send one answer as it is."""

    __slots__ = ("answer",)

    def __init__(self, answer: Answer) -> None:
        self.answer = answer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send_answer(send, self.answer)
