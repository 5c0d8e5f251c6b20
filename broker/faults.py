"""Crash points for recovery tests: kill the process at one named line, as a power cut would.

A test names one point in the broker process's environment, ``BROKER_TEST_CRASH_AT=<point>``,
and the process dies (``os._exit``: no ``finally``, no flush, no goodbye) the first time it
reaches that point. Without the variable every hook is a call to a function that returns at
once: the variable is read once, at import, and ``crash_point`` is then bound to a no-op, so a
production process pays one call per hook and never a look-up.

The points, in the order an approved proposal meets them (reliability matrix §2.1):

* ``after_claim``: the store's admission call returned (the key is claimed, budgets taken);
* ``after_admission``: the whole chain approved, before the ledger probe and the adapter (and
  before the claim is marked dispatched: recovery releases it);
* ``after_send``: the adapter's request reached the backend, before its answer is read (the
  ``http`` adapter once the answer's head arrived; the ``mcp`` adapter once ``call_tool``
  returned; a ``python`` one, built on ``adapters.python.FunctionAdapter`` or the demo backend,
  once its operation returned);
* ``after_result``: the adapter's result came back, before the ledger record;
* ``after_record``: the ledger record is written, before the store settles the key;
* ``after_settle``: the key is settled, before the answer goes back.
"""

from __future__ import annotations

import os
import sys

__all__ = ["CRASH_ENV", "CRASH_EXIT_CODE", "CRASH_POINTS", "crash_point"]

CRASH_ENV = "BROKER_TEST_CRASH_AT"
CRASH_EXIT_CODE = 86
"""The exit status of a process killed by a crash point (tests tell it from a real fault)."""

CRASH_POINTS = frozenset(
    {
        "after_claim",
        "after_admission",
        "after_send",
        "after_result",
        "after_record",
        "after_settle",
    }
)


def _armed_at(point: str) -> None:
    """Die at ``point`` when it is the armed one (bound below only when a test asks)."""
    if point == _ARMED:
        # The one line a test reads in the log, then death without cleanup.
        sys.stderr.write(f"crash point {point}: killing pid {os.getpid()}\n")
        sys.stderr.flush()
        os._exit(CRASH_EXIT_CODE)


def _disarmed(point: str) -> None:
    return None


_ARMED = os.environ.get(CRASH_ENV, "")
if _ARMED and _ARMED not in CRASH_POINTS:
    # A misspelled point would silently test nothing: refuse it where the test sees it.
    raise SystemExit(
        f"{CRASH_ENV}={_ARMED!r} names no crash point ({', '.join(sorted(CRASH_POINTS))})"
    )

crash_point = _armed_at if _ARMED else _disarmed
"""Call with a point's name where the process may die under a test; a no-op otherwise."""
