"""When a group commit takes its batch: once the event loop went :data:`QUIET_TURNS` turns in a
row without bringing the batch anything new, or after :data:`MAX_WAIT_TURNS` turns whatever
comes. The ledger's group commit and the SQLite store's writer both wait this way.

Why wait at all: a commit's cost is mostly per commit, not per item. Requests read in one turn
have all queued a turn later, but the MCP SDK's dispatcher hands its requests to the chain one
every other turn, so a single quiet turn is no pause there, and each of its calls would
otherwise be a commit of its own.
"""

from __future__ import annotations

__all__ = ["MAX_WAIT_TURNS", "QUIET_TURNS", "QuietTurns"]

QUIET_TURNS = 2
MAX_WAIT_TURNS = 8
"""Items that keep coming every turn still commit, in batches of bounded delay."""


class QuietTurns:
    """The turns one batch has waited: ask :meth:`settled` once a turn."""

    __slots__ = ("_quiet", "_seen", "_turns")

    def __init__(self) -> None:
        self._seen = -1
        self._quiet = 0
        self._turns = 0

    def settled(self, size: int) -> bool:
        """Whether to take the batch now, ``size`` being what it holds this turn; ``False``:
        look again next turn."""
        self._quiet = self._quiet + 1 if size == self._seen else 0
        if self._quiet >= QUIET_TURNS or self._turns >= MAX_WAIT_TURNS:
            return True
        self._seen = size
        self._turns += 1
        return False
