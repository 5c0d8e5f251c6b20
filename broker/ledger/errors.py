"""The ledger's exceptions, rooted in the broker's error tree so the pipeline maps them to 503."""

from __future__ import annotations

from broker.taxonomy import StoreUnavailableError

__all__ = ["LedgerCorruptError", "LedgerUnavailableError"]


class LedgerUnavailableError(StoreUnavailableError):
    """The ledger could not confirm a read or write (I/O, Redis, contention); fail closed."""


class LedgerCorruptError(LedgerUnavailableError):
    """The stored chain cannot be continued safely (unparseable head, seq collision).

    A subclass of ``LedgerUnavailableError``: the broker refuses to write rather than fork the
    chain, and an operator runs ``ledger verify`` to find out what happened.
    """
