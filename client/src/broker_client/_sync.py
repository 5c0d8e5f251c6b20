"""The blocking client."""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any

import httpx

from broker_client._protocol import ErrorMode, Protocol, Retries, next_poll_s
from broker_client.models import Approval, Decision, ImpliedWriteReport, ToolCallsAnswer
from broker_client.providers import assistant_turn, has_tool_calls, messages_to_append

__all__ = ["Approvals", "Client"]


class Client:
    """A connection to one broker with one token (a route's, a backend's or an admin's).

    ``errors="raise"`` (the default) raises a rejected proposal as its category's exception;
    ``errors="return"`` returns every :class:`Decision` and leaves the branching to the caller.
    Pass ``http`` to use your own :class:`httpx.Client` (proxies, TLS, event hooks).
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        errors: ErrorMode = "raise",
        retries: Retries | None = None,
        timeout_s: float = 30.0,
        http: httpx.Client | None = None,
    ) -> None:
        self._protocol = Protocol(token=token, errors=errors, retries=retries or Retries())
        self._owns_http = http is None
        self._http = http or httpx.Client(base_url=base_url, timeout=timeout_s)
        self.approvals = Approvals(self)
        """Pending approvals, for an approver's or admin's token (``/v1/approvals``)."""

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def propose(
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
        return self._protocol.decision(self._send("POST", "/v1/proposals", body, headers))

    def proposal(self, proposal_id: str) -> Decision:
        """The recorded answer of an earlier proposal."""
        return self._protocol.decision(self._send("GET", f"/v1/proposals/{proposal_id}"))

    def wait_for_decision(
        self,
        proposal: Decision | str,
        *,
        timeout_s: float = 300.0,
        poll_s: float = 0.5,
        max_poll_s: float = 15.0,
    ) -> Decision:
        """Poll ``GET /v1/proposals/{id}`` until a pending proposal is decided, or ``timeout_s``.

        Returns the final answer (the executed result once approved; a denial or expiry raises
        :class:`AuthzError` with ``errors="raise"``), or, at the timeout, the still pending
        :class:`Decision` (``.pending`` is true): waiting longer is the caller's choice.
        """
        proposal_id = proposal if isinstance(proposal, str) else proposal.proposal_id
        deadline = time.monotonic() + timeout_s
        polls = 0
        while True:
            decision = self.proposal(proposal_id)
            left = deadline - time.monotonic()
            if not decision.pending or left <= 0:
                return decision
            time.sleep(next_poll_s(polls, poll_s, max_poll_s, left))
            polls += 1

    def tools(self, format: str | None = None) -> Any:
        """The route's catalog: :class:`Tool` values, or a provider's declarations for ``format``
        (``openai``, ``openai-responses``, ``anthropic``, ``gemini``, ``mcp``)."""
        params = {"format": format} if format else None
        return Protocol.tools(self._send("GET", "/v1/tools", params=params), format)

    def tool_calls(
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
        """Run a model's native tool calls (a message, its tool calls, or SDK objects).

        ``conversation``: the messages the model read before this turn, in the same format;
        the broker derives the calls' lifecycle phase from it (``result_interpretation`` when
        it ends with tool results), which policy rules may match on."""
        body = Protocol.tool_calls(
            format,
            calls,
            session_id=session_id,
            trace_id=trace_id,
            dry_run=dry_run,
            idempotency_keys=idempotency_keys,
            conversation=conversation,
        )
        return Protocol.tool_calls_answer(self._send("POST", "/v1/tool-calls", body))

    def turn(self, format: str, response: Any, **options: Any) -> list[Any]:
        """The messages an agent loop appends after a model's response: the model's own turn
        and, when it called tools, their results (each call through the broker's whole chain).
        ``options`` go to :meth:`tool_calls`."""
        turn = assistant_turn(format, response)
        if not has_tool_calls(format, turn):
            return messages_to_append(format, turn, None)
        answer = self.tool_calls(format, turn, **options)
        return messages_to_append(format, turn, answer)

    def check_claims(
        self, text: str, *, trace_id: str | None = None, session_id: str | None = None
    ) -> ImpliedWriteReport:
        """Which success claims in ``text`` no execution of that trace or session backs."""
        body = Protocol.claims_check(text, trace_id=trace_id, session_id=session_id)
        return Protocol.report(self._send("POST", "/v1/implied-writes/check", body))

    def _send(
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
                response = self._http.request(
                    method, path, content=body, headers=all_headers, params=params
                )
            except httpx.TransportError as error:
                if last:
                    raise protocol.transport_error(error) from error
                time.sleep(protocol.retries.wait_s(attempt, None))
                continue
            if last or not protocol.should_retry(response):
                return response
            time.sleep(protocol.retries.wait_s(attempt, response.headers.get("retry-after")))
        raise AssertionError("unreachable: the last attempt returns or raises")


class Approvals:
    """``client.approvals``: list, read, approve and deny (an approver's or admin's token).

    Refusals raise the client's exceptions whatever its error mode: an unknown id (or another
    tenant's) :class:`BrokerError` with status 404, a route token :class:`AuthzError`, a digest
    that is not the approval's or a decision the other way :class:`PreconditionError` with
    ``code == "approval_conflict"``.
    """

    def __init__(self, client: Client) -> None:
        self._client = client

    def list(self, status: str | None = None) -> list[Approval]:
        """Every approval this token may see (``pending``, ``approved``, ``denied``,
        ``expired`` to narrow), oldest first."""
        params = {"status": status} if status else None
        return Protocol.approvals(self._client._send("GET", "/v1/approvals", params=params))

    def get(self, approval_id: str) -> Approval:
        return Protocol.approval(self._client._send("GET", f"/v1/approvals/{approval_id}"))

    def approve(self, approval_id: str, digest: str, comment: str | None = None) -> Approval:
        """Approve exactly the action whose ``digest`` was shown; the broker executes it at
        once (``execution == "done"`` in the answer). Approving twice is a no-op."""
        body = Protocol.approve(digest, comment)
        path = f"/v1/approvals/{approval_id}/approve"
        return Protocol.approval(self._client._send("POST", path, body))

    def deny(self, approval_id: str, comment: str) -> Approval:
        """Deny, saying why: the agent reads ``comment`` in its ``approval_denied`` answer."""
        body = Protocol.deny(comment)
        path = f"/v1/approvals/{approval_id}/deny"
        return Protocol.approval(self._client._send("POST", path, body))
