"""Finds sentences that claim a world-changing action happened and attributes them to tools."""

from __future__ import annotations

import re
from collections.abc import Sequence

from broker.implied_write import grammar as g
from broker.implied_write.assertion import Scope, asserted
from broker.implied_write.attribution import Attributor
from broker.implied_write.citation import cited_identifiers, reference_after
from broker.implied_write.clauses import (
    awaits_approval,
    is_lead_in,
    looks_verbal,
    observes,
    reports_status,
)
from broker.implied_write.inflection import verb_forms
from broker.implied_write.lexicon import (
    ADJECTIVAL_PREDICATES,
    GENERAL_WRITE_VERBS,
    GENERIC_VERBS,
    NOMINALISATIONS,
    PHRASAL_VERBS,
    READ_VERBS,
    STOPPING_VERBS,
)
from broker.implied_write.model import Claim, ToolVocabulary
from broker.implied_write.text import (
    CONDITIONAL,
    TEMPORAL,
    mask_quotes,
    normalise,
    split_clauses,
    split_sentences,
    tokenize,
)

__all__ = ("Detector", "find_claims")

_WRITE, _GENERIC = 1, 2
_LEADING_MARKS = frozenset({"-", "\u2014", "\u2013", "\n", "(", ")", ":", ",", ";", "*"})
_COORDINATORS = frozenset({"and", "or", "but", "then", "while"})
_PRONOUN_ARGUMENTS = frozenset({"it", "this", "that", "them", "these", "those"})
_VERSION = re.compile(r"\bv\d+(?:\.\d+){1,3}\b", re.IGNORECASE)
# (tool index or None, claim verb, nouns next to the verb, token index of the verb)
_Found = tuple[int | None, str, frozenset[str], int]
# The same, merged per tool: every verb index that claims it.
_Hit = tuple[int | None, str, frozenset[str], tuple[int, ...]]


class Detector:
    """Claim finder for a fixed set of tool vocabularies; build once, call per message.

    Every table (inflected verb and noun forms, tool indexes) is computed here, so
    ``find_claims`` only walks tokens and does dictionary lookups.
    """

    __slots__ = ("_attributor", "_forms", "_nouns", "_roles", "_triggers")

    def __init__(self, vocabularies: Sequence[ToolVocabulary]) -> None:
        self._attributor = Attributor(vocabularies)
        self._nouns = self._attributor.noun_forms
        roles: dict[str, int] = {}
        for lemma in (*GENERAL_WRITE_VERBS, *self._attributor.tool_verbs):
            roles[lemma] = _WRITE
        for lemma in GENERIC_VERBS:
            roles[lemma] = roles.get(lemma, 0) | _GENERIC
        heads = {head for head, _ in PHRASAL_VERBS} | set(READ_VERBS)
        forms: dict[str, tuple[str, str]] = {}
        for lemma in (*roles, *heads):
            for form, kind in verb_forms(lemma):
                known = forms.get(form)
                if known is None or (known[1] == "base" and kind == "past"):
                    forms[form] = (lemma, kind)
        for form, (lemma, kind) in list(forms.items()):
            if kind == "past" and lemma in roles:
                forms.setdefault("re" + form, (lemma, kind))  # "reissued", "re-sent"
        for word in ADJECTIVAL_PREDICATES:
            forms[word] = (word, "adj")
            roles[word] = _GENERIC
        self._forms = forms
        self._roles = roles
        # Only these forms can start a claim: a past form or participle ("issued"), an
        # adjective ("complete"), or a phrasal head whose phrase is an action ("rolled back").
        phrasal_roles = {head for (head, _), full in PHRASAL_VERBS.items() if full in roles}
        self._triggers = frozenset(
            form
            for form, (lemma, kind) in forms.items()
            if kind in ("past", "adj") and (lemma in roles or lemma in phrasal_roles)
        )

    def find_claims(self, text: str) -> list[Claim]:
        """Every claim in ``text``, in order; at most one per sentence and tool."""
        masked = mask_quotes(normalise(text))
        words, spans = tokenize(masked)
        if not words:
            return []
        if _VERSION.search(masked) is not None:
            # "v2.5.0 is now live": a version number names the release it belongs to.
            words = ["version" if _VERSION.fullmatch(w) else w for w in words]
        nouns = self._nouns
        triggers = self._triggers
        if triggers.isdisjoint(words) and "did" not in words:
            return []
        sentences = split_sentences((words, spans), masked)
        # Nouns anywhere in the message resolve "I cancelled it"; the sentence's own nouns
        # are weighed before them.
        context = {nouns[w] for w in words if w in nouns}
        found: list[list[_Hit]] = []
        for first, last in sentences:
            if triggers.isdisjoint(words[first:last]) and "did" not in words[first:last]:
                found.append([])
                continue
            sentence = {nouns[w] for w in words[first:last] if w in nouns}
            found.append(self._sentence_claims(words, first, last, sentence, context))
        claims: list[Claim] = []
        for position, hits in enumerate(found):
            if not hits:
                continue
            first, last = sentences[position]
            lead, tail = first, last - 1
            while lead < tail and words[lead] in _LEADING_MARKS:
                lead += 1
            while tail > lead and words[tail] == "\n":
                tail -= 1
            start, end = spans[lead][0], spans[tail][1]
            cited = cited_identifiers([hit[3] for hit in hits], words, spans, masked, first, last)
            if position + 1 < len(found) and not found[position + 1] and len(hits) == 1:
                cited[0] += reference_after(words, sentences[position + 1], spans, masked)
            for (tool, verb, _, _), identifiers in zip(hits, cited, strict=True):
                claims.append(
                    Claim(
                        text=text[start:end],
                        start=start,
                        end=end,
                        tool=self._attributor.name(tool),
                        verb=verb,
                        identifiers=tuple(dict.fromkeys(identifiers)),
                    )
                )
        return claims

    def _sentence_claims(
        self, words: list[str], first: int, last: int, sentence: set[str], context: set[str]
    ) -> list[_Hit]:
        clauses = split_clauses(words, first, last)
        if not clauses:
            return []
        tail = last - 1
        while tail > first and words[tail] == "\n":
            tail -= 1
        question = words[tail] == "?"
        conditional = clauses[0][2] in CONDITIONAL or clauses[0][2] in TEMPORAL
        observed = any(observes(words, start, end, opener) for start, end, opener in clauses)
        triggers = self._triggers
        found: list[_Found] = []
        lead_in = status = False
        subject_start = first
        for position, (start, end, opener) in enumerate(clauses):
            skip = lead_in or status or opener in CONDITIONAL
            lead_in = is_lead_in(words, start, end)
            status = status or reports_status(words, start, end)
            # "I haven't booked, cancelled or changed anything": a verb list after a comma
            # shares the subject, and the negation or modal, of the clause before it.
            continues = position > 0 and words[start - 1] == "," and looks_verbal(words[start])
            if continues:
                previous_start = clauses[position - 1][0]
                if any(w in g.NEGATIONS or w in g.MODALS for w in words[previous_start:start]):
                    continue
            else:
                subject_start = start
            if skip:
                continue
            if question and (position == len(clauses) - 1 or words[start] in g.QUESTION_STARTS):
                continue
            if awaits_approval(words, start, end):
                continue
            scope: Scope | None = None
            for index in range(start, end):
                word = words[index]
                if word not in triggers and not (index > start and words[index - 1] == "did"):
                    continue
                if scope is None:
                    scope = Scope(
                        words,
                        start,
                        end,
                        opener,
                        conditional or status,
                        self._nouns,
                        last,
                        observed,
                        subject_start,
                    )
                hit = self._claim_at(scope, index, sentence, context)
                if hit is not None:
                    found.append(hit)
        return self._deduplicate(found)

    def _claim_at(
        self, scope: Scope, index: int, sentence: set[str], context: set[str]
    ) -> _Found | None:
        """The claim made by the word at ``index``, if it asserts a finished action."""
        words, start, end = scope.words, scope.start, scope.end
        word = words[index]
        entry = self._forms.get(word)
        if entry is None:
            return None
        lemma, kind = entry
        if word == "set" and index > start and words[index - 1] == "all":
            lemma, kind = "complete", "adj"
        nxt = words[index + 1] if index + 1 < end else ""
        object_start = index + 1
        phrasal = PHRASAL_VERBS.get((lemma, nxt))
        if phrasal is not None:
            lemma, object_start = phrasal, index + (3 if phrasal == "takecareof" else 2)
        role = self._roles.get(lemma, 0)
        if not role or not asserted(scope, index, kind, lemma):
            return None
        near = self._near_nouns(words, index, scope.subject_start, end, object_start)
        if lemma in STOPPING_VERBS and any(n in NOMINALISATIONS for n in near):
            return None  # "the transfer was blocked": a refusal, not a write
        clause = {self._nouns[w] for w in words[start:end] if w in self._nouns and w != word}
        around = words[max(start, index - 3) : index] + words[object_start : object_start + 1]
        chosen = self._attributor.choose(
            lemma,
            bool(role & _WRITE),
            bool(role & _GENERIC),
            near,
            clause,
            sentence,
            context,
            pronoun=not _PRONOUN_ARGUMENTS.isdisjoint(around),
        )
        if chosen is None:
            return None
        return chosen[0], chosen[1], near, index

    def _near_nouns(
        self, words: list[str], index: int, start: int, end: int, object_start: int
    ) -> frozenset[str]:
        """Tool nouns in the verb's subject (before it) and object (after it)."""
        nouns = self._nouns
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
            if word in g.OBJECT_STOPS or (word in self._forms and word not in nouns):
                break
            if word in nouns:
                near.add(nouns[word])
        return frozenset(near)

    def _deduplicate(self, found: list[_Found]) -> list[_Hit]:
        """One claim per tool.  An unattributed verb sharing its object with an attributed
        one ("approved and processed your refund") adds no claim of its own."""
        merged: dict[int | None, _Hit] = {}
        for tool, verb, near, index in found:
            if tool is None and any(
                t is not None and (near & n or abs(i - index) <= 2) for t, _, n, i in found
            ):
                continue
            if tool in merged:
                kept = merged[tool]
                merged[tool] = (tool, kept[1], kept[2], (*kept[3], index))
            else:
                merged[tool] = (tool, verb, near, (index,))
        return list(merged.values())


def find_claims(text: str, vocabularies: Sequence[ToolVocabulary]) -> list[Claim]:
    """Claims in ``text`` attributed against ``vocabularies`` (builds a one-off Detector)."""
    return Detector(vocabularies).find_claims(text)
