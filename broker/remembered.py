"""``Remembered``: a dict that computes what it lacks, bounded by starting afresh when full."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar

__all__ = ["Remembered"]

_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")


class Remembered(dict[_K, _V]):
    """``remembered[key]`` is ``make(key)``, computed on the first look-up and kept.

    For values derived on the hot path from a few distinct keys (tenants, tool settings, float
    literals): a hit is a dict look-up in C, only a miss runs Python. At ``limit`` entries the
    dict starts afresh: when the keys in use are few, a rare clear costs less than tracking age.
    """

    __slots__ = ("_limit", "_make")

    def __init__(self, make: Callable[[_K], _V], limit: int) -> None:
        super().__init__()
        self._make = make
        self._limit = limit

    def __missing__(self, key: _K) -> _V:
        value = self._make(key)
        if len(self) >= self._limit:
            self.clear()
        self[key] = value
        return value
