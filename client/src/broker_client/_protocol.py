"""What the sync and async clients share: request bodies, answer decoding, the retry plan.

Nothing here does I/O, so :mod:`broker_client._sync` and :mod:`broker_client._async` differ
only in how they send.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Literal

import httpx
import msgspec

from broker_client.errors import BrokerError, TransportError, error_for
from broker_client.models import Approval, Decision, ImpliedWriteReport, Tool, ToolCallsAnswer

__all__ = ["ErrorMode", "Protocol", "Retries", "next_poll_s", "plain"]

ErrorMode = Literal["raise", "return"]

# Answers a client may safely send again with the same body: the broker had not started the
# action (overloaded, its own state unreachable, the backend unavailable and the key released),
# or the same key is still running elsewhere and will be replayed once it settles.
_RETRY_CODES = frozenset({"store_unavailable", "provider_unavailable", "idempotency_in_progress"})

_decision = msgspec.json.Decoder(Decision)
_tools = msgspec.json.Decoder(dict[str, list[Tool]])
_tool_calls = msgspec.json.Decoder(ToolCallsAnswer)
_report = msgspec.json.Decoder(ImpliedWriteReport)
_approval = msgspec.json.Decoder(Approval)
_approvals = msgspec.json.Decoder(dict[str, list[Approval]])
_any = msgspec.json.Decoder()
_encode = msgspec.json.Encoder().encode


@dataclass(frozen=True, slots=True)
class Retries:
    """How often a request is sent again after a transport fault or a retryable answer.

    Every retry sends the same bytes, so a proposal keeps its idempotency key and a write the
    broker already executed is replayed, never run twice. Waits grow exponentially with full
    jitter, and a ``Retry-After`` from the broker is honoured when it is no longer than
    ``max_wait_s``.
    """

    attempts: int = 3
    backoff_s: float = 0.2
    max_wait_s: float = 5.0

    def wait_s(self, attempt: int, retry_after: str | None) -> float:
        if retry_after is not None:
            try:
                return min(max(float(retry_after), 0.0), self.max_wait_s)
            except ValueError:
                pass
        ceiling = min(self.backoff_s * (2**attempt), self.max_wait_s)
        return random.uniform(0, ceiling)  # noqa: S311 - jitter, not a secret


def next_poll_s(polls: int, first_s: float, max_s: float, left_s: float) -> float:
    """How long to wait before asking again whether a pending proposal was decided: doubling
    from ``first_s`` up to ``max_s`` (a person decides in minutes, not milliseconds), and never
    past the caller's deadline."""
    wait_s: float = min(first_s * 2.0**polls, max_s, left_s)
    return max(wait_s, 0.0)


class Protocol:
    """Requests and answers of the broker's HTTP API, independent of how they are sent."""

    def __init__(self, *, token: str, errors: ErrorMode, retries: Retries) -> None:
        if errors not in ("raise", "return"):
            raise ValueError("errors must be 'raise' or 'return'")
        self.headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        self.errors = errors
        self.retries = retries

    # -- requests -------------------------------------------------------------------------

    @staticmethod
    def proposal(
        tool: str,
        args: dict[str, Any],
        *,
        idempotency_key: str | None,
        preconditions: list[str] | None,
        reason: str | None,
        trace_id: str | None,
        session_id: str | None,
        dry_run: bool,
    ) -> bytes:
        body: dict[str, Any] = {"tool": tool, "args": args}
        optional = {
            "idempotency_key": idempotency_key,
            "preconditions": preconditions,
            "reason": reason,
            "trace_id": trace_id,
            "session_id": session_id,
        }
        body.update({name: value for name, value in optional.items() if value is not None})
        if dry_run:
            body["dry_run"] = True
        return _encode(body)

    @staticmethod
    def tool_calls(
        format: str,
        calls: Any,
        *,
        session_id: str | None,
        trace_id: str | None,
        dry_run: bool,
        idempotency_keys: dict[str, str] | None,
        conversation: Any = None,
    ) -> bytes:
        body: dict[str, Any] = {"format": format, "calls": plain(calls)}
        optional = {
            "session_id": session_id,
            "trace_id": trace_id,
            "idempotency_keys": idempotency_keys,
            "conversation": plain(conversation) if conversation is not None else None,
        }
        body.update({name: value for name, value in optional.items() if value is not None})
        if dry_run:
            body["dry_run"] = True
        return _encode(body)

    @staticmethod
    def claims_check(text: str, *, trace_id: str | None, session_id: str | None) -> bytes:
        if (trace_id is None) == (session_id is None):
            raise ValueError("give exactly one of trace_id and session_id")
        scope = {"trace_id": trace_id} if trace_id is not None else {"session_id": session_id}
        return _encode({"text": text, **scope})

    @staticmethod
    def approve(digest: str, comment: str | None) -> bytes:
        body = {"digest": digest}
        if comment is not None:
            body["comment"] = comment
        return _encode(body)

    @staticmethod
    def deny(comment: str) -> bytes:
        return _encode({"comment": comment})

    # -- answers --------------------------------------------------------------------------

    def should_retry(self, response: httpx.Response) -> bool:
        if response.status_code not in (409, 503):
            return False
        return _code_of(response) in _RETRY_CODES

    def decision(self, response: httpx.Response) -> Decision:
        """A proposal's answer: returned, or raised as its category's exception."""
        if response.headers.get("content-type", "").split(";")[0].strip() not in (
            "application/json",
            "application/problem+json",
        ):
            raise _unexpected(response)
        try:
            decision = _decision.decode(response.content)
        except msgspec.DecodeError:
            # Failures outside mediation (401, 404, 503 before a decision) have no proposal id.
            raise _problem(response) from None
        decision = msgspec.structs.replace(decision, status=response.status_code)
        rejected = decision.decision == "rejected" or response.status_code >= 400
        if rejected and self.errors == "raise":
            raise error_for(decision.category)(
                decision.reason or decision.code or f"HTTP {response.status_code}",
                status=response.status_code,
                code=decision.code,
                category=decision.category,
                remediation=decision.remediation,
                decision=decision,
            )
        return decision

    @staticmethod
    def tools(response: httpx.Response, format: str | None) -> Any:
        _raise_for_problem(response)
        if format is None:
            return _tools.decode(response.content)["tools"]
        return _any.decode(response.content)

    @staticmethod
    def tool_calls_answer(response: httpx.Response) -> ToolCallsAnswer:
        """A batch is never raised as a whole: one call's rejection is that call's own result,
        which the model reads; ``decisions`` tells a program which calls were refused."""
        _raise_for_problem(response)
        return _tool_calls.decode(response.content)

    @staticmethod
    def report(response: httpx.Response) -> ImpliedWriteReport:
        _raise_for_problem(response)
        return _report.decode(response.content)

    @staticmethod
    def approval(response: httpx.Response) -> Approval:
        """An approval, or its refusal raised (404 unknown, 409 ``approval_conflict``, …)."""
        _raise_for_problem(response)
        return _approval.decode(response.content)

    @staticmethod
    def approvals(response: httpx.Response) -> list[Approval]:
        _raise_for_problem(response)
        return _approvals.decode(response.content)["approvals"]

    @staticmethod
    def json(response: httpx.Response) -> Any:
        _raise_for_problem(response)
        return _any.decode(response.content)

    @staticmethod
    def transport_error(error: httpx.TransportError) -> TransportError:
        return TransportError(f"the broker could not be reached: {error!r}", status=0)


def plain(value: Any) -> Any:
    """SDK objects (pydantic models) to plain JSON values, under their wire names (Gemini's
    ``functionCall``, not ``function_call``); plain values pass through."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True, by_alias=True)
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    return value


def _code_of(response: httpx.Response) -> str | None:
    try:
        body = _any.decode(response.content)
    except msgspec.DecodeError:
        return None
    return body.get("code") if isinstance(body, dict) else None


def _raise_for_problem(response: httpx.Response) -> None:
    if response.status_code >= 400:
        raise _problem(response)


def _problem(response: httpx.Response) -> BrokerError:
    try:
        body = _any.decode(response.content)
    except msgspec.DecodeError:
        return _unexpected(response)
    if not isinstance(body, dict):
        return _unexpected(response)
    return error_for(body.get("category"))(
        str(body.get("detail") or body.get("title") or f"HTTP {response.status_code}"),
        status=response.status_code,
        code=body.get("code"),
        category=body.get("category"),
        remediation=body.get("remediation"),
        body=body,
    )


def _unexpected(response: httpx.Response) -> BrokerError:
    return BrokerError(
        f"unexpected answer: HTTP {response.status_code} {response.text[:200]!r}",
        status=response.status_code,
    )
