"""export_jsonl(): stream stored records, byte for byte, to a SIEM or an auditor."""

from __future__ import annotations

from typing import IO

import msgspec

from broker.ledger.sealing import decode_seq
from broker.ledger.sink import LedgerSink
from broker.ledger.verify import stored_lines

__all__ = ["export_jsonl"]


async def export_jsonl(sink: LedgerSink, start: int, end: int | None, out: IO[bytes]) -> int:
    """Write records ``start``..``end`` (inclusive; ``None`` = to the head) to ``out`` as JSONL.

    The stored bytes are written unchanged (hash field included), so the receiver can verify
    them with the same tool. A malformed line inside the range is exported too: hiding it would
    hide the evidence. Returns the number of lines written.
    """
    written = 0
    async for line in stored_lines(sink, start):
        try:
            seq = decode_seq(line).seq
        except msgspec.DecodeError:
            seq = None
        if seq is not None and seq < start:
            continue
        if seq is not None and end is not None and seq > end:
            break
        out.write(line + b"\n")
        written += 1
    return written
