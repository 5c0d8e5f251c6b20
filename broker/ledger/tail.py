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
    """How many records the head is past ``last``, or past the store's latest checkpoint when
    this process signed none yet. A checkpoint store that cannot be read proves nothing, so
    then every record counts. ``None`` when the ledger's head cannot be read (the ledger is
    unavailable, which ``broker_ledger_unavailable`` reports)."""
    try:
        head = await sink.head()
    except LedgerUnavailableError:
        return None
    if last is None:
        try:
            stored = await store.read_all()
        except (LedgerUnavailableError, CheckpointFormatError):
            stored = []
        last = stored[-1] if stored else None
    head_seq = head.seq if head is not None else 0
    return max(head_seq - (last.seq if last is not None else 0), 0)
