"""Finds the quantities a claim cites: money, percentages, counts, dates, weekdays and times.

Formatting is normalised ("$25", "25 USD", "USD 25.00", "twenty-five dollars", "\u20ac25.00"
are all 25 of a currency; "3pm" and "15:00" are one time) so that the judge can be strict on
the value alone.  Identifiers are blanked first, so "O-55291" or "CR-1001" never read as
numbers.
"""

from __future__ import annotations

import re
from collections.abc import Set

from broker.implied_write.identifiers import mask_identifiers
from broker.implied_write.inflection import singular
from broker.implied_write.model import Quantity

__all__ = ("MONTHS", "WEEKDAYS", "extract_quantities", "parse_number_words", "quantities_in")

_CODES = "USD|EUR|GBP|CAD|AUD|CHF|JPY|NZD|SEK|NOK|DKK|INR"
_CURRENCY_WORDS = {
    "$": "USD", "\u20ac": "EUR", "\u00a3": "GBP", "\u00a5": "JPY", "dollar": "USD",
    "dollars": "USD", "bucks": "USD", "euro": "EUR", "euros": "EUR", "pound": "GBP",
    "pounds": "GBP",
}  # fmt: skip
_NUMBER = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
# Every number, once: what stands before and after it says what it is.
_NUM = re.compile(r"(?<![\w.,#:/-])(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(?::([0-5]\d))?(?!\d|,\d)")
_AFTER = re.compile(
    r"\s?(?:(?P<pct>%|(?i:per\s?cent)\b)|(?P<ampm>(?i:am|pm|a\.m\.|p\.m\.))(?!\w)"
    rf"|(?P<cur>(?:{_CODES})\b|[$\u20ac\u00a3\u00a5]|(?i:dollars?|euros?|pounds|bucks)\b))"
)
_BEFORE = re.compile(rf"(?:(?P<sym>[$\u20ac\u00a3\u00a5])|\b(?P<code>{_CODES}))\s?$")
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::\d{2})?)?")
MONTHS = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7,
    "august": 8, "september": 9, "october": 10, "november": 11, "december": 12,
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9,
    "sept": 9, "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
_MONTH = (
    r"(?P<{0}>(?i:january|february|march|april|may|june|july|august|september|october|"
    r"november|december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec))\.?"
)
_DAY = r"(?P<{0}>[0-3]?\d)(?:st|nd|rd|th)?"
_DATE = re.compile(
    rf"\b(?:{_MONTH.format('m1')}\s+{_DAY.format('d1')}|{_DAY.format('d2')}\s+(?:of\s+)?"
    rf"{_MONTH.format('m2')})(?:,?\s+(?P<year>(?:19|20)\d\d))?\b"
)
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WEEKDAY = re.compile(r"\b(?i:(monday|tuesday|wednesday|thursday|friday|saturday|sunday))\b")
_UNITS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14,
    "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19,
    "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
    "eighty": 80, "ninety": 90, "a": 1, "an": 1,
}  # fmt: skip
_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000}
_WORD_NUMBER = re.compile(
    r"\b(?i:(?:(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|"
    r"fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|"
    r"seventy|eighty|ninety|hundred|thousand|million)(?:[\s-]+(?:and[\s-]+)?|\b))+)"
)
_NUMBER_WORDS = (
    "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|"
    "fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|"
    "eighty|ninety|hundred|thousand|million"
)
_SCAN = re.compile(r"[a-z]+")
_NUMBER_TOKENS = frozenset(_NUMBER_WORDS.split("|"))
_DIGIT = re.compile(r"\d")
_NEXT_WORD = re.compile(r"\s+(?:(?:new|more|extra|additional|of)\s+)?([A-Za-z]+)")
# Words that carry no unit after a number ("3 of", "4 on Saturday").
_NOT_UNITS = frozenset(
    {"on", "at", "in", "for", "to", "and", "or", "by", "from", "with", "is", "are", "was",
     "the", "a", "an", "this", "that", "your", "until", "since", "per", "under", "total",
     "has", "have", "had", "were", "will", "be", "been", "it", "if", "as", "so"}
)  # fmt: skip


def parse_number_words(text: str) -> int | None:
    """``"one hundred and twenty"`` -> 120, ``"twenty-five"`` -> 25; None if not a number."""
    total = current = 0
    seen = False
    for word in re.split(r"[\s-]+", text.lower()):
        if not word or word == "and":
            continue
        if word in _UNITS:
            current += _UNITS[word]
            seen = True
        elif word in _SCALES:
            current = max(current, 1) * _SCALES[word]
            if _SCALES[word] > 100:
                total, current = total + current, 0
            seen = True
        else:
            return None
    return total + current if seen else None


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _blank(text: str, start: int, end: int) -> str:
    return text[:start] + " " * (end - start) + text[end:]


def _spelled_out(text: str) -> list[tuple[int, int, int]]:
    """Spelled-out numbers with their spans ("twenty-five", "one hundred and twenty")."""
    found = []
    for match in _WORD_NUMBER.finditer(text):
        phrase = match.group(0).rstrip(" -")
        if phrase.lower().endswith(" and"):
            phrase = phrase[:-4].rstrip(" -")  # "five and I": the "and" is not the number's
        value = parse_number_words(phrase)
        if value is not None:
            found.append((match.start(), match.start() + len(phrase), value))
    return found


def extract_quantities(text: str) -> tuple[Quantity, ...]:
    """Every quantity ``text`` cites, in order of appearance."""
    return quantities_in(mask_identifiers(text), text)


def quantities_in(masked: str, text: str, words: Set[str] | None = None) -> tuple[Quantity, ...]:
    """The quantities of ``text`` whose identifiers ``masked`` has already blanked.

    ``words`` are the lower-cased words of the text or of the sentence around it, if the
    caller has them; they say which kinds may be present, so only those patterns run.
    """
    tokens = set(_SCAN.findall(masked.lower())) if words is None else words
    digits = _DIGIT.search(masked) is not None
    spelled = not tokens.isdisjoint(_NUMBER_TOKENS)
    if not digits and not spelled:
        return ()
    found: list[tuple[int, Quantity]] = []
    if spelled:
        masked = _spelled_money(text, masked, found)
    if digits and "-" in masked:
        masked = _iso_dates(masked, found)
    if digits and not tokens.isdisjoint(MONTHS):
        masked = _dates(masked, found)
    if not tokens.isdisjoint(WEEKDAYS):
        for match in _WEEKDAY.finditer(masked):
            weekday = float(WEEKDAYS.index(match[1].lower()))
            found.append((match.start(), Quantity("weekday", match.group(0), value=weekday)))
    if digits:
        _numbers(masked, found)
    if spelled:
        found.extend(_counts(masked))
    found.sort(key=lambda item: item[0])
    return tuple(q for _, q in found)


_Found = list[tuple[int, Quantity]]


def _spelled_money(text: str, masked: str, found: _Found) -> str:
    for start, end, value in _spelled_out(masked):
        after = re.match(r"[\s-]*(dollars?|euros?|pounds|bucks)\b", masked[end:], re.IGNORECASE)
        if after is not None:
            currency = _CURRENCY_WORDS[after.group(1).lower()]
            stop = end + after.end()
            found.append((start, Quantity("money", text[start:stop], float(value), currency)))
            masked = _blank(masked, start, stop)
    return masked


def _iso_dates(masked: str, found: _Found) -> str:
    for match in _ISO_DATE.finditer(masked):
        year, month, day = int(match[1]), int(match[2]), int(match[3])
        found.append((match.start(), Quantity("date", match.group(0), year=year, month=month,
                                              day=day)))  # fmt: skip
        if match[4]:
            found.append((match.start(4), Quantity("time", match.group(0), hour=int(match[4]),
                                                   minute=int(match[5]))))  # fmt: skip
        masked = _blank(masked, *match.span())
    return masked


def _dates(masked: str, found: _Found) -> str:
    for match in _DATE.finditer(masked):
        month = MONTHS[(match["m1"] or match["m2"]).lower()]
        day = int(match["d1"] or match["d2"])
        if not 1 <= day <= 31:
            continue
        year = int(match["year"]) if match["year"] else 0
        found.append((match.start(), Quantity("date", match.group(0), year=year, month=month,
                                              day=day)))  # fmt: skip
        masked = _blank(masked, *match.span())
    return masked


def _numbers(masked: str, found: _Found) -> None:
    """Amounts, percentages, times and counts written in digits, in one pass."""
    for match in _NUM.finditer(masked):
        start, end = match.span()
        whole, decimals, minutes = match.groups()
        after = _AFTER.match(masked, end)
        kind = after.lastgroup if after is not None else None
        if kind is None and end < len(masked) and (masked[end].isalpha() or masked[end] == "-"):
            continue  # "3rd", "45-minute", "2x": not a quantity the judge can compare
        before = _BEFORE.search(masked, max(0, start - 5), start)
        number = _number(whole + ("." + decimals if decimals else ""))
        stop = after.end() if after is not None else end
        ampm = after["ampm"] if after is not None else None
        if ampm is not None or minutes is not None:
            hour = int(whole)
            if ampm is not None:
                if not 1 <= hour <= 12:
                    continue
                hour = hour % 12 + (12 if ampm[0] in "pP" else 0)
            elif hour > 23:
                continue
            found.append((start, Quantity("time", masked[start:stop], hour=hour,
                                          minute=int(minutes or 0))))  # fmt: skip
        elif before is not None or kind == "cur":
            if before is not None:
                unit, first = before["sym"] or before["code"], before.start()
            else:
                unit, first = after["cur"] if after is not None else "", start
            currency = _CURRENCY_WORDS.get(unit.lower(), unit.upper())
            found.append((first, Quantity("money", masked[first:stop], number, currency)))
        elif kind == "pct":
            found.append((start, Quantity("percent", masked[start:stop], number)))
        elif decimals is None:
            count = _count(masked, start, end, int(number))
            if count is not None:
                found.append((start, count))


def _counts(masked: str) -> _Found:
    """Spelled-out counts left over once spelled-out amounts are taken: "two new users"."""
    found = []
    for start, end, value in _spelled_out(masked):
        count = _count(masked, start, end, value)
        if count is not None:
            found.append((start, count))
    return found


def _count(masked: str, start: int, end: int, value: int) -> Quantity | None:
    """A count with the noun after it as its unit: "3 printers", "two users".  A number
    right after "for" or "to" counts what the sentence talks about ("a table for 4",
    "seats to 8"), so its unit is left empty."""
    if 1900 <= value <= 2100 and end - start == 4:
        return None  # a year
    if masked[max(0, start - 5) : start].rstrip().lower().endswith("from"):
        return None  # "from 3 to 6 nodes": the state before, not what was done
    following = _NEXT_WORD.match(masked, end)
    word = following.group(1).lower() if following else ""
    unit = "" if not word or word in _NOT_UNITS else singular(word)
    plural = bool(unit) and word != unit
    return Quantity("count", masked[start:end], float(value), unit, plural=plural)
