"""Finds sentences that claim a world-changing action happened and attributes them to tools."""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from broker.implied_write import grammar as g
from broker.implied_write.assertion import Scope, asserted, out_of_fact
from broker.implied_write.attribution import Attributor
from broker.implied_write.citation import build_claims
from broker.implied_write.clauses import (
    awaits_approval,
    is_lead_in,
    looks_verbal,
    near_nouns,
    observes,
    reports_status,
)
from broker.implied_write.hits import Found, Hit, cites, deduplicate
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
from broker.implied_write.open_class import (
    NOT_ACTIONS,
    by_someone_else,
    open_participle,
    open_position,
    state_at,
    stative_words,
    weak_sentence,
)
from broker.implied_write.text import (
    CONDITIONAL,
    TEMPORAL,
    boundaries,
    mask_quotes,
    name_versions,
    normalise,
    split_clauses,
    split_sentences,
    tokenize,
)

__all__ = ("Detector", "find_claims")

_WRITE, _GENERIC, _OPEN = 1, 2, 4
_OPEN_WORDS_KEPT = 50_000
_INVERTING = frozenset({"had", "were", "should"})
_INVERTED_SUBJECTS = frozenset({"i", "we", "you", "it", "they", "he", "she", "the", "your"})
_PRONOUN_ARGUMENTS = frozenset({"it", "this", "that", "them", "these", "those"})
_STATE_STARTERS = g.PRESENT_BE | {"now"}


class Detector:
    """Claim finder for a fixed set of tool vocabularies; build once, call per message.

    Every table (inflected verb and noun forms, tool indexes) is computed here, so
    ``find_claims`` only walks tokens and does dictionary lookups.
    """

    __slots__ = (
        "_attributor",
        "_forms",
        "_nouns",
        "_open_words",
        "_roles",
        "_seen",
        "_triggers",
    )

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
        self._seen: set[str] = set()
        self._open_words: set[str] = set()
        """Memo of ``_open_triggers``: the words looked at, and those that are open."""
        # Only these forms can start a claim: a past form or participle ("issued"), an
        # adjective ("complete"), or a phrasal head whose phrase is an action ("rolled back").
        phrasal_roles = {head for (head, _), full in PHRASAL_VERBS.items() if full in roles}
        self._triggers = frozenset(
            form
            for form, (lemma, kind) in forms.items()
            if kind in ("past", "adj") and (lemma in roles or lemma in phrasal_roles)
        )

    @property
    def read_only_tools(self) -> frozenset[str]:
        """Tools whose vocabulary names no write: ``judge`` never attributes a claim to them."""
        return self._attributor.read_only

    def may_back(self, verb: str, tool: str) -> bool:
        """Whether an execution of ``tool`` may back a claim made with ``verb``, when what the
        claim cites points to it: not when the verb names another action ("I reopened ticket
        T-1" is no close_ticket), whereas a verb no table knows ("settled", "went back") or
        one that only says an action finished ("processed") may stand for any."""
        role = self._roles.get(verb, 0)
        if not role & _WRITE or role & _GENERIC:
            return True
        return self._attributor.names_verb(tool, verb)

    def _open_triggers(self, words: set[str]) -> set[str]:
        """The words that may start a claim by grammar alone: past forms of verbs that no
        table gives a role ("went", "put") and participles of verbs no table knows."""
        seen, open_words = self._seen, self._open_words
        unseen = words.difference(seen)
        if unseen:
            if len(seen) > _OPEN_WORDS_KEPT:
                seen.clear()  # bounded: arbitrary text must not grow it forever
                open_words.clear()
            for word in unseen:
                entry = self._forms.get(word)
                if entry is None:
                    is_open = open_participle(word) is not None
                else:
                    lemma, kind = entry
                    is_open = kind == "past" and lemma not in self._roles
                    is_open = is_open and lemma not in READ_VERBS
                seen.add(word)
                if is_open:
                    open_words.add(word)
        return words & open_words

    def find_claims(self, text: str) -> list[Claim]:
        """Every claim in ``text``, in order; at most one per sentence and tool."""
        masked = mask_quotes(normalise(text))
        words, spans = tokenize(masked)
        if not words:
            return []
        words = name_versions(words, masked)
        unique = set(words)
        extra = self._open_triggers(unique)
        # The words that may start a claim: a trigger, a grammar-only trigger, the verb after
        # "did", and a present "be" or "now" where a state word may follow.  Each is checked
        # properly in its clause; a sentence with none holds no claim.
        starters = (self._triggers & unique) | extra
        if stative_words(unique):
            starters |= _STATE_STARTERS & unique
        candidates = [i for i, w in enumerate(words) if w in starters]
        if "did" in unique:
            candidates = sorted({*candidates, *(i + 1 for i, w in enumerate(words) if w == "did")})
        if not candidates:
            return []
        bounds = boundaries(words)
        sentences = split_sentences((words, spans), masked, bounds)
        nouns = self._nouns
        # Nouns anywhere in the message resolve "I cancelled it"; the sentence's own nouns
        # are weighed before them.
        context = {nouns[w] for w in unique if w in nouns}
        found: list[list[Hit]] = []
        for first, last in sentences:
            lo = bisect.bisect_left(candidates, first)
            hi = bisect.bisect_left(candidates, last, lo)
            if lo == hi:
                found.append([])
                continue
            sentence = {nouns[w] for w in words[first:last] if w in nouns}
            found.append(
                self._sentence_claims(
                    words, first, last, sentence, context, extra, candidates[lo:hi], bounds
                )
            )
        return build_claims(text, masked, words, spans, sentences, found, self._attributor.name)

    def _sentence_claims(
        self,
        words: list[str],
        first: int,
        last: int,
        sentence: set[str],
        context: set[str],
        extra: set[str],
        candidates: list[int],
        bounds: list[int],
    ) -> list[Hit]:
        """The claims of one sentence; ``extra`` holds the message's grammar-only triggers,
        ``candidates`` the indices of the sentence's words that may start a claim."""
        clauses = split_clauses(words, first, last, bounds)
        if not clauses:
            return []
        tail = last - 1
        while tail > first and words[tail] == "\n":
            tail -= 1
        question = words[tail] == "?"
        conditional = clauses[0][2] in CONDITIONAL or clauses[0][2] in TEMPORAL
        # "Had we switched you to annual, you'd have saved $40": an inverted condition.
        inverted = (
            last - first > 2
            and words[first] in _INVERTING
            and words[first + 1] in _INVERTED_SUBJECTS
        )
        conditional = conditional or inverted
        observed = any(observes(words, start, end, opener) for start, end, opener in clauses
                       if opener in TEMPORAL)  # fmt: skip
        span = words[first:last]
        triggers = self._triggers
        # A present "be" or "now" is looked at only where a state word may follow it.
        stative = stative_words(span)
        # Only grammar-only claims (states, verbs no table knows) need to know this.
        weak = (stative or not extra.isdisjoint(span)) and weak_sentence(words, first, last)
        # Clause tests that need a word the sentence may not hold at all.
        may_lead_in = "as" in span or "according" in span
        may_report = "status" in span
        may_await = not g.APPROVAL_NOUNS.isdisjoint(span)
        did = "did" in span
        found: list[Found] = []
        lead_in = status = False
        subject_start = first
        for position, (start, end, opener) in enumerate(clauses):
            skip = lead_in or status or opener in CONDITIONAL or (inverted and position == 0)
            lead_in = may_lead_in and is_lead_in(words, start, end)
            status = status or (may_report and reports_status(words, start, end))
            # "I haven't booked, cancelled or changed anything": a verb list after a comma
            # shares the subject, and the negation or modal, of the clause before it.
            after_comma = position > 0 and words[start - 1] == ","
            if after_comma and looks_verbal(words[start]):
                previous = words[clauses[position - 1][0] : start]
                if not g.NEGATIONS.isdisjoint(previous) or not g.MODALS.isdisjoint(previous):
                    continue
            elif after_comma and words[start] in g.BE_FORMS:
                # "Table for 4 on Saturday, 7:30 pm, is secured": the subject opens the sentence.
                subject_start = first
            else:
                subject_start = start
            if skip:
                continue
            if question and (position == len(clauses) - 1 or words[start] in g.QUESTION_STARTS):
                continue
            if may_await and awaits_approval(words, start, end):
                continue
            scope: Scope | None = None
            for index in candidates:
                if index < start:
                    continue
                if index >= end:
                    break
                word = words[index]
                if (
                    word not in triggers
                    and word not in extra
                    and not (stative and word in _STATE_STARTERS)
                    and not (did and index > start and words[index - 1] == "did")
                ):
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
                        weak,
                    )
                hit = self._claim_at(scope, index, sentence, context)
                if hit is not None:
                    found.append(hit)
        return deduplicate(found)

    def _claim_at(
        self, scope: Scope, index: int, sentence: set[str], context: set[str]
    ) -> Found | None:
        """The claim made by the word at ``index``, if it asserts a finished action."""
        words, start, end = scope.words, scope.start, scope.end
        word = words[index]
        if word in g.PRESENT_BE or word == "now":
            return self._state_claim(scope, index, sentence, context)
        entry = self._forms.get(word)
        if entry is None:
            lemma_guess = open_participle(word)
            if lemma_guess is None:
                return None
            entry = (lemma_guess, "past")
        lemma, kind = entry
        if word == "set" and index > start and words[index - 1] == "all":
            lemma, kind = "complete", "adj"
        nxt = words[index + 1] if index + 1 < end else ""
        object_start = index + 1
        phrasal = PHRASAL_VERBS.get((lemma, nxt))
        if phrasal is not None:
            lemma, object_start = phrasal, index + (3 if phrasal == "takecareof" else 2)
        role = self._roles.get(lemma, 0)
        # A verb no table knows claims only where its grammar says it is done.
        if (
            not role
            and kind == "past"
            and lemma not in READ_VERBS
            and lemma not in NOT_ACTIONS
            and not scope.weak
            and open_position(words, start, index, self._nouns)
        ):
            role = _OPEN
        if not role or not asserted(scope, index, kind, lemma):
            return None
        near = near_nouns(
            words, index, scope.subject_start, end, object_start, self._nouns, self._forms
        )
        if lemma in STOPPING_VERBS and any(n in NOMINALISATIONS for n in near):
            return None  # "the transfer was blocked": a refusal, not a write
        if lemma not in self._attributor.tool_verbs and by_someone_else(words, index, end):
            return None  # no tool's verb, and someone else did it ("renamed by the owner")
        if role == _OPEN:
            return self._open_claim(lemma, near, sentence, context, index)
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
            if role & _GENERIC and not scope.weak and cites(words, start, scope.sentence_end):
                # "Everything went through (INV-2001)": what it cites says what was done.
                return None, lemma, near, index, True
            return None
        return chosen[0], chosen[1], near, index, False

    def _open_claim(
        self,
        lemma: str,
        near: frozenset[str],
        sentence: set[str],
        context: set[str],
        index: int,
    ) -> Found:
        """A claim by a verb no vocabulary knows.  Its verb names no tool, so only an action
        noun next to it may ("the refund cleared"); a thing ("the invoice was paid") does
        not, or "paid" would be credited to send_invoice."""
        actions = frozenset(n for n in near if n in NOMINALISATIONS)
        if actions:
            chosen = self._attributor.choose(
                lemma, False, True, actions, actions, sentence, context
            )
            if chosen is not None and chosen[0] is not None:
                return chosen[0], chosen[1], near, index, True
        return None, lemma, near, index, True

    def _state_claim(
        self, scope: Scope, index: int, sentence: set[str], context: set[str]
    ) -> Found | None:
        """A present state that says an action completed: "SUB-3390 is now on the annual
        plan", "the money is back in your account", "the order is on its way"."""
        words, start, end = scope.words, scope.start, scope.end
        state = state_at(words, index, end)
        if state is None or scope.hedged or scope.weak or scope.opener in CONDITIONAL:
            return None
        if any(w in g.HABITUAL or w in g.NEGATIONS for w in words[start:end]):
            return None
        if index == start and words[index] != "now":
            return None  # "Is it back?" or a clause with no subject
        if out_of_fact(words, start, index - 1, index, end):
            return None
        near = near_nouns(
            words, index, scope.subject_start, end, index + 1, self._nouns, self._forms
        )
        return self._open_claim(state, near, sentence, context, index)


def find_claims(text: str, vocabularies: Sequence[ToolVocabulary]) -> list[Claim]:
    """Claims in ``text`` attributed against ``vocabularies`` (builds a one-off Detector)."""
    return Detector(vocabularies).find_claims(text)
