"""The signature tail: ledger records past the latest signed checkpoint.

Records after the last checkpoint can be cut or rewritten without a signature noticing; the tail
is normally at most one heartbeat's worth of records, and grows only while checkpoints fail.
"""

from __future__ import annotations

from broker.ledger.checkpoints import Checkpoint, CheckpointFormatError, CheckpointStore
from broker.ledger.errors import LedgerUnavailableError
from broker.ledger.sink import LedgerSink

__all__ = ["unsigned_records"]


async def unsigned_records(
    sink: LedgerSink, store: CheckpointStore, last: Checkpoint | None
) -> int | None:
    """How many records the head is past ``last`` (or past the store's latest checkpoint when
    this process signed none yet); ``None`` when the ledger cannot say (it is unavailable, which
    ``broker_ledger_unavailable`` reports, or its checkpoints are unreadable, which verify reports)."""
    try:
        head = await sink.head()
        if last is None:
            stored = await store.read_all()
            last = stored[-1] if stored else None
    except (LedgerUnavailableError, CheckpointFormatError):
        return None
    head_seq = head.seq if head is not None else 0
    return max(head_seq - (last.seq if last is not None else 0), 0)
