"""The demo backend: three tools and five precondition verifiers over in-memory tenant data.

It keeps its own record of every effect (``tickets`` and ``credits``), which tests read as the
ground truth for "executed exactly once".
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import msgspec

from adapters.demo.credit_totals import (
    CreditTotals,
    MemoryCreditTotals,
    RedisCreditTotals,
    from_micros,
    to_micros,
)
from adapters.demo.data import Order, TenantData, seed
from broker.plugins import (
    Adapter,
    AdapterContext,
    Check,
    PreconditionVerifier,
    ProviderError,
    VerifierContext,
    crash_point,
)

__all__ = ["CountingNumbers", "DemoBackend", "Numbers", "RedisNumbers", "create_backend"]

RETURN_WINDOW = timedelta(days=30)

_json = msgspec.json.Encoder()

Operation = Callable[[dict[str, Any], AdapterContext], Awaitable[dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class _OperationAdapter:
    """Adapts one backend method to the :class:`~broker.plugins.Adapter` protocol."""

    operation: Operation
    preview_operation: Operation | None = None

    async def invoke(self, args: dict[str, Any], ctx: AdapterContext) -> dict[str, Any]:
        result = await self.operation(args, ctx)
        crash_point("after_send")  # the effect happened; its result is not read yet
        return result

    async def preview(self, args: dict[str, Any], ctx: AdapterContext) -> dict[str, Any]:
        if self.preview_operation is None:
            return {}
        return await self.preview_operation(args, ctx)


class DemoBackend:
    """Orders, tickets and credits for tenants ``acme`` and ``globex``.

    Args:
        latency_s: delay added to every effectful call (tests use it to overlap requests).
        now: the demo's "today", for purchase dates and the return window.
        effects_path: if set, every effect is also appended to this JSONL file, so tests that
            run several broker processes can count what executed across all of them.
        numbers: where ticket and credit numbers come from; per process by default, shared
            (:class:`RedisNumbers`) when several broker processes serve the demo together.
        credit_totals: how much of each order is credited already; per process by default,
            shared (:class:`RedisCreditTotals`) likewise.
    """

    def __init__(
        self,
        *,
        latency_s: float = 0.0,
        now: datetime | None = None,
        effects_path: str | None = None,
        numbers: Numbers | None = None,
        credit_totals: CreditTotals | None = None,
    ) -> None:
        self._now = now or datetime.now(UTC)
        self._credit_totals = credit_totals or MemoryCreditTotals()
        self._effects_path = effects_path
        self._effects_file: int | None = None
        self._numbers = numbers or CountingNumbers()
        self._latency_s = latency_s
        self._tenants = seed(self._now)
        self.tickets: list[dict[str, Any]] = []
        self.credits: list[dict[str, Any]] = []
        self._adapters: dict[str, Adapter] = {
            "lookup_order": _OperationAdapter(self._lookup_order),
            "create_support_ticket": _OperationAdapter(
                self._create_support_ticket, self._preview_ticket
            ),
            "issue_credit": _OperationAdapter(self._issue_credit, self._preview_credit),
        }
        self._verifiers: dict[str, PreconditionVerifier] = {
            "customer_verified": self._customer_verified,
            "open_invoice_present": self._open_invoice_present,
            "order_paid": self._order_paid,
            "within_return_window": self._within_return_window,
            "credit_within_order": self._credit_within_order,
        }

    @property
    def adapters(self) -> Mapping[str, Adapter]:
        return self._adapters

    @property
    def verifiers(self) -> Mapping[str, PreconditionVerifier]:
        return self._verifiers

    # -- operations -----------------------------------------------------------------------------

    async def _lookup_order(self, args: dict[str, Any], ctx: AdapterContext) -> dict[str, Any]:
        order = self._order(ctx.tenant, args["order_id"])
        if order is None:
            raise ProviderError(f"order {args['order_id']} not found")
        return {
            "order_id": order.order_id,
            "customer_id": order.customer_id,
            "paid": order.paid,
            "purchased_at": order.purchased_at.date().isoformat(),
            "total": order.total,
            "currency": order.currency,
        }

    async def _create_support_ticket(
        self, args: dict[str, Any], ctx: AdapterContext
    ) -> dict[str, Any]:
        await self._pause()
        ticket_id = f"T-{77390 + await self._numbers.next('ticket')}"
        self._effect(self.tickets, {"tenant": ctx.tenant, "ticket_id": ticket_id, **args}, ctx)
        return {
            "ticket_id": ticket_id,
            "url": f"https://support.example.com/{ticket_id}",
            "status": "created",
        }

    async def _preview_ticket(self, args: dict[str, Any], ctx: AdapterContext) -> dict[str, Any]:
        return {"would_create": {"customer_id": args["customer_id"], "priority": args["priority"]}}

    async def _issue_credit(self, args: dict[str, Any], ctx: AdapterContext) -> dict[str, Any]:
        await self._pause()
        credit_id = f"CR-{1000 + await self._numbers.next('credit')}"
        # Checked again where the credit is made, and taken in one atomic step: two credits that
        # both passed the precondition cannot together exceed the order.
        refused = await self._credit_refusal(ctx.tenant, args)
        order = self._order(ctx.tenant, args["order_id"])
        if refused is None and order is not None:
            amount, total = to_micros(args["amount"]), to_micros(order.total)
            if not await self._credit_totals.add_if_within(
                ctx.tenant, order.order_id, amount, total
            ):
                refused = await self._credit_refusal(ctx.tenant, args)
        if refused is not None:
            raise ProviderError(refused.reason or "the credit does not fit the order")
        self._effect(self.credits, {"tenant": ctx.tenant, "credit_id": credit_id, **args}, ctx)
        return {
            "credit_id": credit_id,
            "amount": args["amount"],
            "currency": args["currency"],
            "status": "issued",
        }

    async def _preview_credit(self, args: dict[str, Any], ctx: AdapterContext) -> dict[str, Any]:
        return {"would_issue": {"order_id": args["order_id"], "amount": args["amount"]}}

    # -- verifiers ------------------------------------------------------------------------------

    async def _customer_verified(self, args: dict[str, Any], ctx: VerifierContext) -> Check:
        customer = self._tenants.get(ctx.tenant, TenantData()).customers.get(args["customer_id"])
        if customer is None:
            return Check(False, f"customer {args['customer_id']} not found")
        if not customer.verified:
            return Check(False, f"customer {customer.customer_id} is not verified")
        return Check(True)

    async def _open_invoice_present(self, args: dict[str, Any], ctx: VerifierContext) -> Check:
        customer = self._tenants.get(ctx.tenant, TenantData()).customers.get(args["customer_id"])
        if customer is None:
            return Check(False, f"customer {args['customer_id']} not found")
        if customer.open_invoice is None:
            return Check(False, "Precondition 'open_invoice_present' failed")
        return Check(True)

    async def _order_paid(self, args: dict[str, Any], ctx: VerifierContext) -> Check:
        order = self._order(ctx.tenant, args["order_id"])
        if order is None:
            return Check(False, f"order {args['order_id']} not found")
        if not order.paid:
            return Check(False, f"order {order.order_id} is not paid")
        return Check(True)

    async def _within_return_window(self, args: dict[str, Any], ctx: VerifierContext) -> Check:
        order = self._order(ctx.tenant, args["order_id"])
        if order is None:
            return Check(False, f"order {args['order_id']} not found")
        age = self._now - order.purchased_at
        if age > RETURN_WINDOW:
            return Check(
                False,
                f"order {order.order_id} was bought {age.days} days ago, outside the 30-day window",
                "ESCALATE: credits outside the return window need a human decision",
            )
        return Check(True)

    async def _credit_within_order(self, args: dict[str, Any], ctx: VerifierContext) -> Check:
        return await self._credit_refusal(ctx.tenant, args) or Check(True)

    async def _credit_refusal(self, tenant: str, args: dict[str, Any]) -> Check | None:
        """Why a credit does not fit its order: another currency, or more than is left of the
        order's total after its earlier credits."""
        order = self._order(tenant, args["order_id"])
        if order is None:
            return Check(False, f"order {args['order_id']} not found")
        if args["currency"] != order.currency:
            return Check(
                False,
                f"order {order.order_id} was paid in {order.currency}, not {args['currency']}",
                f"REPLAN: issue the credit in {order.currency}",
            )
        credited = await self._credit_totals.credited(tenant, order.order_id)
        left = from_micros(to_micros(order.total) - credited)
        if to_micros(args["amount"]) > to_micros(order.total) - credited:
            return Check(
                False,
                f"a credit of {args['amount']:g} {order.currency} exceeds what is left of order "
                f"{order.order_id} ({left:g} of {order.total:g} {order.currency})",
                f"REPLAN: credit at most {left:g} {order.currency}",
            )
        return None

    # -- helpers --------------------------------------------------------------------------------

    def _effect(
        self, effects: list[dict[str, Any]], effect: dict[str, Any], ctx: AdapterContext
    ) -> None:
        effects.append(effect)
        if self._effects_path:
            line = _json.encode({**effect, "idempotency_key": ctx.idempotency_key}) + b"\n"
            # One write on an O_APPEND descriptor: lines from several processes never interleave.
            os.write(self._effects_fd(self._effects_path), line)

    def _effects_fd(self, path: str) -> int:
        """The effects file, opened on the first effect and kept open (the process closes it):
        an open and a close per effect cost as much as the rest of a demo call."""
        if self._effects_file is None:
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
            self._effects_file = os.open(path, flags, 0o600)
        return self._effects_file

    def _order(self, tenant: str, order_id: str) -> Order | None:
        return self._tenants.get(tenant, TenantData()).orders.get(order_id)

    async def _pause(self) -> None:
        if self._latency_s:
            await asyncio.sleep(self._latency_s)


class Numbers(Protocol):
    async def next(self, kind: str) -> int:
        """1, 2, 3, ... for each ``kind`` (ticket, credit)."""
        ...


class CountingNumbers:
    """Numbers kept in this process: enough for one broker process."""

    def __init__(self) -> None:
        self._counters: dict[str, itertools.count[int]] = {}

    async def next(self, kind: str) -> int:
        return next(self._counters.setdefault(kind, itertools.count(1)))


class RedisNumbers:
    """Numbers shared by every broker process on one Redis (and kept across restarts).

    Each process reserves a block of ``block`` numbers at a time (one ``INCRBY``), so a ticket
    costs a Redis round trip only once per block rather than on every call. Numbers stay
    distinct across processes and increase within one; a restart leaves the rest of its block
    unused, which is only a gap.
    """

    def __init__(self, url: str, namespace: str, *, block: int = 100) -> None:
        from redis.asyncio import Redis

        if block < 1:
            raise ValueError("block must be >= 1")
        self._redis = Redis.from_url(url)
        self._namespace = namespace
        self._block = block
        self._reserved: dict[str, range] = {}
        self._reserving = asyncio.Lock()

    async def next(self, kind: str) -> int:
        while not self._reserved.get(kind):
            # One reservation at a time: the calls that find the block used up while it is
            # being refilled wait for it, rather than each reserving (and wasting) one.
            async with self._reserving:
                if not self._reserved.get(kind):
                    key = f"{self._namespace}:{kind}"
                    top = int(await self._redis.incrby(key, self._block))
                    self._reserved[kind] = range(top - self._block + 1, top + 1)
        numbers = self._reserved[kind]
        self._reserved[kind] = numbers[1:]
        return numbers[0]

    async def aclose(self) -> None:
        await self._redis.aclose()


def create_backend(
    latency_s: float = 0.0,
    effects_path: str | None = None,
    redis_url: str | None = None,
    numbers_key: str = "demo:numbers",
) -> DemoBackend:
    """Factory named by ``[backends.demo] factory = "adapters.demo:create_backend"``.

    With ``redis_url`` (or ``REDIS_URL`` in the environment, as ``make run`` passes it) ticket and
    credit numbers are shared by every process, so two processes never hand out one id twice,
    and so is what each order has been credited (under ``numbers_key``).
    """
    url = redis_url or os.environ.get("REDIS_URL")
    numbers = RedisNumbers(url, numbers_key) if url else None
    totals = RedisCreditTotals(url, numbers_key) if url else None
    return DemoBackend(
        latency_s=latency_s, effects_path=effects_path, numbers=numbers, credit_totals=totals
    )
