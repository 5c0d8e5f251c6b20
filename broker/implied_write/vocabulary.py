"""Derives a tool's default claim vocabulary from its name and description."""

from __future__ import annotations

import re
from collections.abc import Mapping

from broker.implied_write.inflection import lemmatize, singular
from broker.implied_write.lexicon import NOUN_SYNONYMS, STOP_NOUNS, VERB_SYNONYMS, VERBAL_NOUNS
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


def _synonyms(word: str, table: Mapping[str, frozenset[str]]) -> set[str]:
    """The word and its synonyms; a word that is only listed as a synonym ("schedule")
    gains the entries it is listed under ("book"), but not their other synonyms."""
    if word in table:
        return {word} | set(table[word])
    return {word} | {key for key, values in table.items() if word in values}


def default_vocabulary(name: str, description: str = "") -> ToolVocabulary:
    """Build the claim vocabulary of a tool from its name, e.g. ``issue_credit``.

    The first word of the name is the verb and the remaining words are nouns; both are
    widened with a small synonym table (credit/refund, ticket/case/issue, issue/grant/process,
    create/open/file/raise, book/schedule, cancel/terminate).  Nouns that are also verbs of
    the same action ("credit", "refund", "email") join the verbs.  Words of ``description``
    that the synonym tables know add nouns, and a leading known verb adds verbs.
    """
    words = split_tool_name(name)
    if not words:
        return ToolVocabulary(name=name, verbs=frozenset(), nouns=frozenset())
    verb, rest = lemmatize(words[0]), [singular(w) for w in words[1:]]
    verbs = _synonyms(verb, VERB_SYNONYMS)
    nouns: set[str] = set()
    for noun in rest:
        if noun in STOP_NOUNS:
            continue
        nouns |= _synonyms(noun, NOUN_SYNONYMS)
    described = _WORD.findall(description.lower())
    if described and lemmatize(described[0]) in VERB_SYNONYMS:
        verbs |= _synonyms(lemmatize(described[0]), VERB_SYNONYMS)
    nouns.update(
        noun
        for noun in map(singular, described[1:])
        if noun in NOUN_SYNONYMS and noun not in STOP_NOUNS
    )
    verbs.update(n for n in nouns if verbs & VERBAL_NOUNS.get(n, frozenset()))
    return ToolVocabulary(name=name, verbs=frozenset(verbs), nouns=frozenset(nouns))
