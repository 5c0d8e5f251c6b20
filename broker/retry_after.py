"""``Retry-After`` as backends send it (RFC 9110 section 10.2.3), read into seconds."""

from __future__ import annotations

import time
from datetime import UTC
from email.utils import parsedate_to_datetime

__all__ = ["parse_retry_after"]

_MAX_RETRY_AFTER_S = 86_400.0
"""A backend's ``Retry-After`` is believed up to a day; a larger one is a day."""


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """RFC 9110 ``Retry-After``: delay-seconds or an HTTP-date; ``None`` when absent or invalid."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return min(float(text), _MAX_RETRY_AFTER_S)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # "-0000": no zone given; an HTTP-date is GMT
        when = when.replace(tzinfo=UTC)
    current = time.time() if now is None else now
    return min(max(when.timestamp() - current, 0.0), _MAX_RETRY_AFTER_S)
