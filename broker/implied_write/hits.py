"""The claims found in one sentence: their shape, and how they merge into one per tool."""

from __future__ import annotations

__all__ = ("Found", "Hit", "cites", "deduplicate")

# (tool index or None, claim verb, nouns next to the verb, token index of the verb, whether
# only grammar made it a claim: no vocabulary or general write verb)
Found = tuple[int | None, str, frozenset[str], int, bool]
# The same, merged per tool: every verb index that claims it.
Hit = tuple[int | None, str, frozenset[str], tuple[int, ...]]


def deduplicate(found: list[Found]) -> list[Hit]:
    """One claim per tool.  An unattributed verb sharing its object with an attributed
    one ("approved and processed your refund") adds no claim of its own, nor does an
    unattributed claim made by grammar alone beside an attributed one ("the hotfix has
    been deployed and the incident is mitigated"): the sentence is judged by the claim
    the vocabularies name."""
    if len(found) < 2:
        return [(tool, verb, near, (index,)) for tool, verb, near, index, _ in found]
    merged: dict[int | None, Hit] = {}
    attributed = [(n, i) for t, _, n, i, _ in found if t is not None]
    for tool, verb, near, index, grammar_only in found:
        if (
            tool is None
            and attributed
            and (grammar_only or any(near & n or abs(i - index) <= 2 for n, i in attributed))
        ):
            continue
        if tool in merged:
            kept = merged[tool]
            merged[tool] = (tool, kept[1], kept[2], (*kept[3], index))
        else:
            merged[tool] = (tool, verb, near, (index,))
    return list(merged.values())


_MONEY_WORDS = frozenset({"usd", "eur", "gbp", "dollars", "euros", "pounds", "bucks"})


def cites(words: list[str], start: int, end: int) -> bool:
    """Whether the words cite an identifier ("INV-2001", "#12345") or an amount ("25 USD")."""
    for word in words[start:end]:
        if word in _MONEY_WORDS:
            return True
        if any(ch.isdigit() for ch in word) and ("-" in word or "_" in word or len(word) >= 5):
            return True
    return False
