"""``[service] proposal_fast_path``: answer ``POST /v1/proposals`` before Litestar's routing.

Opt-in, off by default. Why it exists: the framework's layers (the ASGI router, the route, the
``Request`` and the handler's signature model) cost a good part of a proposal's CPU on the
embedded store, for a handler that uses none of what they prepare (``bench/bench_proposals.py --fast-path-variant`` prices it in one run). What it gives
up: middleware, ``before_request``/``after_request`` hooks, guards and CORS configured on the app
never see the proposals it answers. ``create_app`` configures none, so with this app both paths
answer the same bytes (the proposal test suites run on both); whoever adds such layers leaves
this setting off.

What Litestar's router checks is checked here too: the exact path (anything Litestar would first
normalize goes its way) and a plain ``Host``. An exception before the answer is handed to the
typed handler to raise (``RAISE_AGAIN``), so it is answered exactly as there; one while sending
is what Litestar reports once a response has started.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import cast

from litestar import Litestar
from litestar.enums import ScopeType
from litestar.exceptions import LitestarException
from litestar.types import (
    HTTPScope,
    LifeSpanReceive,
    LifeSpanScope,
    LifeSpanSend,
    Receive,
    Scope,
    Send,
)

from broker.api.asgi_answer import send_answer
from broker.api.proposals import (
    PROPOSALS_PATH,
    RAISE_AGAIN,
    answer,
    proposal_headers,
    read_asgi_body,
)
from broker.api.shared import BrokerState

__all__ = ["ProposalsBeforeRouting"]

# Names, IPv4/IPv6 addresses and ports: a subset of what Litestar's router accepts as a Host, so
# a request it would refuse never takes the fast path.
_PLAIN_HOST = re.compile(rb"[0-9A-Za-z.\-:\[\]]*")


class ProposalsBeforeRouting(Litestar):
    """The broker's app with ``[service] proposal_fast_path = true``."""

    _through_litestar = Litestar.__call__

    @cached_property
    def broker(self) -> BrokerState:
        """``state.broker``, looked up once (a ``State`` look-up costs half a µs)."""
        state: BrokerState = self.state.broker
        return state

    async def __call__(
        self,
        scope: Scope | LifeSpanScope,
        receive: Receive | LifeSpanReceive,
        send: Send | LifeSpanSend,
    ) -> None:
        if scope["type"] == ScopeType.HTTP:
            http = cast(HTTPScope, scope)  # "http" is not "lifespan"; mypy cannot tell them apart
            if await self._answer_directly(http, cast(Receive, receive), cast(Send, send)):
                return
        await self._through_litestar(scope, receive, send)

    async def _answer_directly(self, scope: HTTPScope, receive: Receive, send: Send) -> bool:
        """``False`` (nothing read or sent) when Litestar would not route the request to the
        proposal handler as is."""
        if scope["method"] != "POST" or scope["path"] != PROPOSALS_PATH or scope.get("root_path"):
            return False
        headers = proposal_headers(scope["headers"])
        if headers.host is not None and _PLAIN_HOST.fullmatch(headers.host) is None:
            return False  # Litestar decides (and may refuse) anything but a plain name or address
        limit = self.broker.config.service.max_body_bytes

        async def read_body() -> bytes | None:
            return await read_asgi_body(receive, limit, headers.content_length)

        try:
            done = await answer(self.broker, headers, read_body)
        except Exception as exc:
            scope.setdefault("state", {})[RAISE_AGAIN] = exc
            await self._through_litestar(scope, receive, send)
            return True
        try:
            await send_answer(send, done)
        except Exception as exc:
            raise LitestarException("Exception caught after response started") from exc
        return True
