"""Derives a tool's default claim vocabulary from its name and description."""

from __future__ import annotations

import re

from broker.implied_write.lexicon import (
    NOUN_SYNONYMS,
    STOP_NOUNS,
    VERB_SYNONYMS,
    VERBAL_NOUNS,
    lemmatize,
)
from broker.implied_write.model import ToolVocabulary

__all__ = ("default_vocabulary", "split_tool_name")

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEPARATORS = re.compile(r"[^A-Za-z0-9]+")
_WORD = re.compile(r"[A-Za-z]+")
_NAMESPACE = re.compile(r"^.*[.:/]")


def split_tool_name(name: str) -> list[str]:
    """Words of a tool name without its namespace: ``ops.restart_service`` -> restart, service."""
    bare = _NAMESPACE.sub("", name) or name
    return [w.lower() for w in _SEPARATORS.split(_CAMEL.sub("_", bare)) if w]


def _verb_synonyms(verb: str) -> set[str]:
    found = {verb} | set(VERB_SYNONYMS.get(verb, ()))
    # Both directions, so "schedule_call" also accepts "booked".
    found.update(key for key, values in VERB_SYNONYMS.items() if verb in values)
    return found


def _noun_synonyms(noun: str) -> set[str]:
    found = {noun} | set(NOUN_SYNONYMS.get(noun, ()))
    found.update(key for key, values in NOUN_SYNONYMS.items() if noun in values)
    return found


def default_vocabulary(name: str, description: str = "") -> ToolVocabulary:
    """Build the claim vocabulary of a tool from its name, e.g. ``issue_credit``.

    The first word of the name is the verb and the remaining words are nouns; both are
    widened with a small synonym table (credit/refund, ticket/case/issue, issue/grant/process,
    create/open/file/raise, book/schedule, cancel/terminate).  Nouns that are also verbs of
    the same action ("credit", "refund", "email") join the verbs.  Words of ``description``
    that the synonym tables know add nouns, and a leading known verb adds verbs.
    """
    words = [lemmatize(w) for w in split_tool_name(name)]
    if not words:
        return ToolVocabulary(name=name, verbs=frozenset(), nouns=frozenset())
    verb, rest = words[0], words[1:]
    verbs = _verb_synonyms(verb)
    nouns: set[str] = set()
    for noun in rest:
        if noun in STOP_NOUNS:
            continue
        nouns |= _noun_synonyms(noun)
    described = [lemmatize(w) for w in _WORD.findall(description)]
    if described and described[0] in VERB_SYNONYMS:
        verbs |= _verb_synonyms(described[0])
    nouns.update(w for w in described[1:] if w in NOUN_SYNONYMS and w not in STOP_NOUNS)
    verbs.update(n for n in nouns if verbs & VERBAL_NOUNS.get(n, frozenset()))
    return ToolVocabulary(name=name, verbs=frozenset(verbs), nouns=frozenset(nouns))
