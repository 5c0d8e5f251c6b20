"""The pipeline's side of the ledger: append each proposal's entry, and fail closed without it.

An append that fails is never silent: the entry goes to the error log whole, the ledger is
marked unavailable, and world-changing tools are refused until it answers again (a change to
the world that nothing recorded is worse than none).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker.execution import ExecutionReport
from broker.ledger.errors import LedgerUnavailableError
from broker.model import AuditInfo, Decision
from broker.pipeline.context import Decided
from broker.pipeline.ledger_entry import from_ledger, ledger_entry
from broker.responses import Answer
from broker.stores import DecisionRecord

if TYPE_CHECKING:
    from broker.ledger import LedgerSink
    from broker.metrics import BrokerMetrics

__all__ = ["LedgerRecorder"]

log = logging.getLogger("broker.pipeline")


class LedgerRecorder:
    """Appends proposals' entries to one sink (or to none: ``sink=None`` records nothing).

    Args:
        sink: the ledger.
        probe: ping the sink before every world-changing call, not only after a failure
            (cheap for a local file; a Redis ledger is trusted from the admission that just
            reached the same Redis).
        metrics: where failures and the unavailable gauge go.
        config_hash: the contract hash stamped on every entry.
    """

    __slots__ = ("_config_hash", "_healthy", "_metrics", "_probe", "sink")

    def __init__(
        self,
        sink: LedgerSink | None,
        *,
        probe: bool,
        metrics: BrokerMetrics,
        config_hash: str,
    ) -> None:
        self.sink = sink
        self._probe = probe
        self._metrics = metrics
        self._config_hash = config_hash
        self._healthy = True

    async def writable(self) -> bool:
        """Whether a world-changing call may run: its record must be writable afterwards."""
        if self.sink is None or (self._healthy and not self._probe):
            return True
        try:
            await self.sink.ping()
        except LedgerUnavailableError:
            self._healthy = False
            self._metrics.ledger_unavailable.set(1)
            return False
        if not self._healthy:
            self._healthy = True
            self._metrics.ledger_unavailable.set(0)
        return True

    async def record(
        self,
        decided: Decided,
        answer: Decision | Answer,
        decision_us: int,
        *,
        replay: bool = False,
        report: ExecutionReport | None = None,
    ) -> AuditInfo | None:
        """Append this proposal's entry; the reference goes into the answer."""
        if self.sink is None:
            return None
        entry = ledger_entry(decided, answer, decision_us, replay, report, self._config_hash)
        try:
            ref = await self.sink.append(entry)
        except LedgerUnavailableError:
            self._healthy = False
            self._metrics.ledger_errors.inc()
            self._metrics.ledger_unavailable.set(1)
            log.critical("ledger unavailable; unrecorded entry follows: %r", entry)
            return None
        return AuditInfo(ref.seq, ref.hash)

    async def decision(self, proposal_id: str) -> DecisionRecord | None:
        """A proposal's answer rebuilt from its entry, if the ledger has one."""
        if self.sink is None:
            return None
        record = await self.sink.by_proposal(proposal_id)
        return from_ledger(record) if record is not None else None
