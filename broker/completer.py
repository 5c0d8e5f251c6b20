"""The completer: claims stuck past their lease are driven to their next state, periodically.

A process that dies mid-proposal (a crash, an OOM kill, a lost node) leaves its key's claim in
progress. The store resolves such a claim when the key is next admitted or looked up, but a key
nobody retries would stay in progress, unseen, until its record is collected. The completer
resolves them without waiting for a retry (brandur's completer, reliability matrix §2.1):

* a claim never marked dispatched is released and its budget charges refunded: its call never
  left (the process died after the claim or after admission);
* a dispatched claim whose proposal has a final ledger record is settled from it
  (``broker.recovery``): the process died after recording, before settling; a retry replays;
* any other dispatched claim of an idempotent tool is released (running it again is harmless);
* any other becomes ``outcome_unknown``: the call may have reached its backend, so it is never
  run blindly again; an operator (or a reconcile step) decides.

Each one is counted in ``broker_stuck_claims_completed_total{outcome}`` (``released``,
``settled``, ``outcome_unknown``), the metric to alert on:
a stuck claim means a process died holding a call. Every process runs its own completer; the
transition is a compare-and-set in the store, so two completers never resolve one claim twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from prometheus_client import Counter

from broker.logs import RateLimitedLog
from broker.stores import ClaimCompleter, StuckClaims
from broker.taxonomy import StoreUnavailableError

__all__ = ["PASS_LIMIT", "Completer"]

log = logging.getLogger("broker.completer")

PASS_LIMIT = 1000
"""The most claims one pass resolves: the rest wait for the next pass, so a pass stays short."""


class Completer:
    """Runs :meth:`ClaimCompleter.complete_stuck` every ``interval_s`` in a background task.

    Args:
        store: the store whose stuck claims are completed.
        completed: ``broker_stuck_claims_completed_total`` (``BrokerMetrics``), by outcome.
        interval_s: seconds between passes; 0 never starts the task (``run_once`` still works).
        clock: wall-clock seconds, the same clock the store's leases are written with.
    """

    def __init__(
        self,
        store: ClaimCompleter,
        completed: Counter,
        *,
        interval_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._interval_s = interval_s
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        self._fault_log = RateLimitedLog(log, every_s=60.0)
        self.completed = completed
        for outcome in ("released", "settled", "outcome_unknown"):
            self.completed.labels(outcome)  # zeros from the start: alerts see a series

    async def run_once(self) -> StuckClaims:
        """One pass: complete what is stuck now, count it, say so in the log."""
        done = await self._store.complete_stuck(now=self._clock(), limit=PASS_LIMIT)
        if done.released:
            self.completed.labels("released").inc(done.released)
        if done.unknown:
            self.completed.labels("outcome_unknown").inc(done.unknown)
        if done.settled:
            self.completed.labels("settled").inc(done.settled)
        if done.released or done.unknown or done.settled:
            log.warning(
                "completed %d claim(s) stuck past their lease: %d released, "
                "%d settled from the ledger, %d outcome_unknown",
                done.released + done.unknown + done.settled,
                done.released,
                done.settled,
                done.unknown,
            )
        return done

    def start(self) -> None:
        if self._interval_s > 0 and self._task is None:
            self._task = asyncio.create_task(self._run(), name="broker-completer")

    async def stop(self) -> None:
        if self._task is None:
            return
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                await self.run_once()
            except StoreUnavailableError as exc:
                # The store is down: proposals fail closed meanwhile; say so once a minute.
                self._fault_log.warning("completer: store unavailable (%s)", exc)
            except Exception:
                log.exception("completer pass failed")
