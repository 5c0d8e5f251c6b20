"""Garbage-collector settings for a process that serves the broker for a long time.

Every proposal allocates short-lived containers and leaves a few long-lived ones behind (the
ledger index, idempotency records until they expire). With CPython's defaults a collection runs
every 700 net container allocations, and the older generations it periodically walks hold the
whole app: config, compiled schemas, the registry. Measured on the proposal path that was about
4 % of the CPU (``bench/bench_proposals.py``), most of it re-walking objects that live forever.
"""

from __future__ import annotations

import gc

__all__ = ["tune_gc_for_serving"]

YOUNG_THRESHOLD = 10_000
"""Net container allocations between young collections (CPython's default is 700)."""


def tune_gc_for_serving() -> None:
    """Call once the app is built: what exists now is kept out of every later collection
    (``gc.freeze``), and young collections run about fourteen times less often. Cyclic garbage
    is still collected; only the bookkeeping around the permanent objects goes."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
