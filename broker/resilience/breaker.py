"""A circuit breaker per backend: stop calling a backend that keeps failing, then probe it once.

closed ──(``failures`` transient failures in a row)──▶ open ──(``open_s`` passed)──▶ half-open
half-open: one call (the probe) goes through; its success closes the breaker, its transient
failure opens it again for ``open_s``. A definite failure (a 4xx other than 408/429) means the
backend answered: it counts as a success here, so refusals can never open a breaker.

While open, :meth:`CircuitBreaker.admit` answers how long to wait (``Retry-After``) and the call
never reaches the backend. Time is ``time.monotonic`` in process, so a jump of the wall clock
cannot open or close a breaker. With Redis as the store, the open state is shared (see
``broker.resilience.breaker_redis``): a process that opens a breaker publishes its open-until
time, and every process looks at it at most every ``sync_s`` while its own breaker is closed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from enum import IntEnum
from typing import Protocol

__all__ = ["BreakerState", "CircuitBreaker", "SharedBreakerStates"]

log = logging.getLogger("broker.resilience.breaker")


class BreakerState(IntEnum):
    """The state as the ``broker_backend_circuit_state`` gauge shows it."""

    CLOSED = 0
    OPEN = 1
    HALF_OPEN = 2


class SharedBreakerStates(Protocol):
    """Where processes share open breakers (Redis); every method fails by raising."""

    async def check(self, backend: str, probe_s: float) -> float | None:
        """``None``: closed; ``0``: it was open and this caller now holds the probe; else the
        seconds it stays open."""

    async def open(self, backend: str, open_s: float) -> None: ...

    async def close(self, backend: str) -> None: ...


class CircuitBreaker:
    """One backend's breaker, in one process (optionally sharing its open state)."""

    def __init__(
        self,
        backend: str,
        *,
        failures: int,
        open_s: float,
        shared: SharedBreakerStates | None = None,
        sync_s: float = 0.25,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.backend = backend
        self.failures = failures
        self.open_s = open_s
        self.shared = shared
        self.sync_s = sync_s
        self.clock = clock
        self.state = BreakerState.CLOSED
        self.consecutive = 0
        self.rejected = 0
        """Calls refused while open (a counter, for metrics)."""
        self._open_until = 0.0
        self._probing = False
        self._next_sync = 0.0
        self._tasks: set[asyncio.Task[None]] = set()

    def closed_here(self) -> bool:
        """Closed, with nothing to look up in the shared state now: :meth:`admit` would say
        ``None`` at once (checked without a coroutine, on every call)."""
        return self.state is BreakerState.CLOSED and (
            self.shared is None or self.clock() < self._next_sync
        )

    async def admit(self, probe_s: float) -> float | None:
        """``None`` when the call may go ahead, else the seconds after which to try again.

        Args:
            probe_s: how long a probe call may take (its deadline): the probe slot is held that
                long at most, so a probe that never reports cannot keep the breaker half-open.
        """
        now = self.clock()
        if self.state is BreakerState.CLOSED:
            if self.shared is None or now < self._next_sync:
                return None
            self._next_sync = now + self.sync_s
            return await self._follow_shared(now, probe_s)
        if self.state is BreakerState.OPEN and now < self._open_until:
            self.rejected += 1
            return self._open_until - now
        if self._probing and now < self._open_until:
            self.rejected += 1  # half-open, and another call is the probe
            return max(self._open_until - now, 1.0)
        # Open long enough: this call is the probe (if no other process took it first).
        if self.shared is not None:
            try:
                remaining = await self.shared.check(self.backend, probe_s)
            except Exception:
                remaining = 0.0  # Redis down: decide for this process alone
                log.warning("breaker %s: shared state unreachable", self.backend, exc_info=True)
            if remaining:
                self.rejected += 1
                self.state, self._open_until = BreakerState.OPEN, now + remaining
                return remaining
        self.state, self._probing, self._open_until = BreakerState.HALF_OPEN, True, now + probe_s
        return None

    async def _follow_shared(self, now: float, probe_s: float) -> float | None:
        shared = self.shared
        if shared is None:
            return None
        try:
            remaining = await shared.check(self.backend, probe_s)
        except Exception:
            log.warning("breaker %s: shared state unreachable", self.backend, exc_info=True)
            return None  # fail open: the local breaker still protects this process
        if remaining is None:
            return None
        if remaining == 0:  # another process's breaker expired: this call probes for all
            self.state, self._probing, self._open_until = (
                BreakerState.HALF_OPEN,
                True,
                now + probe_s,
            )
            return None
        self.rejected += 1
        self.state, self._open_until = BreakerState.OPEN, now + remaining
        return remaining

    def succeeded(self) -> None:
        """The backend answered (a result, or a definite refusal)."""
        self.consecutive = 0
        if self.state is not BreakerState.CLOSED:
            self.state, self._probing = BreakerState.CLOSED, False
            log.info("breaker %s closed: the probe succeeded", self.backend)
            self._publish(close=True)

    def failed(self) -> None:
        """A transient failure: 5xx, 408, 429, a timeout or a connection error."""
        self.consecutive += 1
        if self.state is BreakerState.HALF_OPEN or (
            self.state is BreakerState.CLOSED and self.consecutive >= self.failures
        ):
            self.state, self._probing = BreakerState.OPEN, False
            self._open_until = self.clock() + self.open_s
            log.warning(
                "breaker %s opened for %gs after %d transient failures in a row",
                self.backend,
                self.open_s,
                self.consecutive,
            )
            self._publish(close=False)

    def _publish(self, *, close: bool) -> None:
        """Tell the other processes, without holding up this call (or failing it)."""
        if self.shared is None:
            return
        change = (
            self.shared.close(self.backend)
            if close
            else self.shared.open(self.backend, self.open_s)
        )
        task = asyncio.get_running_loop().create_task(_logged(change, self.backend))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


async def _logged(change: Awaitable[None], backend: str) -> None:
    try:
        await change
    except Exception:
        log.warning("breaker %s: could not share its state", backend, exc_info=True)
