"""The ``http`` adapter kind: a backend that serves its tools (and verifiers) over HTTP.

How the broker calls a backend (docs/api.md, "How the broker calls an http adapter"): ``POST url``
with ``{"tool", "args", "tenant", "trace_id", "proposal_id"}`` and the headers
``Idempotency-Key``, ``traceparent``, ``X-Broker-Tenant`` and
``X-Broker-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">``, keyed with the
tool's own signing secret. The caller's bearer token is never forwarded; credentials bound to the
tool (and tenant) go out only in the headers the tool's ``credential_headers`` names.

Answers: a 2xx JSON object is the result; a 3xx (redirects are not followed) or a 4xx other than
408 and 429 is a definite failure, never retried; 408, 429, 502/503/504 and transport faults are
transient and unavailable (their ``Retry-After`` honoured), any other 5xx transient. The executor retries transient failures within the tool's deadline, which
is allowed because this adapter forwards the idempotency key. Bodies over the configured cap are
cut off while streaming. Every URL passes the broker's allowlist, and the connection goes to the
address that was checked (see ``broker.allowlist``), unless a proxy from the environment carries
the call: then the proxy connects (see ``adapters.http_client``).

Backends verify signatures with :func:`verify_signature` (see ``adapters/examples``).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import time
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from adapters.backend_detail import MAX_DETAIL, one_line
from adapters.credentials import credential_headers
from adapters.http_pool import HttpPool
from broker.plugins import (
    AdapterContext,
    Check,
    ProviderError,
    VerifierContext,
    parse_retry_after,
)

__all__ = [
    "SIGNATURE_HEADER",
    "TENANT_HEADER",
    "HttpAdapter",
    "HttpPool",
    "HttpVerifier",
    "sign",
    "traceparent_for",
    "verify_signature",
]

SIGNATURE_HEADER = "X-Broker-Signature"
TENANT_HEADER = "X-Broker-Tenant"
DEFAULT_TOLERANCE_S = 300.0
"""How old (or how far in the future) a signature may be before a backend refuses it."""

_VERIFIER_TIMEOUT_S = 30.0
"""A backstop only: verifiers run inside the tool's own deadline (``asyncio.timeout``)."""
_HEX32 = re.compile(r"^[0-9a-f]{32}$")
_UNAVAILABLE = frozenset({502, 503, 504})
_TRY_LATER = frozenset({408, 429})
"""4xx answers that are transient: the request timed out, or too many requests."""
_encoder = msgspec.json.Encoder()


# -- signatures ---------------------------------------------------------------------------------


def sign(secret: str, body: bytes, *, timestamp: int | None = None) -> str:
    """The ``X-Broker-Signature`` value for ``body``: ``t=<unix>,v1=<hex hmac>``."""
    t = int(time.time()) if timestamp is None else timestamp
    mac = hmac.new(secret.encode("utf-8"), f"{t}.".encode() + body, hashlib.sha256)
    return f"t={t},v1={mac.hexdigest()}"


def verify_signature(
    secrets: str | Iterable[str],
    header: str | None,
    body: bytes,
    *,
    now: float | None = None,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
) -> bool:
    """Whether ``header`` signs ``body`` with one of ``secrets`` within ``tolerance_s`` of now.

    Several ``v1`` values and several secrets are accepted, so a secret can be rotated without
    refusing requests in flight. Comparisons are constant-time.
    """
    if not header:
        return False
    timestamp: int | None = None
    candidates: list[str] = []
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        if key == "t" and value.isdigit():
            timestamp = int(value)
        elif key == "v1":
            candidates.append(value)
    if timestamp is None or not candidates:
        return False
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance_s:
        return False
    keys = [secrets] if isinstance(secrets, str) else list(secrets)
    for secret in keys:
        expected = sign(secret, body, timestamp=timestamp).partition(",v1=")[2]
        if any(hmac.compare_digest(expected, c) for c in candidates):
            return True
    return False


def traceparent_for(trace_id: str) -> str:
    """A W3C ``traceparent`` continuing ``trace_id`` (hashed to 32 hex when it is not one)."""
    trace = trace_id if _HEX32.fullmatch(trace_id) and trace_id != "0" * 32 else ""
    if not trace:
        trace = hashlib.sha256(trace_id.encode("utf-8")).hexdigest()[:32]
    span = os.urandom(8).hex()
    return f"00-{trace}-{span if span != '0' * 16 else '0' * 15 + '1'}-01"


# -- the adapter ------------------------------------------------------------------------------------


class HttpAdapter:
    """One tool served by an HTTP backend."""

    forwards_idempotency_key = True
    """The backend receives ``Idempotency-Key``, so the executor may retry transient faults."""

    def __init__(
        self,
        pool: HttpPool,
        *,
        tool: str,
        url: str,
        secret: str,
        credential_headers: Mapping[str, str] = {},
    ) -> None:
        self._pool = pool
        self._tool = tool
        self._url = url
        self._secret = secret
        self._credential_headers = dict(credential_headers)

    def __repr__(self) -> str:
        return f"HttpAdapter(tool={self._tool!r}, url={self._url!r})"

    async def invoke(self, args: dict[str, Any], ctx: AdapterContext) -> dict[str, Any]:
        body = _encoder.encode(
            {
                "tool": ctx.tool,
                "args": args,
                "tenant": ctx.tenant,
                "trace_id": ctx.trace_id,
                "proposal_id": ctx.proposal_id,
            }
        )
        headers = {
            "Content-Type": "application/json",
            "traceparent": ctx.traceparent or traceparent_for(ctx.trace_id),
            TENANT_HEADER: ctx.tenant,
            "X-Broker-Attempt": str(ctx.attempt),
            SIGNATURE_HEADER: sign(self._secret, body),
        }
        if ctx.idempotency_key is not None:
            headers["Idempotency-Key"] = ctx.idempotency_key
        headers.update(credential_headers(self._tool, self._credential_headers, ctx.credentials))
        remaining = max(ctx.deadline - time.monotonic(), 0.001)
        # The executor's asyncio deadline ends the call; httpx's own timeout is only a backstop.
        reply = await self._pool.post_reply(self._url, body, headers, timeout_s=remaining + 1)
        scrub = _Scrubber(ctx.credentials.values())
        raw = _result(self._tool, reply.status, reply.body, scrub, reply.retry_after)
        result: dict[str, Any] = scrub.result(raw)
        return result


class HttpVerifier:
    """A precondition answered by an HTTP backend: ``{"ok": bool, "reason"?, "remediation"?}``."""

    def __init__(self, pool: HttpPool, *, precondition: str, url: str, secret: str) -> None:
        self._pool = pool
        self._precondition = precondition
        self._url = url
        self._secret = secret

    def __repr__(self) -> str:
        return f"HttpVerifier(precondition={self._precondition!r}, url={self._url!r})"

    async def __call__(self, args: dict[str, Any], ctx: VerifierContext) -> Check:
        body = _encoder.encode(
            {
                "precondition": self._precondition,
                "args": args,
                "tenant": ctx.tenant,
                "route": ctx.route,
                "tool": ctx.tool,
                "trace_id": ctx.trace_id,
            }
        )
        headers = {
            "Content-Type": "application/json",
            "traceparent": traceparent_for(ctx.trace_id),
            TENANT_HEADER: ctx.tenant,
            SIGNATURE_HEADER: sign(self._secret, body),
        }
        reply = await self._pool.post_reply(self._url, body, headers, timeout_s=_VERIFIER_TIMEOUT_S)
        if not 200 <= reply.status < 300:
            # The data plane failed to answer: the proposal is not at fault (see is_transient).
            raise _status_error(
                f"verifier {self._precondition!r} answered HTTP {reply.status}",
                reply.status,
                reply.retry_after,
            )
        try:
            answer = msgspec.json.decode(reply.body, type=_VerifierAnswer)
        except msgspec.DecodeError as exc:
            raise ProviderError(f"verifier {self._precondition!r} answered malformed JSON") from exc
        return Check(answer.ok, answer.reason, answer.remediation)


class _VerifierAnswer(msgspec.Struct, frozen=True):
    ok: bool
    reason: str | None = msgspec.field(default=None)
    remediation: str | None = None

    def __post_init__(self) -> None:
        for text in (self.reason, self.remediation):
            if text is not None and len(text) > 500:
                raise ValueError("reason and remediation are one line each (at most 500 chars)")


# -- answers ---------------------------------------------------------------------------------------


def _status_error(message: str, status: int, retry_after: str | None) -> ProviderError:
    """How a backend's failing status is classified: 502/503/504, 408 and 429 are transient and
    unavailable (the backend did not act, or asks to be called later, honouring ``Retry-After``),
    any other 5xx transient, anything else definite."""
    if status in _UNAVAILABLE or status in _TRY_LATER:
        return ProviderError(
            message,
            retryable=True,
            unavailable=True,
            retry_after_s=parse_retry_after(retry_after),
            status=status,
        )
    return ProviderError(message, retryable=status >= 500, status=status)


def _result(
    tool: str, status: int, payload: bytes, scrub: _Scrubber, retry_after: str | None = None
) -> dict[str, Any]:
    if 200 <= status < 300:
        if not payload.strip():
            return {}
        try:
            result = msgspec.json.decode(payload)
        except msgspec.DecodeError as exc:
            raise ProviderError(f"{tool}: the backend answered invalid JSON") from exc
        if not isinstance(result, dict):
            raise ProviderError(f"{tool}: the backend answered JSON that is not an object")
        return result
    if status in _UNAVAILABLE or status in _TRY_LATER:
        raise _status_error(
            f"{tool}: the backend is unavailable (HTTP {status})", status, retry_after
        )
    if status >= 500:
        raise ProviderError(
            f"{tool}: the backend failed (HTTP {status})", retryable=True, status=status
        )
    if 300 <= status < 400:
        raise ProviderError(
            f"{tool}: the backend redirected (HTTP {status}); not followed", status=status
        )
    # The backend's own reason is for the log and the ledger; the agent gets the fixed message.
    detail = scrub.text(_detail(payload))
    raise ProviderError(
        f"{tool}: the backend refused the request (HTTP {status})",
        detail=detail or None,
        status=status,
    )


def _detail(payload: bytes) -> str:
    """A backend's own one-line reason for a 4xx (``detail``, ``message`` or ``error``), or its
    body's first bytes when it names none."""
    try:
        body = msgspec.json.decode(payload)
    except msgspec.DecodeError:
        return one_line(payload[:MAX_DETAIL].decode("utf-8", errors="replace"))
    if isinstance(body, dict):
        for key in ("detail", "message", "error", "title"):
            value = body.get(key)
            if isinstance(value, str) and value.strip():
                return one_line(value)
    return one_line(payload[:MAX_DETAIL].decode("utf-8", errors="replace"))


class _Scrubber:
    """Replaces this call's credential values wherever a backend echoed them back."""

    def __init__(self, values: Iterable[str]) -> None:
        self._values = sorted({v for v in values if len(v) >= 4}, key=len, reverse=True)

    def text(self, text: str) -> str:
        for value in self._values:
            text = text.replace(value, "[redacted]")
        return text

    def result(self, value: Any) -> Any:
        if not self._values:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self.result(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.result(v) for v in value]
        return value
