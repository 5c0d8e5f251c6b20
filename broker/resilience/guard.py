"""Each backend's guard: its circuit breaker, then its bulkhead, around every adapter call, and
its retry budget. One :class:`BackendGuards` per process hands out one guard per backend.

A backend is the origin (``scheme://host:port``) of an ``http`` or ``mcp`` adapter, or the
``[backends]`` entry of a ``python`` one: tools served by one backend share its guard, since they
share its capacity and its failures. A call the guard refuses raises :class:`BackendRefused`
(``provider_unavailable`` with ``Retry-After``) and never reaches the backend.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from broker.config import AdapterConfig, PythonAdapterConfig, ServiceSettings
from broker.plugins import Adapter, AdapterContext
from broker.resilience.breaker import CircuitBreaker, SharedBreakerStates
from broker.resilience.bulkhead import Bulkhead
from broker.resilience.retry_budget import RetryBudget
from broker.taxonomy import ProviderError, is_transient

__all__ = [
    "BackendGuard",
    "BackendGuards",
    "BackendRefused",
    "backend_of",
]

_WAIT_MARGIN_S = 0.05
"""A queued call gives up this much before its deadline, so it is answered as refused by the
bulkhead (nothing sent) rather than timed out (perhaps sent)."""
_DEFAULT_PORTS = {"http": 80, "https": 443}


class BackendRefused(ProviderError):
    """The guard did not let the call reach the backend (circuit open, or no slot in time)."""

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message, retryable=False, unavailable=True)
        self.retry_after_s = retry_after_s


def backend_of(adapter: AdapterConfig) -> str:
    """The backend an adapter calls: ``scheme://host:port``, or ``python:<backend>``."""
    if isinstance(adapter, PythonAdapterConfig):
        return f"python:{adapter.backend}"
    parts = urlsplit(adapter.url)
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}:{parts.port or _DEFAULT_PORTS.get(scheme, 0)}"


class BackendGuard:
    """One backend's breaker, bulkhead and retry budget, in this process."""

    def __init__(
        self,
        backend: str,
        *,
        bulkhead: Bulkhead,
        breaker: CircuitBreaker | None,
        budget: RetryBudget,
    ) -> None:
        self.backend = backend
        self.bulkhead = bulkhead
        self.breaker = breaker
        self.budget = budget

    async def invoke(
        self,
        adapter: Adapter,
        args: dict[str, Any],
        ctx: AdapterContext,
        *,
        before_send: Callable[[], Awaitable[None]] | None = None,
    ) -> dict[str, Any]:
        """One attempt through the breaker and the bulkhead; the adapter's result or fault.

        ``before_send`` is awaited once the call holds its slot, just before the adapter is
        called (the executor's dispatch mark); what it raises stops the call unsent, and counts
        as no failure of the backend's.
        """
        breaker = self.breaker
        if breaker is not None and not breaker.closed_here():
            remaining = ctx.deadline - time.monotonic()
            retry_after = await breaker.admit(max(remaining, 0.001))
            if retry_after is not None:
                raise BackendRefused(
                    f"{ctx.tool}: its backend is failing; not called (circuit open)", retry_after
                )
        bulkhead = self.bulkhead
        if not bulkhead.try_acquire() and not await bulkhead.acquire(
            ctx.deadline - time.monotonic() - _WAIT_MARGIN_S
        ):
            raise BackendRefused(
                f"{ctx.tool}: its backend has {bulkhead.limit} calls in flight; "
                "none ended within the deadline",
                1.0,
            )
        if before_send is not None:
            try:
                await before_send()
            except BaseException:
                bulkhead.release()
                raise
        try:
            result = await adapter.invoke(args, ctx)
        except ProviderError as exc:
            if breaker is not None:
                if is_transient(exc):  # the one classification (5xx, 408, 429, transport)
                    breaker.failed()
                else:  # a definite refusal: the backend is up and answering
                    breaker.succeeded()
            raise
        except (asyncio.CancelledError, Exception):
            # The deadline (a timeout), a connection error or an adapter bug: transient.
            if breaker is not None:
                breaker.failed()
            raise
        finally:
            bulkhead.release()
        if breaker is not None:
            breaker.succeeded()
        return result


class BackendGuards:
    """Every backend's guard in one process, built on first use from ``[service]``."""

    def __init__(self, service: ServiceSettings | None = None) -> None:
        self.service = service or ServiceSettings()
        self.shared: SharedBreakerStates | None = None
        self._guards: dict[str, BackendGuard] = {}

    def for_adapter(self, adapter: AdapterConfig) -> BackendGuard:
        """The guard of ``adapter``'s backend; its bulkhead narrowed to the adapter's limit."""
        backend = backend_of(adapter)
        guard = self._guards.get(backend)
        if guard is None:
            service = self.service
            breaker = None
            if service.circuit_breaker:
                breaker = CircuitBreaker(
                    backend,
                    failures=service.breaker_failures,
                    open_s=service.breaker_open_s,
                    shared=self.shared,
                )
            budget = RetryBudget(
                ratio=service.retry_budget_ratio,
                window_s=service.retry_budget_window_s,
                min_retries=service.retry_budget_min_retries,
            )
            guard = BackendGuard(
                backend, bulkhead=Bulkhead(adapter.max_concurrency), breaker=breaker, budget=budget
            )
            self._guards[backend] = guard
        # Tools sharing a backend may name different limits: the lowest protects it for all.
        guard.bulkhead.limit = min(guard.bulkhead.limit, adapter.max_concurrency)
        return guard

    def share_breakers(self, shared: SharedBreakerStates) -> None:
        """Share open breakers between processes (Redis), for existing and future guards."""
        self.shared = shared
        for guard in self._guards.values():
            if guard.breaker is not None:
                guard.breaker.shared = shared

    def __iter__(self) -> Iterator[BackendGuard]:
        return iter(list(self._guards.values()))

    def collector(self) -> Collector:
        """A Prometheus collector reading every guard at scrape time (nothing on the hot path)."""
        return _GuardCollector(self)


class _GuardCollector(Collector):
    def __init__(self, guards: BackendGuards) -> None:
        self._guards = guards

    def describe(self) -> list[Any]:
        return list(self._families())

    def collect(self) -> Iterator[Any]:
        return iter(self._families(list(self._guards)))

    @staticmethod
    def _families(guards: list[BackendGuard] | None = None) -> tuple[Any, ...]:
        in_flight = GaugeMetricFamily(
            "broker_backend_in_flight", "Calls in flight to each backend.", labels=["backend"]
        )
        queued = GaugeMetricFamily(
            "broker_backend_queued",
            "Calls waiting for a slot of each backend's bulkhead.",
            labels=["backend"],
        )
        state = GaugeMetricFamily(
            "broker_backend_circuit_state",
            "Each backend's circuit breaker: 0 closed, 1 open, 2 half-open.",
            labels=["backend"],
        )
        rejections = CounterMetricFamily(
            "broker_backend_rejections",
            "Calls (or retries) a backend's guard refused, by reason: bulkhead (no slot within "
            "the deadline), circuit_open, retry_budget.",
            labels=["backend", "reason"],
        )
        for guard in guards or ():
            name = guard.backend
            in_flight.add_metric([name], guard.bulkhead.in_flight)
            queued.add_metric([name], guard.bulkhead.queued)
            rejections.add_metric([name, "bulkhead"], guard.bulkhead.rejected)
            rejections.add_metric([name, "retry_budget"], guard.budget.denied)
            if guard.breaker is not None:
                state.add_metric([name], int(guard.breaker.state))
                rejections.add_metric([name, "circuit_open"], guard.breaker.rejected)
        return in_flight, queued, state, rejections
