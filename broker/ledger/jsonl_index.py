"""The JSONL sink's in-memory index: line offsets, head, and trace/session/proposal lookups."""

from __future__ import annotations

import logging
from array import array

import msgspec

from broker.ledger.model import AuditRef, LedgerEntry
from broker.ledger.sealing import decode_seq

__all__ = ["LineIndex"]

_log = logging.getLogger("broker.ledger")


class LineIndex:
    """What one process knows about the complete lines of a ledger file.

    Lines are addressed by their number in the file (storage order); ``seq`` maps to a line as
    ``seq - 1`` unless the file says otherwise (``misplaced``), which only a damaged or tampered
    file does. Memory: 8 bytes per record for offsets, plus the trace, session and proposal
    maps (records without a session_id are in no session).
    """

    __slots__ = (
        "end",
        "head",
        "misplaced",
        "proposals",
        "sessions",
        "starts",
        "tail_malformed",
        "traces",
    )

    def __init__(self) -> None:
        self.starts = array("Q")
        self.end = 0
        """Byte offset just past the last complete line consumed."""
        self.head: AuditRef | None = None
        self.tail_malformed = False
        """The last complete line could not be parsed: the head is unknown, appends must stop."""
        self.misplaced: dict[int, int] = {}
        self.traces: dict[str, list[int]] = {}
        self.sessions: dict[str, list[int]] = {}
        self.proposals: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.starts)

    def consume(self, data: bytes, base: int) -> int:
        """Index the complete lines of ``data`` (which starts at file offset ``base``).

        Returns the number of bytes consumed; a trailing partial line is left for later.
        """
        assert base == self.end, "lines must be consumed in file order"  # noqa: S101
        last_newline = data.rfind(b"\n")
        if last_newline < 0:
            return 0
        offset = base
        for line in data[:last_newline].split(b"\n"):
            self._add(line, offset)
            offset += len(line) + 1
        self.end = offset
        return offset - base

    def append_sealed(self, entry: LedgerEntry, ref: AuditRef, length: int) -> None:
        """Index the line ``entry`` was just sealed into as ``ref`` (``length`` bytes, newline
        included) without parsing it again: the sealer already knows every field kept here."""
        self._index(ref, entry.trace_id, entry.proposal_id, entry.session_id, self.end)
        self.end += length

    def _add(self, line: bytes, start: int) -> None:
        try:
            view = decode_seq(line)
        except msgspec.DecodeError:
            _log.warning(
                "ledger line %d (byte %d) is malformed; run `ledger verify`",
                len(self.starts),
                start,
            )
            self.starts.append(start)
            self.tail_malformed = True
            return
        ref = AuditRef(view.seq, view.hash)
        self._index(ref, view.trace_id, view.proposal_id, view.session_id, start)

    def _index(
        self, ref: AuditRef, trace_id: str, proposal_id: str, session_id: str | None, start: int
    ) -> None:
        seq = ref.seq
        line_no = len(self.starts)
        self.starts.append(start)
        self.tail_malformed = False
        if seq != line_no + 1:
            self.misplaced[seq] = line_no
        self.head = ref
        self.traces.setdefault(trace_id, []).append(seq)
        if session_id is not None:
            self.sessions.setdefault(session_id, []).append(seq)
        self.proposals[proposal_id] = seq

    def line_of(self, seq: int) -> int | None:
        """The line holding ``seq``, if this index has seen it."""
        line_no = self.misplaced.get(seq, seq - 1)
        return line_no if 0 <= line_no < len(self.starts) else None

    def span(self, line_no: int) -> tuple[int, int]:
        """Byte range of a line, newline excluded."""
        start = self.starts[line_no]
        stop = self.starts[line_no + 1] if line_no + 1 < len(self.starts) else self.end
        return start, stop - 1
