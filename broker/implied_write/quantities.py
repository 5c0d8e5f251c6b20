"""Finds the quantities a claim cites: money, percentages, counts, dates, weekdays and times.

Formatting is normalised ("$25", "25 USD", "USD 25.00", "twenty-five dollars", "\u20ac25.00"
are all 25 of a currency; "3pm" and "15:00" are one time) so that the judge can be strict on
the value alone.  Identifiers are blanked first, so "O-55291" or "CR-1001" never read as
numbers.
"""

from __future__ import annotations

import re

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
_MONEY = re.compile(
    rf"(?P<sym>[$\u20ac\u00a3\u00a5])\s?(?P<n1>{_NUMBER})"
    rf"|\b(?P<code1>{_CODES})\s?(?P<n2>{_NUMBER})\b"
    rf"|(?<![\w.,])(?P<n3>{_NUMBER})\s?(?P<unit>(?:{_CODES})\b|[$\u20ac\u00a3]"
    r"|(?i:dollars?|euros?|pounds|bucks)\b)"
)
_PERCENT = re.compile(rf"(?<![\w.,])(?P<n>{_NUMBER})\s?(?:%|(?i:per\s?cent)\b)")
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
_TIME = re.compile(
    r"\b(?P<h>[01]?\d|2[0-3])(?::(?P<m>[0-5]\d))?\s?(?P<ampm>(?i:am|pm|a\.m\.|p\.m\.))(?!\w)"
    r"|\b(?P<h24>[01]?\d|2[0-3]):(?P<m24>[0-5]\d)\b"
)
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
    r"seventy|eighty|ninety|hundred|thousand|million|a|an)(?:[\s-]+(?:and[\s-]+)?|\b))+)"
)
_NUMBER_WORDS = (
    "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|"
    "fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|"
    "eighty|ninety|hundred|thousand|million"
)
_SCAN = re.compile(r"[a-z]+|[\d$\u20ac\u00a3\u00a5%]")
_MONEY_TOKENS = frozenset(
    {"$", "\u20ac", "\u00a3", "\u00a5", *_CODES.lower().split("|"), *_CURRENCY_WORDS}
)
_NUMBER_TOKENS = frozenset(_NUMBER_WORDS.split("|"))
_DIGITS = frozenset("0123456789")
_COUNT = re.compile(r"(?<![\w.,$\u20ac\u00a3#:-])(\d+)(?![\w.,:%-]|\s?(?:%|am|pm)\b)")
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
    """Spelled-out numbers with their spans; a lone article is no number."""
    found = []
    for match in _WORD_NUMBER.finditer(text):
        start, phrase = match.start(), match.group(0).rstrip(" -")
        words = phrase.lower().split()
        # "a hundred" is a number, "a one hundred" is the article before one.
        while len(words) > 1 and words[0] in ("a", "an") and words[1] not in _SCALES:
            skipped = len(phrase) - len(phrase.split(None, 1)[1])
            start, phrase, words = start + skipped, phrase[skipped:], words[1:]
        if words[-1] in ("a", "an", "and"):
            continue
        value = parse_number_words(phrase)
        if value is not None:
            found.append((start, start + len(phrase), value))
    return found


def extract_quantities(text: str) -> tuple[Quantity, ...]:
    """Every quantity ``text`` cites, in order of appearance."""
    return quantities_in(mask_identifiers(text), text)


def quantities_in(masked: str, text: str) -> tuple[Quantity, ...]:
    """The quantities of ``text`` whose identifiers ``masked`` has already blanked."""
    # One scan of the words says which kinds may be present; only their patterns run.
    lowered = masked.lower()
    tokens = set(_SCAN.findall(lowered))
    digits = not tokens.isdisjoint(_DIGITS)
    spelled = not tokens.isdisjoint(_NUMBER_TOKENS)
    if not digits and not spelled:
        return ()
    found: list[tuple[int, Quantity]] = []
    if not tokens.isdisjoint(_MONEY_TOKENS):
        masked = _money(masked, found)
    if spelled:
        masked = _spelled_money(text, masked, found)
    if "%" in tokens or "cent" in tokens or "percent" in tokens:
        masked = _percent(masked, found)
    if (digits and "-" in masked) or not tokens.isdisjoint(MONTHS):
        masked = _dates(masked, found)
    if not tokens.isdisjoint(WEEKDAYS):
        for match in _WEEKDAY.finditer(masked):
            weekday = float(WEEKDAYS.index(match[1].lower()))
            found.append((match.start(), Quantity("weekday", match.group(0), value=weekday)))
    if digits and (":" in masked or "am" in tokens or "pm" in tokens or ".m." in lowered):
        masked = _times(masked, found)
    found.extend(_counts(masked, spelled))
    found.sort(key=lambda item: item[0])
    return tuple(q for _, q in found)


_Found = list[tuple[int, Quantity]]


def _money(masked: str, found: _Found) -> str:
    for match in _MONEY.finditer(masked):
        number = match.group("n1") or match.group("n2") or match.group("n3")
        unit = match.group("sym") or match.group("code1") or match.group("unit") or ""
        currency = _CURRENCY_WORDS.get(unit.lower(), unit.upper())
        found.append((match.start(), Quantity("money", match.group(0), _number(number), currency)))
        masked = _blank(masked, *match.span())
    return masked


def _spelled_money(text: str, masked: str, found: _Found) -> str:
    for start, end, value in _spelled_out(masked):
        after = re.match(r"[\s-]*(dollars?|euros?|pounds|bucks)\b", masked[end:], re.IGNORECASE)
        if after is not None:
            currency = _CURRENCY_WORDS[after.group(1).lower()]
            stop = end + after.end()
            found.append((start, Quantity("money", text[start:stop], float(value), currency)))
            masked = _blank(masked, start, stop)
    return masked


def _percent(masked: str, found: _Found) -> str:
    for match in _PERCENT.finditer(masked):
        found.append((match.start(), Quantity("percent", match.group(0), _number(match["n"]))))
        masked = _blank(masked, *match.span())
    return masked


def _dates(masked: str, found: _Found) -> str:
    for match in _ISO_DATE.finditer(masked):
        year, month, day = int(match[1]), int(match[2]), int(match[3])
        found.append((match.start(), Quantity("date", match.group(0), year=year, month=month,
                                              day=day)))  # fmt: skip
        if match[4]:
            found.append((match.start(4), Quantity("time", match.group(0), hour=int(match[4]),
                                                   minute=int(match[5]))))  # fmt: skip
        masked = _blank(masked, *match.span())
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


def _times(masked: str, found: _Found) -> str:
    for match in _TIME.finditer(masked):
        if match["ampm"]:
            hour = int(match["h"]) % 12 + (12 if match["ampm"].lower().startswith("p") else 0)
            minute = int(match["m"] or 0)
        else:
            hour, minute = int(match["h24"]), int(match["m24"])
        found.append((match.start(), Quantity("time", match.group(0), hour=hour, minute=minute)))
        masked = _blank(masked, *match.span())
    return masked


def _counts(masked: str, words: bool) -> _Found:
    """Integers left over, with the noun after them as their unit: "3 printers", "two users";
    a number right after "for" or "to" counts what the sentence talks about ("a table for 4",
    "seats to 8"), so its unit is left empty."""
    numbers = [(m.start(), m.end(), int(m.group(1))) for m in _COUNT.finditer(masked)]
    if words:
        numbers += _spelled_out(masked)
    found = []
    for start, end, value in numbers:
        if 1900 <= value <= 2100 and end - start == 4:
            continue  # a year
        if masked[max(0, start - 5) : start].rstrip().lower().endswith("from"):
            continue  # "from 3 to 6 nodes": the state before, not what was done
        following = _NEXT_WORD.match(masked, end)
        word = following.group(1).lower() if following else ""
        unit = "" if not word or word in _NOT_UNITS else singular(word)
        plural = bool(unit) and word != unit
        found.append((start, Quantity("count", masked[start:end], float(value), unit,
                                      plural=plural)))  # fmt: skip
    return found
