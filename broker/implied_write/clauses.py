"""Classifies whole clauses: lead-ins, status reports, observations and pending approvals."""

from __future__ import annotations

from collections.abc import Mapping

from broker.implied_write import grammar as g
from broker.implied_write.lexicon import IRREGULAR_PAST
from broker.implied_write.text import TEMPORAL

__all__ = (
    "awaits_approval",
    "is_lead_in",
    "looks_verbal",
    "near_nouns",
    "observes",
    "reports_status",
)

_IRREGULAR_PASTS = frozenset(p for pasts in IRREGULAR_PAST.values() for p in pasts)
_COORDINATORS = frozenset({"and", "or", "but", "then", "while"})
_OBSERVING = frozenset(
    {"checked", "looked", "verified", "reviewed", "searched", "inspected", "pulled", "logged"}
)


def looks_verbal(word: str) -> bool:
    """Whether a word has the shape of a past form ("reviewed", "sent"), whatever the verb."""
    return word.endswith("ed") or word in _IRREGULAR_PASTS


def observes(words: list[str], start: int, end: int, opener: str) -> bool:
    """Whether a clause like "when I checked" makes the sentence say what was found."""
    return opener in TEMPORAL and not _OBSERVING.isdisjoint(words[start:end])


def reports_status(words: list[str], first: int, last: int) -> bool:
    """Whether the clause reports a status ("Your order status is: delivered"), not an action."""
    if "status" not in words[first:last]:
        return False
    for index in range(first, last):
        if words[index] == "status" and index + 1 == last:
            return True
        if words[index] == "status" and words[index + 1] in ("is", "was", ":", "shows", "reads"):
            return True
    return False


def is_lead_in(words: list[str], start: int, end: int) -> bool:
    """A clause like "according to our records" or "as you said" that makes the next clause
    somebody else's report."""
    if words[start] != "as" and "according" not in words[start:end]:
        return False
    for index in range(start, end):
        word = words[index]
        if word == "according":
            return True
        if word in g.REPORT_VERBS and index > start and words[index - 1] not in ("i", "we"):
            return words[start] == "as"
    return False


def awaits_approval(words: list[str], start: int, end: int) -> bool:
    """Whether the clause waits for approval ("submitted for approval", "pending review")."""
    if g.APPROVAL_NOUNS.isdisjoint(words[start:end]):
        return False
    for index in range(start, end - 1):
        if words[index] in g.APPROVAL_OPENERS and (
            words[index + 1] in g.APPROVAL_NOUNS
            or (index + 2 < end and words[index + 2] in g.APPROVAL_NOUNS)
        ):
            return True
    return False


def near_nouns(
    words: list[str],
    index: int,
    start: int,
    end: int,
    object_start: int,
    nouns: Mapping[str, str],
    verbs: Mapping[str, object],
) -> frozenset[str]:
    """Tool nouns in the verb's subject (before ``index``, from ``start``) and object (from
    ``object_start``, up to a preposition or another verb form of ``verbs``)."""
    near: set[str] = set()
    for position in range(index - 1, max(start, index - 8) - 1, -1):
        word = words[position]
        if word in _COORDINATORS or word == ",":
            # Carry on through a list of verbs ("received, reviewed and approved"), which
            # share one subject; stop where a new subject begins.
            if position == 0 or not (
                looks_verbal(words[position + 1]) and looks_verbal(words[position - 1])
            ):
                break
        elif word in nouns:
            near.add(nouns[word])
    for position in range(object_start, min(end, object_start + 5)):
        word = words[position]
        if word in g.OBJECT_STOPS or (word in verbs and word not in nouns):
            break
        if word in nouns:
            near.add(nouns[word])
    return frozenset(near)
