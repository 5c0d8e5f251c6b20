"""Decides whether a verb form states, as fact, that an action has been done."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from broker.implied_write import grammar as g
from broker.implied_write.lexicon import IRREGULAR_PAST, NOMINALISATIONS
from broker.implied_write.text import TEMPORAL

__all__ = ("Scope", "asserted", "out_of_fact")

# set, reset, put: the past looks like the base, so "Reset your password" is an imperative.
_SAME_FORM_PAST = frozenset(lemma for lemma, pasts in IRREGULAR_PAST.items() if lemma in pasts)
_PLANNING = frozenset({"schedule", "set", "plan", "setup", "book", "arrange"})
_PRONOUNS = frozenset(
    {"it", "this", "that", "they", "everything", "all", "both", "these", "you", "we", "i"}
)
_SOFTENERS = frozenset({"also", "now", "happily", "gladly", "just"})
# Words a "but" clause may use for the action just claimed: "but the payment didn't go through".
_SAME_ACTION = frozenset(
    {"payment", "charge", "transfer", "refund", "order", "request", "bank", "system", "provider"}
)
_NEVER = frozenset({"not", "never"})
_NOT_ASSERTING_AUX = g.MODALS | {"be", "being", "do", "does", "having"}
_FAILURE_FILLER = frozenset(
    {"then", "it", "was", "got", "has", "had", "been", "later", "immediately", "they", "were",
     "that", "unfortunately", "the", "is", "did", "does", "do", "could", "would", "this", "its",
     "your", "our", "ultimately", "eventually"}
)  # fmt: skip
_PUNCTUATION = frozenset({",", ";", ":", "(", ")", "\u2014", "\u2013", "-", ".", "!", "?", "\n"})


@dataclass(slots=True)
class Scope:
    """A clause under inspection: its tokens and what the sentence around it says."""

    words: list[str]
    start: int
    end: int
    opener: str
    """The subordinator that opened the clause ("when", "if"), or ''."""
    hedged: bool
    """The sentence opens with a condition or reports a status: no present-tense claims."""
    nouns: Mapping[str, str]
    """Tool nouns and nominalised actions, inflected form -> lemma."""
    sentence_end: int
    """Token index just past the sentence."""
    observed: bool = False
    """The sentence reports what a check found ("... when I checked")."""
    subject_start: int = -1
    """Where the clause's subject may start; earlier than ``start`` for "received, reviewed"."""
    weak: bool = False
    """The sentence negates, fails or reports a reading: no grammar-only claims in it."""


def asserted(scope: Scope, index: int, kind: str, lemma: str) -> bool:
    """Whether the verb form at ``index`` (kind base/s/ing/past/adj) states a done action."""
    if kind in ("s", "ing"):
        return False
    words, start, end = scope.words, scope.start, scope.end
    aux: list[str] = []
    position = index - 1
    while position >= start:
        word = words[position]
        if word in g.NEGATIONS:
            return False
        if word in g.CHAIN_ADVERBS or word in g.HABITUAL:
            position -= 1
        elif word in g.HAVE_FORMS or word in g.BE_FORMS or word in g.MODALS or word == "did":
            aux.append(word)
            position -= 1
        else:
            break
    previous = words[position] if position >= start else ""
    if kind == "base" and not (aux and aux[0] == "did"):
        return False
    present = perfect = False
    if aux:
        if not _NOT_ASSERTING_AUX.isdisjoint(aux):
            return False
        if "'d" in aux and (kind == "adj" or "have" in aux):
            return False  # "I'd have issued it": would have, not had
        passive = not g.BE_FORMS.isdisjoint(aux)
        if scope.observed and passive:
            return False  # "it was already cancelled when I checked"
        present = all(a in g.PRESENT_BE for a in aux)
        perfect = "have" in aux or "has" in aux or ("'s" in aux and "been" in aux)
        if scope.opener in TEMPORAL and (present or perfect):
            return False
        if previous == "you" and not passive:
            return False  # "you've cancelled it": the user's own action
    elif not _plain_past_asserts(scope, index, kind, lemma, previous):
        return False
    if present and not _present_asserts(scope, position, previous):
        return False
    if _announces_plan(scope, index, lemma):
        return False
    if index + 1 < end and words[index + 1] in ("no", "nothing", "none"):
        return False
    if not g.FAILURE_AFTER.isdisjoint(words[index + 1 : end]) or _fails_later(scope):
        return False
    return not out_of_fact(words, start, position, index, end)


def _fails_later(scope: Scope) -> bool:
    """Whether the same action failed after all: "The credit was issued but then rejected",
    "I placed the order, but the payment didn't go through"."""
    words, stop, after = scope.words, scope.sentence_end, scope.end
    if after < stop and words[after] == ",":
        after += 1
    if after >= stop or words[after] != "but":
        return False
    window = words[after + 1 : min(stop, after + 9)]
    lead = 0
    while lead < len(window) and (window[lead] in _FAILURE_FILLER or window[lead] in _SAME_ACTION):
        lead += 1
    return lead < len(window) and (window[lead] in g.FAILURE_AFTER or window[lead] in _NEVER)


def _plain_past_asserts(scope: Scope, index: int, kind: str, lemma: str, previous: str) -> bool:
    """A form with no auxiliary: "I cancelled it", "Refund processed", not "the cancelled order"."""
    if kind == "adj":
        return previous in scope.nouns  # "Refund complete"
    if previous in g.DETERMINERS or previous in ("as", "to", "you"):
        return False
    if not previous and lemma in _SAME_FORM_PAST:
        return False
    if previous in scope.nouns:
        # "The order placed yesterday was cancelled": a reduced relative clause.
        for word in scope.words[index : scope.sentence_end]:
            if word in _PUNCTUATION or word in ("and", "or", "but", "so"):
                break
            if word in g.FINITE_AFTER:
                return False
    return True


def _present_asserts(scope: Scope, subject: int, previous: str) -> bool:
    """Whether a present passive is an event: "Ticket T-77391 is created" is a claim, while
    "Refunds are processed within 5 days" and "the room is locked" describe habits and states."""
    words, start, end = scope.words, scope.start, scope.end
    if scope.hedged or "already" in words[start:end]:
        return False
    if not g.HABITUAL.isdisjoint(words[start:end]):
        return False
    if previous in _PRONOUNS or any(ch.isdigit() for ch in previous):
        return True
    if subject < start and 0 <= scope.subject_start < start:
        start = scope.subject_start  # "Table for 4 on Saturday, 7:30 pm, is secured"
    # The head noun of the subject: "Your table for four is booked", "credits over 500 USD".
    head = next((i for i in range(start, subject + 1) if words[i] in scope.nouns), -1)
    if head < 0:
        # "2FA is enabled on your login now": "now" says the state is new.
        return "now" in words[scope.start : end]
    noun = words[head]
    before = words[head - 1] if head > start else ""
    plural = noun.endswith("s") and scope.nouns[noun] != noun
    return not plural or before in g.DETERMINERS


def _announces_plan(scope: Scope, index: int, lemma: str) -> bool:
    """Whether the verb announces a future action: "scheduled to be moved", "scheduled for
    deletion"."""
    if lemma not in _PLANNING or index + 1 >= scope.end:
        return False
    words = scope.words
    nxt = words[index + 1]
    if nxt == "to":
        return True
    if nxt == "for":
        following = words[index + 2 : min(scope.end, index + 4)]
        return any(scope.nouns.get(w, "") in NOMINALISATIONS for w in following)
    return False


def _assertive(words: list[str], index: int, end: int) -> bool:
    """Whether ``words[index]`` opens an assertion idiom: "confirm", "let you know"."""
    while index < end and words[index] in _SOFTENERS:
        index += 1
    if index >= end:
        return False
    word = words[index]
    if word == "let":
        return index + 2 < end and words[index + 1] == "you" and words[index + 2] == "know"
    if word == "be":
        return index + 1 < end and words[index + 1] in ("aware", "advised", "informed")
    return word in g.ASSERTIVE


def _reporter(words: list[str], start: int, position: int) -> str:
    """The subject of a reporting verb at ``position``: the nearest word before it."""
    index = position - 1
    while index >= start and (words[index] in g.CHAIN_ADVERBS or words[index] in g.BE_FORMS
                              or words[index] in g.HAVE_FORMS):  # fmt: skip
        index -= 1
    return words[index] if index >= start else ""


def out_of_fact(words: list[str], start: int, subject: int, index: int, end: int) -> bool:
    """Negation, modality, intent, perception or reported speech before the verb."""
    for position in range(subject, start - 1, -1):
        word = words[position]
        nxt = words[position + 1] if position + 1 < end else ""
        if word in g.NEGATIONS:
            return True
        if word in g.MODALS and not _assertive(words, position + 1, end):
            return True
        if word == "let":
            if not _assertive(words, position, end):  # "let me", but not "let you know"
                return True
        elif word in g.INTENT and not (nxt == "to" and _assertive(words, position + 2, end)):
            return True
        if word in g.INTENT_BEFORE_TO and nxt == "to" and not _assertive(words, position + 2, end):
            return True
        if word in g.PERCEPTION or (word in g.PERCEPTION_BEFORE_LIKE and nxt in ("like", "as")):
            return True
        if word == "found" and nxt == "that":
            return True
        if (
            word in g.REPORT_VERBS
            and nxt != "for"  # "the printers you asked for": a request, not a report
            and _reporter(words, start, position) not in ("i", "we", "")
        ):
            return True
        if word == "to" and all(w in g.CAUSATIVE_FILLER for w in words[position + 1 : index]):
            return True
    return False
