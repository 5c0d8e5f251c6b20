"""What the controllers share: the broker's parts for one app, built by ``create_app``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from litestar import Request
from litestar.types import HTTPResponseBodyEvent, HTTPResponseStartEvent, Send

from broker.auth import Authenticator
from broker.config import BrokerConfig
from broker.implied_checks import ImpliedWriteChecker
from broker.metrics import BrokerMetrics
from broker.model import Principal
from broker.pipeline import Pipeline
from broker.registry import Registry
from broker.responses import JSON, PROBLEM_JSON, Answer
from broker.state import Ledger
from broker.stores import Store

__all__ = ["BrokerState", "broker_state", "principal_of", "send_answer"]


@dataclass(frozen=True, slots=True)
class BrokerState:
    config: BrokerConfig
    registry: Registry
    store: Store
    pipeline: Pipeline
    authenticator: Authenticator
    ledger: Ledger
    metrics: BrokerMetrics
    implied_writes: ImpliedWriteChecker


def broker_state(request: Request[Any, Any, Any]) -> BrokerState:
    state: BrokerState = request.app.state.broker
    return state


def principal_of(request: Request[Any, Any, Any]) -> Principal:
    """Authenticate the caller; :class:`AuthError` propagates to the problem+json handler."""
    return broker_state(request).authenticator.authenticate(request.headers.get("authorization"))


# The two media types of every answer, as header pairs built once.
_CONTENT_TYPES = {media: (b"content-type", media.encode()) for media in (JSON, PROBLEM_JSON)}


async def send_answer(send: Send, answer: Answer) -> None:
    """Send an answer as it is: two ASGI messages, no framework response object in between.

    Proposals are the hot path, and building Litestar's ``Response`` and then its ASGI response
    for a body that is already encoded cost more than the rest of the answer (about 20 µs).
    """
    content_type = _CONTENT_TYPES.get(answer.media_type)
    if content_type is None:
        content_type = (b"content-type", answer.media_type.encode())
    headers = [content_type, (b"content-length", b"%d" % len(answer.body))]
    if answer.headers:  # most answers have none: no comprehension for them
        headers += [
            (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in answer.headers.items()
        ]
    start: HTTPResponseStartEvent = {
        "type": "http.response.start",
        "status": answer.status,
        "headers": headers,
    }
    body: HTTPResponseBodyEvent = {
        "type": "http.response.body",
        "body": answer.body,
        "more_body": False,
    }
    await send(start)
    await send(body)
