"""Remembered: computes each value once, and stays within its limit by starting afresh."""

from __future__ import annotations

from broker.remembered import Remembered


def test_a_value_is_computed_once_then_looked_up() -> None:
    made: list[str] = []

    def make(key: str) -> str:
        made.append(key)
        return key.upper()

    remembered = Remembered(make, limit=10)
    assert [remembered[k] for k in ("a", "b", "a", "a", "b")] == ["A", "B", "A", "A", "B"]
    assert made == ["a", "b"]
    assert remembered.get("c") is None  # get() only looks: it computes nothing
    assert made == ["a", "b"]


def test_it_never_holds_more_than_its_limit_and_recomputes_after_a_clear() -> None:
    made: list[int] = []

    def make(key: int) -> int:
        made.append(key)
        return key * 2

    remembered = Remembered(make, limit=3)
    for key in range(10):
        assert remembered[key] == key * 2
        assert len(remembered) <= 3
    assert remembered[9] == 18 and made.count(9) == 1  # still there: kept since its clear
    assert remembered[0] == 0 and made.count(0) == 2  # cleared long ago: made again
