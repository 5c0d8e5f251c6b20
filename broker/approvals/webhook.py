"""The decision webhook: a signed POST tells a backend that an approval was decided.

Signed the Standard Webhooks way (https://www.standardwebhooks.com/): ``webhook-id`` (the same
on every attempt of one message, so a receiver can drop duplicates), ``webhook-timestamp``
(integer Unix seconds of the attempt) and ``webhook-signature: v1,<base64 HMAC-SHA256 of
"id.timestamp.body">``, so any of the spec's verifier libraries checks it.

A message is sent only by the process whose compare-and-set took the decision (so once per
decision, however many processes race), only after that decision is stored, and in a task of
its own: a slow or failing receiver never delays or changes a decision. Attempts are bounded
(408, 429, 5xx and transport faults are retried with jittered backoff; any other answer is a
definite failure); every message ends in one log line and one count of
``broker_approval_webhook_total{outcome}``; one that is given up on is logged whole at ERROR,
so an operator can replay it. A process that dies between the decision and the send loses that
message (the decision itself is durable and readable at ``GET /v1/approvals/{id}``).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

import msgspec
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

from broker.approvals.records import iso
from broker.ids import new_ulid
from broker.taxonomy import ConfigError, ProviderError, is_transient
from broker.tools.secrets import resolve_secret

if TYPE_CHECKING:
    from prometheus_client import Counter

    from broker.approvals.model import ApprovalRecord
    from broker.config.model import WebhookConfig
    from broker.outbound import Outbound

__all__ = ["ApprovalWebhook", "DecisionEvent", "read_webhook_key", "signature", "webhook_key"]

log = logging.getLogger("broker.approvals.webhook")

_encoder = msgspec.json.Encoder()
_outcome = msgspec.json.Decoder(dict[str, Any])
CLOSE_GRACE_S = 5.0
"""How long a stopping process waits for messages still being sent before it gives them up
(each given up is logged whole)."""


class ExecutionOutcome(msgspec.Struct, kw_only=True):
    """What became of an approved action: its final answer's status, decision and code."""

    http_status: int
    decision: str | None
    code: str | None
    execution_status: str | None
    """``succeeded``, ``failed``, ... when the adapter ran; ``None`` when it never did."""


class DecisionData(msgspec.Struct, kw_only=True):
    approval_id: str
    decision: Literal["approved", "denied", "expired"]
    decided_by: str | None
    decided_at: str | None
    comment: str | None
    tool: str
    tenant: str
    route: str
    digest: str
    proposal_id: str
    trace_id: str
    execution: ExecutionOutcome | None
    """Approved actions are sent once executed (or refused on the re-check): their outcome."""


class DecisionEvent(msgspec.Struct, kw_only=True):
    """The body: the Standard Webhooks envelope (``type``, ``timestamp``, ``data``)."""

    type: Literal["approval.decided"] = "approval.decided"
    timestamp: str
    data: DecisionData


def webhook_key(secret: str) -> bytes:
    """The HMAC key: a ``whsec_`` secret is base64 after its prefix, any other its UTF-8 bytes."""
    if secret.startswith("whsec_"):
        return base64.b64decode(secret.removeprefix("whsec_"), validate=True)
    return secret.encode()


def read_webhook_key(config: WebhookConfig, secrets: Mapping[str, str]) -> bytes:
    """The HMAC key from ``signing_secret``; :class:`ConfigError` when it cannot be read (checked
    before the app opens its store or ledger)."""
    where = "approvals.webhook.signing_secret"
    problems: list[tuple[str, str]] = []
    secret = resolve_secret(where, config.signing_secret, secrets, problems)
    if secret is None:
        raise ConfigError(problems)
    try:
        return webhook_key(secret)
    except (binascii.Error, ValueError):
        raise ConfigError([(where, "a whsec_ secret is base64 after its prefix")]) from None


def signature(key: bytes, message_id: str, timestamp: int, body: bytes) -> str:
    """``v1,<base64 HMAC-SHA256 of "id.timestamp.body">``."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.digest(key, signed, hashlib.sha256)).decode()


def outcome_of(record: ApprovalRecord) -> ExecutionOutcome | None:
    if record.status != "executed" or record.final is None:
        return None
    try:
        body = _outcome.decode(record.final.body)
    except msgspec.DecodeError:
        body = {}
    execution = body.get("execution")
    return ExecutionOutcome(
        http_status=record.final.status,
        decision=body.get("decision"),
        code=body.get("code"),
        execution_status=execution.get("status") if isinstance(execution, dict) else None,
    )


def event_for(record: ApprovalRecord, now: float) -> DecisionEvent:
    decision: Literal["approved", "denied", "expired"]
    decision = "expired" if record.status == "expired" else "denied"
    if record.status in ("approved", "executing", "executed"):
        decision = "approved"
    return DecisionEvent(
        timestamp=iso(now),
        data=DecisionData(
            approval_id=record.id,
            decision=decision,
            decided_by=record.decided_by,
            decided_at=iso(record.decided_at) if record.decided_at is not None else None,
            comment=record.comment,
            tool=record.tool,
            tenant=record.tenant,
            route=record.route,
            digest=record.digest,
            proposal_id=record.proposal_id,
            trace_id=record.trace_id,
            execution=outcome_of(record),
        ),
    )


class ApprovalWebhook:
    """Sends each decision to ``[approvals.webhook] url``, in the background, signed."""

    def __init__(
        self,
        config: WebhookConfig,
        key: bytes,
        *,
        outbound: Outbound,
        counter: Counter,
        clock: Callable[[], float],
    ) -> None:
        self._config = config
        self._key = key
        self._outbound = outbound
        self._counter = counter
        self._clock = clock
        self._tenants = frozenset(config.tenants)
        self._sending: set[asyncio.Task[None]] = set()
        for outcome in ("delivered", "retried", "failed"):
            counter.labels(outcome)

    def decided(self, record: ApprovalRecord) -> None:
        """Send this (stored) decision, without waiting for the receiver."""
        if self._tenants and record.tenant not in self._tenants:
            return
        event = event_for(record, self._clock())
        task = asyncio.create_task(self._deliver(f"msg_{new_ulid()}", _encoder.encode(event)))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _deliver(self, message_id: str, body: bytes) -> None:
        config = self._config
        retrying = AsyncRetrying(
            stop=stop_after_attempt(config.attempts),
            wait=wait_random_exponential(
                multiplier=config.initial_backoff_s, max=config.max_backoff_s
            ),
            retry=retry_if_exception(is_transient),
            before_sleep=self._retrying,
            reraise=True,
        )
        try:
            status: int = await retrying(self._attempt, message_id, body)
        except asyncio.CancelledError:
            self._failed(message_id, body, "the process stopped before it was delivered")
            raise
        except (ProviderError, TimeoutError) as exc:
            self._failed(message_id, body, str(exc))
            return
        except Exception as exc:  # a fault of ours: still counted and logged, never lost quietly
            log.exception("approval webhook %s failed unexpectedly", message_id)
            self._failed(message_id, body, repr(exc))
            return
        attempts = retrying.statistics.get("attempt_number", 1)
        self._counter.labels("delivered").inc()
        log.info(
            "approval webhook %s delivered (HTTP %d, attempt %d)", message_id, status, attempts
        )

    async def _attempt(self, message_id: str, body: bytes) -> int:
        timestamp = int(self._clock())
        headers = {
            "content-type": "application/json",
            "webhook-id": message_id,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": signature(self._key, message_id, timestamp, body),
        }
        # The process's pooled client, through the same allowlist as http tools.
        status, _ = await self._outbound.http.post(
            self._config.url, body, headers, timeout_s=self._config.timeout_s
        )
        if 200 <= status < 300:
            return status
        raise ProviderError(
            f"the receiver answered HTTP {status}",
            retryable=status in (408, 429) or status >= 500,
            status=status,
        )

    def _retrying(self, state: RetryCallState) -> None:
        self._counter.labels("retried").inc()
        failed = state.outcome.exception() if state.outcome is not None else None
        log.warning(
            "approval webhook attempt %d failed (%s); retrying", state.attempt_number, failed
        )

    def _failed(self, message_id: str, body: bytes, why: str) -> None:
        self._counter.labels("failed").inc()
        log.error(
            "approval webhook %s not delivered: %s; message follows: %s",
            message_id,
            why,
            body.decode(),
        )

    async def close(self, grace_s: float = CLOSE_GRACE_S) -> None:
        """Wait a little for messages still being sent; those left are given up (logged)."""
        pending = set(self._sending)
        if not pending:
            return
        _, left = await asyncio.wait(pending, timeout=grace_s)
        for task in left:
            task.cancel()
        await asyncio.gather(*left, return_exceptions=True)
