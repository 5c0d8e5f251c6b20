"""A backend's own account of a failure, made fit for a log line and a ledger record.

Adapters answer the agent with a fixed message per failure kind; what the backend said (its error
text, or the exception an upstream client raised, groups included) goes into
``ProviderError.detail``: collapsed to one line and bounded, after the caller has redacted the
call's credentials from it.
"""

from __future__ import annotations

__all__ = ["MAX_DETAIL", "exception_detail", "one_line"]

MAX_DETAIL = 300


def one_line(text: str) -> str:
    """``text`` with its whitespace runs (line breaks included) collapsed, at most ``MAX_DETAIL``."""
    return " ".join(text.split())[:MAX_DETAIL]


def exception_detail(exc: BaseException) -> str:
    """``Type: message`` of ``exc``, or of each leaf of an exception group (anyio's task groups
    wrap an upstream's error in one), on one line."""
    leaves: list[BaseException] = []

    def collect(error: BaseException) -> None:
        if isinstance(error, BaseExceptionGroup):
            for inner in error.exceptions:
                collect(inner)
        else:
            leaves.append(error)

    collect(exc)
    return one_line("; ".join(f"{type(e).__name__}: {e}".rstrip(": ") for e in leaves))
