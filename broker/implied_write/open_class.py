"""Success claims recognised by their grammar, whatever the verb: "the invoice was paid",
"your plan has been switched", "SUB-3390 is now on the annual plan", "the money is back".

The tool vocabularies and the general write verbs name the actions the detector knows; a
claim may use any other verb.  These rules accept a past participle of any verb in a
completed-state position (after a perfect or passive auxiliary, after "successfully", or as
a plain past whose subject is "I", "we", an action noun or an amount) and a few state
constructions ("is now ...", "is back", "is on its way", "is in effect", "now runs ...").
Verbs that only observe, feel, communicate or fail are never such a claim.
"""

from __future__ import annotations

import functools
from collections.abc import Collection

from broker.implied_write import grammar as g
from broker.implied_write.inflection import lemmatize
from broker.implied_write.lexicon import IRREGULAR_PAST, NOMINALISATIONS, READ_VERBS

__all__ = (
    "NOT_ACTIONS",
    "STATE_MARKERS",
    "by_someone_else",
    "open_participle",
    "open_position",
    "state_at",
    "stative_words",
    "weak_sentence",
)

# Participles that describe the speaker, the customer or a state, or report, observe or
# fail, rather than say that an action changed something.
NOT_ACTIONS = frozenset(
    {"base", "locate", "interest", "please", "concern", "surprise", "disappoint", "confuse",
     "frustrate", "worry", "excite", "delight", "annoy", "tire", "involve", "relate",
     "associate", "link", "tie", "include", "require", "need", "expect", "suppose", "use",
     "allow", "permit", "advise", "inform", "charge", "bill", "ask", "note", "receive",
     "notice", "look", "seem", "happen", "occur", "cause", "affect", "delay", "stick",
     "experience", "mention", "explain", "answer", "reply", "contact", "reach", "call",
     "try", "attempt", "fail", "decline", "reject", "deny", "block", "expire", "lose",
     "damage", "break", "miss", "owe", "name", "title", "label", "list", "show", "see",
     "know", "give", "wait", "work", "talk", "speak", "hear", "read", "find", "verify",
     "test", "investigate", "start", "begin", "queue", "plan", "prepare", "draft",
     "request", "flag", "phone", "ping", "chat", "understand", "limit", "detail",
     "automate", "advance", "dedicate", "estimate", "vary", "mix", "state", "sort",
     "authorize", "authorise", "sign", "log", "tell", "say", "think", "believe", "feel",
     "want", "hope", "love", "like", "prefer", "appreciate", "apologize", "apologise",
     "thank", "welcome", "assume", "confirm", "check", "review", "learn", "determine",
     "decide", "manage", "struggle", "stop", "halt", "pause", "hold", "freeze", "lock",
     "suspend", "revert", "bounce", "time", "error", "compromise", "hack", "steal",
     "report", "complain", "dispute", "go", "get", "come", "make", "do", "have", "be",
     "let", "leave", "keep", "bring", "take", "spend", "choose", "draw", "lay", "forget",
     "lend", "rerun", "run", "set", "reset", "send", "write", "build", "sell", "cut", "shut",
     "purchase", "buy", "remain", "contain", "exceed", "match", "equal", "total", "cost",
     "mean", "last", "belong", "consist"}
)  # fmt: skip
# A past of a verb the corpus-independent tables list as irregular: "paid", "put", "gone".
_IRREGULAR = {past: lemma for lemma, pasts in IRREGULAR_PAST.items() for past in pasts}
_NOT_PARTICIPLES = frozenset(
    {"hundred", "kindred", "sacred", "naked", "wicked", "ragged", "rugged", "shed", "bed",
     "red", "wed", "fed", "led", "indeed", "embed", "seabed", "united"}
)  # fmt: skip
_SUBJECTS = frozenset({"i", "we"})
_E_FINAL = frozenset({"settle", "secure", "save", "resize", "move", "waive", "reverse", "issue"})
_MONEY_WORDS = frozenset(
    {"usd", "eur", "gbp", "dollars", "euros", "pounds", "bucks", "money", "funds", "amount"}
)
_STATE_ADVERBS = frozenset({"now", "all", "officially", "finally", "fully", "also", "already"})
STATE_MARKERS = frozenset({"now", "back", "active", "way", "effect", "out"})
"""Words without which no state claim is made (a cheap test before the rules run)."""


@functools.lru_cache(maxsize=8192)
def open_participle(word: str) -> str | None:
    """The lemma of ``word`` when it has the shape of a past form of an action verb."""
    if word in _IRREGULAR:
        lemma = _IRREGULAR[word]
    elif len(word) >= 5 and word.endswith("ed") and not word.endswith("eed"):
        if word in _NOT_PARTICIPLES or not word.isalpha():
            return None
        lemma = lemmatize(word)
        # An unknown verb's lemma is a guess ("declined" -> "declin"): try each stem.
        stems = {lemma, word[:-1], word[:-2]}
        if word.endswith("ied"):
            stems.add(word[:-3] + "y")  # "applied"
        elif word[-3] == word[-4]:
            stems.add(word[:-3])  # "stopped"
        if not stems.isdisjoint(NOT_ACTIONS) or not stems.isdisjoint(READ_VERBS):
            return None
        return word[:-1] if word[:-1] in _E_FINAL else lemma
    else:
        return None
    if lemma in NOT_ACTIONS or lemma in READ_VERBS:
        return None
    return lemma


def open_position(words: list[str], start: int, index: int, nouns: dict[str, str]) -> bool:
    """Whether a participle of an unknown verb at ``index`` sits where it states a completed
    action: after have/be ("has been switched", "was paid"), after "successfully", or as a
    plain past after "I", "we", an action noun, an identifier or an amount ("the refund
    cleared"), or after "and" in a clause whose subject is "I" or "we"."""
    position = index - 1
    while position >= start and words[position] in g.CHAIN_ADVERBS:
        if words[position] == "successfully":
            return True
        position -= 1
    if position < start:
        return False
    previous = words[position]
    if previous in g.HAVE_FORMS or previous in g.BE_FORMS:
        return True
    if previous in _SUBJECTS or previous in _MONEY_WORDS or previous.isdigit():
        return True
    if previous == "and" and words[start] in _SUBJECTS and words[start + 1] not in g.BE_FORMS:
        return True  # "We've gone ahead and switched it": the verbs share "we"
    if "-" in previous and any(ch.isdigit() for ch in previous):
        return True  # "TRF-99120 cleared": an identifier is the subject
    return nouns.get(previous, "") in NOMINALISATIONS


def state_at(words: list[str], index: int, end: int) -> str | None:
    """The state a present "be" at ``index`` (or "now" before a verb) asserts, if any:
    "is now on the annual plan" -> now, "is back in your account" -> back, "is on its way"
    -> way, "is in effect" -> effect, "is active" -> active, "now runs on" -> now, "is out to
    your team" -> out."""
    word = words[index]
    if word == "now":
        following = words[index + 1] if index + 1 < end else ""
        is_verb = (
            len(following) > 3
            and following.endswith("s")
            and not following.endswith("ss")
            and following not in g.PERCEPTION
            and following not in g.REPORT_VERBS
        )
        before = words[index - 1] if index else ""
        return "now" if is_verb and before not in g.BE_FORMS and before not in g.MODALS else None
    if word not in g.PRESENT_BE:
        return None
    position, now = index + 1, False
    while position < end and words[position] in _STATE_ADVERBS:
        now = now or words[position] == "now"
        position += 1
    if position >= end:
        return None
    complement = words[position]
    if complement in g.NEGATIONS or complement in ("still", "being", "going", "about", "due"):
        return None
    if now:
        return "now"
    if complement in ("back", "active"):
        return complement
    after = words[position + 1 : position + 3]
    if complement == "in" and after[:1] in (["effect"], ["place"]):
        return "effect"
    if complement == "out" and (after[:1] == ["to"] or after == ["the", "door"]):
        return "out"  # "is out to your finance team", "is out the door"
    if (
        complement == "on"
        and len(after) == 2
        and after[0] in ("its", "their", "the")
        and (after[1] == "way")
    ):
        return "way"
    return None


_READING = frozenset(
    {"checked", "looked", "verified", "reviewed", "searched", "inspected", "pulled", "found",
     "confirmed", "queried", "fetched"}
)  # fmt: skip


def weak_sentence(words: list[str], first: int, last: int) -> bool:
    """Whether a sentence gives a grammar-only claim too little footing: it negates or
    reports a failure anywhere ("can't be cancelled because it has already shipped"), or
    reports what the speaker read ("I checked order O-1: it's paid").  Claims by the tools'
    own words are judged by the finer rules of ``assertion``; these have nothing else."""
    sentence = words[first:last]
    if not _WEAK.isdisjoint(sentence):
        return True
    if _READING.isdisjoint(sentence):
        return False
    previous = ""
    for word in sentence:
        if word in _READING and previous in _SUBJECTS:
            return True
        if word not in g.CHAIN_ADVERBS and word not in g.HAVE_FORMS:
            previous = word
    return False


_WEAK = g.NEGATIONS | g.FAILURE_AFTER | g.INTENT


_AGENT_DETERMINERS = frozenset({"the", "a", "an", "your", "their", "another", "his", "her"})
_AGENT_PRONOUNS = frozenset({"them", "him", "her", "someone", "somebody", "another"})
_NOT_AGENTS = frozenset(
    {"end", "time", "close", "morning", "afternoon", "evening", "night", "deadline", "way",
     "default", "mistake", "accident", "hand", "same", "next", "start", "beginning", "due"}
)  # fmt: skip


def by_someone_else(words: list[str], index: int, end: int) -> bool:
    """Whether a passive names another agent ("was switched off by the admin"): a report of
    what someone else did, not the speaker's claim.  "by 14 days", "by the end of the day"
    and "by me" name no one else."""
    for position in range(index + 1, min(end, index + 4)):
        if words[position] != "by" or position + 1 >= end:
            continue
        agent = words[position + 1]
        if agent in _AGENT_PRONOUNS:
            return True
        if agent in _AGENT_DETERMINERS and position + 2 < end:
            following = words[position + 2]
            return following.isalpha() and following not in _NOT_AGENTS
    return False


def stative_words(words: Collection[str]) -> bool:
    """Whether the words may hold a state claim: a state word, and a present "be" or "now"
    for it to follow (``state_at`` looks for nothing else)."""
    if STATE_MARKERS.isdisjoint(words):
        return False
    return "now" in words or not g.PRESENT_BE.isdisjoint(words)
