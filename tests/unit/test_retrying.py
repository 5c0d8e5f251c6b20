"""The one transient-vs-definite classification, and ``Retry-After`` as backends send it."""

from __future__ import annotations

from email.utils import formatdate

import pytest

from broker.execution.retrying import answer_retry_after, is_transient
from broker.plugins import ProviderError, parse_retry_after

NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    ("fault", "transient"),
    [
        (TimeoutError(), True),
        (ProviderError("503", retryable=True, unavailable=True), True),
        (ProviderError("500", retryable=True), True),
        (ProviderError("429", retryable=True, unavailable=True, retry_after_s=3), True),
        (ProviderError("409"), False),
        (ValueError("a bug"), False),
    ],
)
def test_is_transient(fault: BaseException, transient: bool) -> None:
    assert is_transient(fault) is transient


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("7", 7.0),
        (" 7 ", 7.0),
        (formatdate(NOW + 90, usegmt=True), 90.0),
        (formatdate(NOW - 90, usegmt=True), 0.0),  # in the past: now
        ("999999999", 86_400.0),  # believed up to a day
        ("-5", None),
        ("soon", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_retry_after(header: str | None, seconds: float | None) -> None:
    assert parse_retry_after(header, now=NOW) == seconds


def test_the_answer_says_whole_seconds_at_least_one() -> None:
    assert answer_retry_after(ProviderError("x", retryable=True, retry_after_s=0.2)) == 1.0
    assert answer_retry_after(ProviderError("x", retryable=True, retry_after_s=7.5)) == 8.0
    assert answer_retry_after(TimeoutError()) == 1.0
