"""Chooses which tool a claim is about, from its verb and the tool nouns around it."""

from __future__ import annotations

from collections.abc import Sequence, Set

from broker.implied_write.inflection import lemmatize, noun_forms
from broker.implied_write.lexicon import (
    CONTAINER_NOUNS,
    GENERIC_IMPLIES,
    NOMINALISATIONS,
    READ_VERBS,
)
from broker.implied_write.model import ToolVocabulary

__all__ = ("Attributor",)

_Key = tuple[int, int, int, int, int, int, int]
_EMPTY: frozenset[int] = frozenset()


def _lemma(word: str) -> str:
    """Vocabulary entries may be inflected or multi-word: "roll back" -> "rollback"."""
    return lemmatize("".join(word.lower().split()))


class Attributor:
    """Tool lookup tables for one set of vocabularies, built once."""

    __slots__ = (
        "_names",
        "_noun_tools",
        "_nouns",
        "_verb_tools",
        "_verbs",
        "noun_forms",
        "read_only",
    )

    def __init__(self, vocabularies: Sequence[ToolVocabulary]) -> None:
        self._names = tuple(v.name for v in vocabularies)
        self._verbs = tuple(frozenset(_lemma(w) for w in v.verbs) for v in vocabularies)
        self._nouns = tuple(frozenset(_lemma(w) for w in v.nouns) for v in vocabularies)
        verb_tools: dict[str, set[int]] = {}
        noun_tools: dict[str, set[int]] = {}
        for index, verbs in enumerate(self._verbs):
            for verb in verbs - READ_VERBS:
                verb_tools.setdefault(verb, set()).add(index)
        for index, nouns in enumerate(self._nouns):
            for noun in nouns:
                noun_tools.setdefault(noun, set()).add(index)
        writers = {t for tools in verb_tools.values() for t in tools}
        self.read_only: frozenset[str] = frozenset(
            name for index, name in enumerate(self._names) if index not in writers
        )
        """Tools whose vocabulary names no write ("lookup_order"): they never back a claim."""
        self._verb_tools = {k: frozenset(v) for k, v in verb_tools.items()}
        # Read-only tools ("lookup_order") never back a claim, so their nouns pick nothing.
        self._noun_tools = {k: frozenset(v & writers) for k, v in noun_tools.items()}
        forms: dict[str, str] = {}
        for noun in (*noun_tools, *NOMINALISATIONS):
            for form in noun_forms(noun):
                forms.setdefault(form, noun)
        self.noun_forms: dict[str, str] = forms
        """Inflected noun -> lemma, for every tool noun and every nominalisation."""

    @property
    def tool_verbs(self) -> Set[str]:
        """Every verb lemma that names a writing tool."""
        return self._verb_tools.keys()

    def name(self, index: int | None) -> str | None:
        """The tool name for an index returned by ``choose``."""
        return None if index is None else self._names[index]

    def choose(
        self,
        verb: str,
        write: bool,
        generic: bool,
        near: Set[str],
        clause: Set[str],
        sentence: Set[str],
        context: Set[str],
        pronoun: bool = False,
    ) -> tuple[int | None, str] | None:
        """Pick ``(tool index or None, claim verb)``; ``None`` when this is no claim at all.

        ``write`` says the verb names an action ("issued"), ``generic`` that it may only say
        an action finished ("processed", "is complete"); a purely generic verb needs a noun
        to say what was done.  ``near`` holds the nouns next to the verb (its subject or
        object); ``clause``, ``sentence`` and ``context`` the nouns further away.  ``pronoun``
        says the verb's object or subject is a pronoun, so the clause's nouns stand in for it.
        """
        nouns = near or clause
        nominal = {NOMINALISATIONS[n] for n in nouns if n in NOMINALISATIONS}
        if verb in GENERIC_IMPLIES and not nouns <= CONTAINER_NOUNS:
            nominal.add(GENERIC_IMPLIES[verb])
        candidates = set(self._verb_tools.get(verb, _EMPTY))
        if generic:
            for noun in nouns:
                candidates |= self._noun_tools.get(noun, _EMPTY)
            for lemma in nominal:
                candidates |= self._verb_tools.get(lemma, _EMPTY)
        if not write:
            if not nouns or (not nominal and nouns <= CONTAINER_NOUNS):
                return None
            verb = min(nominal) if nominal else verb
        if not candidates:
            return None, verb
        scored = sorted(
            ((self._score(t, verb, generic, nominal, near, clause, sentence, context), t)
             for t in candidates),
            reverse=True,
        )  # fmt: skip
        best_key, best = scored[0]
        if (
            not generic
            and not best_key[1]
            and not best_key[3]
            and self._mismatch(near or (clause if pronoun else frozenset()))
            and not any(verb in self._nouns[t] for t in candidates)
        ):
            return None, verb  # "cancelled the meeting" with only cancel_subscription
        if len(scored) > 1 and scored[1][0] == best_key:
            return None, verb
        return best, verb

    def _score(
        self,
        tool: int,
        verb: str,
        generic: bool,
        nominal: Set[str],
        near: Set[str],
        clause: Set[str],
        sentence: Set[str],
        context: Set[str],
    ) -> _Key:
        verbs, nouns = self._verbs[tool], self._nouns[tool]
        verb_match = verb in verbs or bool(nominal & verbs)
        # A nominalised action names the tool as well as its noun: "the transfer went through".
        named_near = {NOMINALISATIONS.get(n, "") for n in near} & verbs
        specific = nouns - CONTAINER_NOUNS
        near_hits = 2 * len(specific & near) + len(nouns & near & CONTAINER_NOUNS)
        near_hits += 2 * len(named_near)
        clause_hits = 2 * len(specific & clause) + len(nouns & clause & CONTAINER_NOUNS)
        strong = (verb_match or generic) and bool(near_hits or clause_hits)
        return (
            int(strong),
            near_hits,
            int(verb_match),
            clause_hits,
            int(verb in nouns),  # "emailed" names send_email's own noun
            int(bool(nouns & sentence)),
            int(bool(nouns & context)),
        )

    def _mismatch(self, near: Set[str]) -> bool:
        """The verb's object is another tool's (specific) noun: "cancelled the meeting"."""
        return any(noun in self._noun_tools and noun not in CONTAINER_NOUNS for noun in near)

    def names_verb(self, tool: str, verb: str) -> bool:
        """Whether ``tool``'s vocabulary holds ``verb``; True for a tool it does not know."""
        if tool not in self._names:
            return True
        return verb in self._verbs[self._names.index(tool)]

    def nouns_of(self, index: int | None) -> frozenset[str]:
        """The noun lemmas of the tool at ``index`` (empty for ``None``)."""
        return frozenset() if index is None else self._nouns[index]
