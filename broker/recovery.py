"""What a claim outliving its process is settled with: its proposal's final ledger record.

A process can die after the ledger recorded how a call ended and before the store settled its
key (the ``after_record`` crash point). The ledger then knows what the store does not: whoever
next finds the claim past its lease (the completer, or a retry of the key) asks
:class:`LedgerOutcomes` before completing it, and settles the key as the dead process would
have, so the retry replays the recorded answer instead of ending ``outcome_unknown``.

The record's answer is rebuilt as ``GET /v1/proposals/{id}`` rebuilds it (results as the ledger
keeps them: redacted). How the key is settled follows what the record told the agent: a success
completes it; a failure the agent was told to ``REPLAN`` on (definite) completes it too, one it
was told to ``RETRY`` (transient) releases it; one of unknown outcome (``ESCALATE``) stays
``outcome_unknown``, exactly as without a record.
"""

from __future__ import annotations

from broker.ledger import LedgerSink
from broker.ledger.model import LedgerRecord
from broker.pipeline.ledger_entry import from_ledger
from broker.stores import RecordedOutcome, Settlement

__all__ = ["LedgerOutcomes", "settlement_of"]

_BY_REMEDIATION = {
    "REPLAN": Settlement.DEFINITE_FAILURE,
    "RETRY": Settlement.TRANSIENT_FAILURE,
}
"""A failed execution's settlement, by the first word of the remediation the agent was given
(``broker.pipeline.answers`` words each settlement's; ``ESCALATE`` is the unknown one)."""


def settlement_of(record: LedgerRecord) -> Settlement | None:
    """How the record's call would have been settled; ``None`` if not final or unknown."""
    if record.decision != "approved" or record.dry_run or record.replayed:
        return None
    if record.execution_status == "succeeded":
        return Settlement.SUCCEEDED
    if record.execution_status == "failed" and record.remediation:
        return _BY_REMEDIATION.get(record.remediation.split(":", 1)[0])
    return None


class LedgerOutcomes:
    """:class:`~broker.stores.OutcomeSource` over a ledger sink (JSONL or Redis).

    Args:
        sink: the ledger the proposals are recorded in.
        ttl_s: how long a key settled from a record replays it (the idempotency TTL).

    A ledger that cannot be read raises ``LedgerUnavailableError`` (a ``StoreUnavailableError``):
    the claim is left as it was and the caller answers 503, rather than lapsing a call whose
    record may exist.
    """

    def __init__(self, sink: LedgerSink, *, ttl_s: int) -> None:
        self._sink = sink
        self._ttl_s = ttl_s

    async def outcome_of(self, proposal_id: str) -> RecordedOutcome | None:
        record = await self._sink.by_proposal(proposal_id)
        if record is None:
            return None
        settlement = settlement_of(record)
        answer = from_ledger(record) if settlement is not None else None
        if settlement is None or answer is None:
            return None
        return RecordedOutcome(settlement=settlement, response=answer.response, ttl_s=self._ttl_s)
