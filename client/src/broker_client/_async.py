"""The asyncio client: the same methods as :class:`~broker_client.Client`, awaited."""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any

import httpx

from broker_client._protocol import ErrorMode, Protocol, Retries, next_poll_s
from broker_client.models import Approval, Decision, ImpliedWriteReport, ToolCallsAnswer
from broker_client.providers import assistant_turn, has_tool_calls, messages_to_append

__all__ = ["AsyncApprovals", "AsyncClient"]


class AsyncClient:
    """A connection to one broker with one token (a route's, a backend's or an admin's).

    ``errors="raise"`` (the default) raises a rejected proposal as its category's exception;
    ``errors="return"`` returns every :class:`Decision` and leaves the branching to the caller.
    Pass ``http`` to use your own :class:`httpx.AsyncClient` (proxies, TLS, event hooks).
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        errors: ErrorMode = "raise",
        retries: Retries | None = None,
        timeout_s: float = 30.0,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self._protocol = Protocol(token=token, errors=errors, retries=retries or Retries())
        self._owns_http = http is None
        self._http = http or httpx.AsyncClient(base_url=base_url, timeout=timeout_s)
        self.approvals = AsyncApprovals(self)
        """Pending approvals, for an approver's or admin's token (``/v1/approvals``)."""

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def propose(
        self,
        tool: str,
        args: dict[str, Any],
        *,
        idempotency_key: str | None = None,
        preconditions: list[str] | None = None,
        reason: str | None = None,
        trace_id: str | None = None,
        session_id: str | None = None,
        dry_run: bool = False,
        traceparent: str | None = None,
    ) -> Decision:
        """Propose one tool call; the broker validates, executes and records it."""
        body = Protocol.proposal(
            tool,
            args,
            idempotency_key=idempotency_key,
            preconditions=preconditions,
            reason=reason,
            trace_id=trace_id,
            session_id=session_id,
            dry_run=dry_run,
        )
        headers = {"traceparent": traceparent} if traceparent else None
        return self._protocol.decision(await self._send("POST", "/v1/proposals", body, headers))

    async def proposal(self, proposal_id: str) -> Decision:
        """The recorded answer of an earlier proposal."""
        return self._protocol.decision(await self._send("GET", f"/v1/proposals/{proposal_id}"))

    async def wait_for_decision(
        self,
        proposal: Decision | str,
        *,
        timeout_s: float = 300.0,
        poll_s: float = 0.5,
        max_poll_s: float = 15.0,
    ) -> Decision:
        """Poll ``GET /v1/proposals/{id}`` until a pending proposal is decided, or ``timeout_s``
        (see :meth:`Client.wait_for_decision`)."""
        proposal_id = proposal if isinstance(proposal, str) else proposal.proposal_id
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        polls = 0
        while True:
            decision = await self.proposal(proposal_id)
            left = deadline - loop.time()
            if not decision.pending or left <= 0:
                return decision
            await asyncio.sleep(next_poll_s(polls, poll_s, max_poll_s, left))
            polls += 1

    async def tools(self, format: str | None = None) -> Any:
        """The route's catalog: :class:`Tool` values, or a provider's declarations for ``format``
        (``openai``, ``openai-responses``, ``anthropic``, ``gemini``, ``mcp``)."""
        params = {"format": format} if format else None
        return Protocol.tools(await self._send("GET", "/v1/tools", params=params), format)

    async def tool_calls(
        self,
        format: str,
        calls: Any,
        *,
        session_id: str | None = None,
        trace_id: str | None = None,
        dry_run: bool = False,
        idempotency_keys: dict[str, str] | None = None,
        conversation: Any = None,
    ) -> ToolCallsAnswer:
        """Run a model's native tool calls (a message, its tool calls, or SDK objects)."""
        body = Protocol.tool_calls(
            format,
            calls,
            session_id=session_id,
            trace_id=trace_id,
            dry_run=dry_run,
            idempotency_keys=idempotency_keys,
            conversation=conversation,
        )
        return Protocol.tool_calls_answer(await self._send("POST", "/v1/tool-calls", body))

    async def turn(self, format: str, response: Any, **options: Any) -> list[Any]:
        """The messages an agent loop appends after a model's response: the model's own turn
        and, when it called tools, their results (each call through the broker's whole chain).
        ``options`` go to :meth:`tool_calls`."""
        turn = assistant_turn(format, response)
        if not has_tool_calls(format, turn):
            return messages_to_append(format, turn, None)
        answer = await self.tool_calls(format, turn, **options)
        return messages_to_append(format, turn, answer)

    async def check_claims(
        self, text: str, *, trace_id: str | None = None, session_id: str | None = None
    ) -> ImpliedWriteReport:
        """Which success claims in ``text`` no execution of that trace or session backs."""
        body = Protocol.claims_check(text, trace_id=trace_id, session_id=session_id)
        return Protocol.report(await self._send("POST", "/v1/implied-writes/check", body))

    async def _send(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        params: dict[str, str] | None = None,
    ) -> httpx.Response:
        protocol = self._protocol
        all_headers = {**protocol.headers, **(headers or {})}
        if body is not None:
            all_headers["Content-Type"] = "application/json"
        for attempt in range(protocol.retries.attempts):
            last = attempt == protocol.retries.attempts - 1
            try:
                response = await self._http.request(
                    method, path, content=body, headers=all_headers, params=params
                )
            except httpx.TransportError as error:
                if last:
                    raise protocol.transport_error(error) from error
                await asyncio.sleep(protocol.retries.wait_s(attempt, None))
                continue
            if last or not protocol.should_retry(response):
                return response
            await asyncio.sleep(
                protocol.retries.wait_s(attempt, response.headers.get("retry-after"))
            )
        raise AssertionError("unreachable: the last attempt returns or raises")


class AsyncApprovals:
    """``client.approvals`` of :class:`AsyncClient` (see :class:`~broker_client.Approvals`)."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def list(self, status: str | None = None) -> list[Approval]:
        params = {"status": status} if status else None
        return Protocol.approvals(await self._client._send("GET", "/v1/approvals", params=params))

    async def get(self, approval_id: str) -> Approval:
        return Protocol.approval(await self._client._send("GET", f"/v1/approvals/{approval_id}"))

    async def approve(self, approval_id: str, digest: str, comment: str | None = None) -> Approval:
        body = Protocol.approve(digest, comment)
        path = f"/v1/approvals/{approval_id}/approve"
        return Protocol.approval(await self._client._send("POST", path, body))

    async def deny(self, approval_id: str, comment: str) -> Approval:
        body = Protocol.deny(comment)
        path = f"/v1/approvals/{approval_id}/deny"
        return Protocol.approval(await self._client._send("POST", path, body))
