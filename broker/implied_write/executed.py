"""The values executed calls recorded, by kind, and how a claim's quantities compare with them.

A cited quantity is compared only with fields of its kind: an amount with ``amount``,
``total``, ``price``... (and a currency with ``currency``), a percentage with ``percent`` or
``discount``, a count with the field its noun names ("6 nodes" with ``nodes``, "a table for 4"
with ``party_size``), a date, weekday or time with the ISO timestamps of the call.  A call that
recorded no field of that kind cannot contradict the claim; one that did, and whose values all
differ, does, unless another call of the trace recorded that very value (a claim may cite the
order total beside the refund: "25 USD of the 120 USD you paid").
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping, Sequence, Set
from typing import Any

from broker.implied_write.inflection import singular
from broker.implied_write.model import Mismatch, Quantity
from broker.implied_write.quantities import WEEKDAYS

__all__ = ("ExecutedValues",)

_KEY_PARTS = re.compile(r"[a-z]+|[A-Z][a-z]*")
_ISO = re.compile(r"^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2}))?")
_MONEY_KEYS = frozenset(
    {"amount", "total", "price", "cost", "fee", "balance", "sum", "charge", "refund", "credit",
     "subtotal", "payout", "paid", "value"}
)  # fmt: skip
_MINOR_UNITS = frozenset({"cents", "cent", "minor", "pence"})
_PERCENT_KEYS = frozenset({"percent", "percentage", "pct", "discount", "off"})
_GENERIC_COUNT_KEYS = frozenset({"quantity", "qty", "count", "number"})
# Nouns that count the same thing: "a table for 4" is a party of 4; "3 licences" are seats.
_COUNT_GROUPS = (
    frozenset({"people", "person", "guest", "party", "diner", "pax", "table", "cover"}),
    frozenset({"seat", "user", "licence", "license", "member"}),
    frozenset({"node", "replica", "instance", "server", "machine"}),
    frozenset({"day", "night"}),
    frozenset({"item", "unit", "piece", "quantity", "qty", "copy"}),
)
_Date = tuple[str, str, int, int, int, int, int]
"""(field, raw value, year, month, day, hour or -1, minute)"""


def _parts(key: str) -> frozenset[str]:
    return frozenset(singular(p.lower()) for p in _KEY_PARTS.findall(key))


def _widen(words: Iterable[str]) -> set[str]:
    wide = set(words)
    for group in _COUNT_GROUPS:
        if not group.isdisjoint(wide):
            wide |= group
    return wide


def _leaves(value: Any, key: str = "") -> Iterable[tuple[str, Any]]:
    if isinstance(value, Mapping):
        for name, item in value.items():
            yield from _leaves(item, str(name))
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _leaves(item, key)
    else:
        yield key, value


class ExecutedValues:
    """The amounts, currencies, percentages, counts and timestamps of some executions."""

    __slots__ = ("counts", "currencies", "dates", "money", "numbers", "percents")

    def __init__(self, documents: Iterable[Mapping[str, Any] | None]) -> None:
        self.money: list[tuple[str, float]] = []
        self.currencies: list[tuple[str, str]] = []
        self.percents: list[tuple[str, float]] = []
        self.counts: list[tuple[str, frozenset[str], float]] = []
        self.dates: list[_Date] = []
        self.numbers: set[float] = set()
        for document in documents:
            if document is not None:
                for key, value in _leaves(document):
                    self._add(key, value)

    def _add(self, key: str, value: Any) -> None:
        parts = _parts(key)
        if isinstance(value, bool) or value is None:
            return
        if isinstance(value, int | float):
            number = float(value)
            if not parts.isdisjoint(_MINOR_UNITS):
                number /= 100
            self.numbers.add(round(number, 2))
            if not parts.isdisjoint(_PERCENT_KEYS):
                self.percents.append((key, number))
            elif not parts.isdisjoint(_MONEY_KEYS) or not parts.isdisjoint(_MINOR_UNITS):
                self.money.append((key, number))
            elif number == int(number):
                self.counts.append((key, parts, number))
        elif isinstance(value, str):
            if "currency" in parts and len(value) == 3:
                self.currencies.append((key, value.upper()))
            match = _ISO.match(value)
            if match is not None:
                hour = int(match[4]) if match[4] else -1
                minute = int(match[5]) if match[5] else 0
                self.dates.append((key, value, int(match[1]), int(match[2]), int(match[3]),
                                   hour, minute))  # fmt: skip

    def count_fields(
        self, quantity: Quantity, words: Set[str]
    ) -> list[tuple[str, frozenset[str], float]]:
        """The count fields a count names: its noun's, or for a bare number ("to 8") those
        the claim's words name; a plural noun no field names falls back to ``quantity``."""
        hints = _widen({quantity.unit} if quantity.unit else words)
        named = [c for c in self.counts if not hints.isdisjoint(_widen(c[1]))]
        if named or not quantity.plural:
            return named
        return [c for c in self.counts if not c[1].isdisjoint(_GENERIC_COUNT_KEYS)]

    def has_kind(self, quantity: Quantity, words: Set[str]) -> bool:
        """Whether these executions recorded a field the quantity could be compared with."""
        kind = quantity.kind
        if kind == "money":
            return bool(self.money)
        if kind == "percent":
            return bool(self.percents)
        if kind == "count":
            return bool(self.count_fields(quantity, words))
        if kind == "time":
            return any(d[5] >= 0 for d in self.dates)
        return bool(self.dates)

    def disagreement(self, quantity: Quantity, words: Set[str]) -> Mismatch | None:
        """How the quantity disagrees with these executions; None if it agrees or cannot be
        compared (no field of its kind)."""
        kind = quantity.kind
        if kind == "money":
            return self._money(quantity)
        if kind == "percent":
            return _differs(quantity.value, self.percents, quantity.value)
        if kind == "count":
            fields = [(k, v) for k, _, v in self.count_fields(quantity, words)]
            return _differs(quantity.value, fields, int(quantity.value))
        return self._timestamp(quantity)

    def agrees(self, quantity: Quantity, words: Set[str]) -> bool:
        """Whether some field of the quantity's kind records exactly its value."""
        return self.has_kind(quantity, words) and self.disagreement(quantity, words) is None

    def _money(self, quantity: Quantity) -> Mismatch | None:
        differs = _differs(quantity.value, self.money, quantity.value)
        if differs is not None:
            return differs
        currencies = {c for _, c in self.currencies}
        if quantity.unit and currencies and quantity.unit not in currencies:
            key, recorded = self.currencies[0]
            return Mismatch(field=key, claimed=quantity.unit, executed=recorded)
        return None

    def _timestamp(self, quantity: Quantity) -> Mismatch | None:
        kind = quantity.kind
        dates = [d for d in self.dates if kind != "time" or d[5] >= 0]
        if not dates:
            return None
        for _, _, year, month, day, hour, minute in dates:
            if kind == "date":
                same = (month, day) == (quantity.month, quantity.day)
                agrees = same and (not quantity.year or quantity.year == year)
            elif kind == "weekday":
                agrees = _weekday(year, month, day) == int(quantity.value)
            else:
                agrees = (hour, minute) == (quantity.hour, quantity.minute)
            if agrees:
                return None
        key, raw = dates[0][0], dates[0][1]
        return Mismatch(field=key, claimed=_claimed_text(quantity), executed=raw)

    def contains(self, quantity: Quantity) -> bool:
        """Whether any field of any kind records the quantity's value (for amounts and
        counts) or its date, weekday or time."""
        if quantity.kind in ("money", "percent", "count"):
            return round(quantity.value, 2) in self.numbers
        return self._timestamp(quantity) is None and bool(self.dates)


def _differs(claimed: float, fields: Sequence[tuple[str, float]], shown: float) -> Mismatch | None:
    if not fields or any(abs(value - claimed) < 0.005 for _, value in fields):
        return None
    key, recorded = fields[0]
    executed: float = int(recorded) if recorded == int(recorded) else recorded
    return Mismatch(field=key, claimed=int(shown) if shown == int(shown) else shown,
                    executed=executed)  # fmt: skip


def _weekday(year: int, month: int, day: int) -> int:
    try:
        return dt.date(year, month, day).weekday()
    except ValueError:
        return -1


def _claimed_text(quantity: Quantity) -> str:
    """The cited value in ISO form: "2025-10-22", "--10-22" (no year), "15:00", "Wednesday"."""
    if quantity.kind == "date":
        year = f"{quantity.year:04d}" if quantity.year else "-"
        return f"{year}-{quantity.month:02d}-{quantity.day:02d}"
    if quantity.kind == "time":
        return f"{quantity.hour:02d}:{quantity.minute:02d}"
    return WEEKDAYS[int(quantity.value)].capitalize()
