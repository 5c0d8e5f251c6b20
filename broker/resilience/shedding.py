"""Load shedding and draining: refuse new proposals before they touch any state.

A proposal is refused with 503 ``service_unavailable`` and ``Retry-After``, before it is
authenticated, read or recorded (so nothing is claimed, charged or written), when:

* the process already has ``[service] max_in_flight_proposals`` in flight;
* the event loop runs ``max_event_loop_lag_s`` late or more (a timer that should fire every
  100 ms measures how late it fires: the time every request in the process waits for CPU);
* the process is draining: after SIGTERM, proposals in flight finish (within
  ``shutdown_grace_s``) while new ones are refused, then the server stops as it would have
  (the app's shutdown flushes the ledger and signs a final checkpoint).

``/readyz`` answers 503 while any of these holds, so a load balancer stops sending work.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import msgspec
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from broker.model import ProblemDetails
from broker.responses import PROBLEM_JSON, Answer, problem_fields
from broker.taxonomy import CODE_STATUS, Code

__all__ = ["LoadShedder"]

log = logging.getLogger("broker.shedding")

_LAG_INTERVAL_S = 0.1
_encoder = msgspec.json.Encoder()


class LoadShedder:
    """One process's count of proposals in flight, its event-loop lag, and its draining flag."""

    def __init__(
        self,
        *,
        max_in_flight: int = 0,
        max_lag_s: float = 0.0,
        grace_s: float = 30.0,
    ) -> None:
        self.max_in_flight = max_in_flight
        self.max_lag_s = max_lag_s
        self.grace_s = grace_s
        self.in_flight = 0
        self.lag_s = 0.0
        self.draining = False
        self.shed = 0
        """Proposals refused here (a counter, for metrics)."""
        self._idle = asyncio.Event()
        self._idle.set()
        self._tasks: set[asyncio.Task[None]] = set()

    # -- the proposal path ---------------------------------------------------------------------

    def refusal(self) -> Answer | None:
        """``None`` when a new proposal may start, else the 503 to answer it with."""
        reason = self.not_ready()
        if reason is None:
            return None
        self.shed += 1
        if reason == "draining":
            return _unavailable("the broker is shutting down; send it to another replica", 1)
        return _unavailable("the broker is overloaded; retry after Retry-After seconds", 1)

    def not_ready(self) -> str | None:
        """``draining``, ``overloaded`` or ``None`` (what ``/readyz`` reports as ``load``)."""
        if self.draining:
            return "draining"
        if self.max_in_flight and self.in_flight >= self.max_in_flight:
            return "overloaded"
        if self.max_lag_s and self.lag_s >= self.max_lag_s:
            return "overloaded"
        return None

    def started(self) -> None:
        self.in_flight += 1
        self._idle.clear()

    def finished(self) -> None:
        self.in_flight -= 1
        if self.in_flight == 0:
            self._idle.set()

    # -- the process ---------------------------------------------------------------------------

    def start(self) -> None:
        """Measure the loop's lag (when bounded) and drain on SIGTERM (in the serving loop)."""
        loop = asyncio.get_running_loop()
        if self.max_lag_s:
            self._spawn(self._measure_lag())
        self._drain_on_sigterm(loop)

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def drained(self, timeout_s: float) -> bool:
        """Wait until no proposal is in flight, at most ``timeout_s``; whether it came."""
        try:
            async with asyncio.timeout(timeout_s):
                await self._idle.wait()
        except TimeoutError:
            return False
        return True

    async def _measure_lag(self) -> None:
        while True:
            before = time.monotonic()
            await asyncio.sleep(_LAG_INTERVAL_S)
            self.lag_s = max(0.0, time.monotonic() - before - _LAG_INTERVAL_S)

    def _drain_on_sigterm(self, loop: asyncio.AbstractEventLoop) -> None:
        """Take SIGTERM from the server (uvicorn), drain, then hand it back to the server.

        The server's own handler (``signal.getsignal``) stops accepting connections at once;
        draining first lets this process answer 503 to new proposals, so clients learn to go
        elsewhere, while the ones in flight finish.
        """
        previous = signal.getsignal(signal.SIGTERM)
        if not callable(previous):
            return  # no server handler to hand over to (not served by uvicorn's run loop)
        try:
            loop.add_signal_handler(signal.SIGTERM, self._on_sigterm, loop, previous)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
            return

    def _on_sigterm(
        self,
        loop: asyncio.AbstractEventLoop,
        previous: Callable[[int, FrameType | None], Any],
    ) -> None:
        if self.draining:
            return
        self.draining = True
        log.info(
            "SIGTERM: draining %d proposal(s) in flight (grace %gs)", self.in_flight, self.grace_s
        )
        self._spawn(self._hand_over(loop, previous))

    async def _hand_over(
        self,
        loop: asyncio.AbstractEventLoop,
        previous: Callable[[int, FrameType | None], Any],
    ) -> None:
        if not await self.drained(self.grace_s):
            log.warning("grace period over with %d proposal(s) still in flight", self.in_flight)
        loop.remove_signal_handler(signal.SIGTERM)
        signal.signal(signal.SIGTERM, previous)
        previous(signal.SIGTERM, None)  # the server now shuts down as it would have

    def collector(self) -> Collector:
        """A Prometheus collector reading this process's load at scrape time."""
        return _LoadCollector(self)

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


class _LoadCollector(Collector):
    def __init__(self, shedder: LoadShedder) -> None:
        self._shedder = shedder

    def describe(self) -> list[Any]:
        return list(self._families(None))

    def collect(self) -> Iterator[Any]:
        return iter(self._families(self._shedder))

    @staticmethod
    def _families(shedder: LoadShedder | None) -> tuple[Any, ...]:
        in_flight = GaugeMetricFamily(
            "broker_proposals_in_flight", "Proposals being answered by this process."
        )
        lag = GaugeMetricFamily(
            "broker_event_loop_lag_seconds",
            "How late the event loop ran a 100 ms timer, last time (with max_event_loop_lag_s).",
        )
        draining = GaugeMetricFamily(
            "broker_draining", "1 after SIGTERM while proposals in flight finish, else 0."
        )
        shed = CounterMetricFamily(
            "broker_proposals_shed", "Proposals refused 503 before any work (overload, draining)."
        )
        if shedder is not None:
            in_flight.add_metric([], shedder.in_flight)
            lag.add_metric([], shedder.lag_s)
            draining.add_metric([], int(shedder.draining))
            shed.add_metric([], shedder.shed)
        return in_flight, lag, draining, shed


def _unavailable(detail: str, retry_after_s: int) -> Answer:
    type_, title, status = problem_fields(Code.SERVICE_UNAVAILABLE)
    category, _ = CODE_STATUS[Code.SERVICE_UNAVAILABLE]
    body = ProblemDetails(
        type=type_,
        title=title,
        status=status,
        detail=detail,
        category=category.value,
        code=Code.SERVICE_UNAVAILABLE.value,
    )
    return Answer(status, _encoder.encode(body), PROBLEM_JSON, {"Retry-After": str(retry_after_s)})
