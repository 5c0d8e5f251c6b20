"""Hand-written English word tables and inflection rules the detector is built from."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

__all__ = (
    "ADJECTIVAL_PREDICATES",
    "CONTAINER_NOUNS",
    "GENERAL_WRITE_VERBS",
    "GENERIC_VERBS",
    "IRREGULAR_PAST",
    "NOMINALISATIONS",
    "NOUN_SYNONYMS",
    "PHRASAL_VERBS",
    "READ_VERBS",
    "STOP_NOUNS",
    "VERBAL_NOUNS",
    "VERB_SYNONYMS",
    "lemmatize",
    "noun_forms",
    "verb_forms",
)

# Verb lemma -> lemmas that claim the same action.  Looked up in both directions.
VERB_SYNONYMS: dict[str, frozenset[str]] = {
    "issue": frozenset({"grant", "process", "apply"}),
    "create": frozenset({"open", "file", "raise", "log", "generate", "submit"}),
    "book": frozenset({"schedule", "reserve", "arrange", "setup"}),
    "reserve": frozenset({"book", "hold"}),
    "reschedule": frozenset({"move", "rebook", "shift", "push"}),
    "cancel": frozenset({"terminate", "calloff"}),
    "restart": frozenset({"reboot", "recycle", "cycle"}),
    "deploy": frozenset({"rollout", "release", "push"}),
    "rollback": frozenset({"revert"}),
    "send": frozenset({"email", "mail", "forward", "deliver"}),
    "update": frozenset({"change", "modify", "edit", "amend", "correct", "set"}),
    "delete": frozenset({"remove", "erase", "purge", "close"}),
    "close": frozenset({"resolve"}),
    "approve": frozenset({"grant", "accept", "signoff"}),
    "add": frozenset({"append", "attach", "log", "record"}),
    "invite": frozenset({"add", "onboard"}),
    "place": frozenset({"submit", "order"}),
    "transfer": frozenset({"move", "wire"}),
    "freeze": frozenset({"block", "lock", "suspend"}),
    "block": frozenset({"freeze", "lock", "suspend"}),
    "apply": frozenset({"add"}),
    "post": frozenset({"send", "publish", "share"}),
    "reset": frozenset({"regenerate"}),
    "escalate": frozenset({"forward"}),
    "scale": frozenset({"resize"}),
}

NOUN_SYNONYMS: dict[str, frozenset[str]] = {
    "credit": frozenset({"refund", "reimbursement"}),
    "ticket": frozenset({"case", "issue"}),
    "meeting": frozenset({"appointment", "call", "event"}),
    "subscription": frozenset({"plan", "membership"}),
    "email": frozenset({"message", "mail"}),
    "password": frozenset({"credential"}),
    "order": frozenset({"purchase"}),
    "account": frozenset({"profile"}),
    "deployment": frozenset({"release", "rollout", "deploy"}),
    "release": frozenset({"deployment", "version", "build"}),
    "discount": frozenset({"coupon", "promo"}),
    "return": frozenset({"rma"}),
    "leave": frozenset({"pto", "vacation"}),
    "invoice": frozenset({"bill"}),
    "note": frozenset({"comment"}),
    "table": frozenset({"reservation"}),
    "user": frozenset({"member", "teammate", "colleague", "seat"}),
    "lead": frozenset({"prospect"}),
    "fund": frozenset({"money", "payment"}),
    "cluster": frozenset({"node"}),
    "service": frozenset({"server"}),
    "contact": frozenset({"customer"}),
}

# Nouns that are also verbs ("credit your account", "email you") -> the tool verbs whose
# action they name; "issue_credit" accepts "credited", "cancel_order" does not accept "ordered".
_PAYOUT = frozenset({"issue", "grant", "apply", "process", "credit", "refund", "reimburse"})
_SENDING = frozenset({"send", "post", "forward", "deliver"})
VERBAL_NOUNS: dict[str, frozenset[str]] = {
    "credit": _PAYOUT,
    "refund": _PAYOUT,
    "reimbursement": _PAYOUT,
    "email": _SENDING,
    "mail": _SENDING,
    "message": _SENDING,
    "invoice": _SENDING | {"issue", "create", "generate"},
    "order": frozenset({"place", "submit"}),
}

# Nouns that say little about which tool ran: objects of many different actions.
CONTAINER_NOUNS = frozenset(
    {"order", "account", "customer", "card", "payment", "purchase", "profile", "service"}
)
STOP_NOUNS = frozenset({"request", "record", "item", "data", "info", "details", "entry", "new"})

# Verbs that only read: never a claim that the world changed.
READ_VERBS = frozenset(
    {
        "lookup", "look", "get", "list", "search", "find", "fetch", "check", "read", "view",
        "show", "query", "describe", "verify", "validate", "count", "inspect", "review",
    }
)  # fmt: skip

# World-changing verbs that make a claim even when no tool's vocabulary names them.
GENERAL_WRITE_VERBS = frozenset(
    {
        "issue", "refund", "credit", "create", "open", "file", "raise", "log", "book",
        "schedule", "reschedule", "rebook", "reserve", "cancel", "terminate", "delete", "remove",
        "erase", "purge", "restart", "reboot", "deploy", "rollout", "rollback", "revert",
        "send", "email", "forward", "update", "change", "modify", "edit", "amend", "reset",
        "approve", "grant", "apply", "add", "upgrade", "downgrade", "transfer", "wire", "close",
        "resolve", "assign", "reassign", "escalate", "invite", "enroll", "register", "activate",
        "deactivate", "suspend", "unlock", "lock", "block", "unblock", "freeze", "unfreeze",
        "disable", "enable", "merge", "provision", "archive", "publish", "post", "purchase",
        "rename", "revoke", "void", "waive", "reverse", "replace", "exchange", "subscribe",
        "unsubscribe", "onboard", "offboard", "reimburse", "migrate", "rotate", "restore",
        "patch", "install", "uninstall", "configure", "fix", "renew", "extend", "adjust",
        "dispatch", "mark", "setup", "calloff", "signoff", "text", "release", "scale",
        "arrange", "generate", "correct", "signup", "allocate", "resend", "rerun", "reopen",
    }
)  # fmt: skip

# Verbs that say an action completed without naming it; a claim only with a tool noun nearby.
GENERIC_VERBS = frozenset(
    {
        "process", "complete", "finish", "finalize", "finalise", "confirm", "handle",
        "initiate", "trigger", "kickoff", "launch", "execute", "carryout", "submit",
        "gothrough", "putthrough", "pushthrough", "takecareof", "succeed", "action",
    }
)  # fmt: skip

# Adjectives that, after a tool noun, say its action completed ("the refund is complete").
ADJECTIVAL_PREDICATES = frozenset(
    {"complete", "done", "successful", "live", "sorted", "finalized", "finalised", "through"}
)

# (verb lemma, particle) -> lemma of the phrasal verb.
PHRASAL_VERBS: dict[tuple[str, str], str] = {
    ("roll", "back"): "rollback",
    ("roll", "out"): "rollout",
    ("set", "up"): "setup",
    ("call", "off"): "calloff",
    ("sign", "off"): "signoff",
    ("sign", "up"): "signup",
    ("kick", "off"): "kickoff",
    ("carry", "out"): "carryout",
    ("go", "through"): "gothrough",
    ("put", "through"): "putthrough",
    ("push", "through"): "pushthrough",
    ("take", "care"): "takecareof",
    ("look", "up"): "lookup",
    ("log", "in"): "login",
    ("follow", "up"): "followup",
}

# Nouns naming the result of an action -> the action's verb lemma.
NOMINALISATIONS: dict[str, str] = {
    "cancellation": "cancel", "booking": "book", "reservation": "reserve",
    "deployment": "deploy", "rollout": "rollout", "restart": "restart", "reboot": "reboot",
    "refund": "refund", "credit": "credit", "creation": "create", "transfer": "transfer",
    "update": "update", "change": "change", "replacement": "replace", "reset": "reset",
    "deletion": "delete", "removal": "remove", "rollback": "rollback", "upgrade": "upgrade",
    "downgrade": "downgrade", "installation": "install", "registration": "register",
    "enrollment": "enroll", "enrolment": "enroll", "invitation": "invite", "invite": "invite",
    "renewal": "renew", "reversal": "reverse", "escalation": "escalate",
    "termination": "terminate", "suspension": "suspend", "activation": "activate",
    "deactivation": "deactivate", "adjustment": "adjust", "submission": "submit",
    "migration": "migrate", "merge": "merge", "release": "release", "approval": "approve",
}  # fmt: skip

IRREGULAR_PAST: dict[str, tuple[str, ...]] = {
    "send": ("sent",), "resend": ("resent",), "make": ("made",), "do": ("did", "done"),
    "pay": ("paid",), "set": ("set",), "reset": ("reset",), "put": ("put",),
    "write": ("wrote", "written"), "rewrite": ("rewrote", "rewritten"),
    "give": ("gave", "given"), "take": ("took", "taken"), "build": ("built",),
    "rebuild": ("rebuilt",), "shut": ("shut",), "sell": ("sold",), "buy": ("bought",),
    "run": ("ran", "run"), "rerun": ("reran", "rerun"), "cut": ("cut",),
    "hold": ("held",), "keep": ("kept",), "leave": ("left",), "get": ("got", "gotten"),
    "go": ("went", "gone"), "begin": ("began", "begun"), "bring": ("brought",),
    "spend": ("spent",), "find": ("found",), "undo": ("undid", "undone"),
    "freeze": ("froze", "frozen"), "unfreeze": ("unfroze", "unfrozen"),
    "withdraw": ("withdrew", "withdrawn"), "override": ("overrode", "overridden"),
    "choose": ("chose", "chosen"), "draw": ("drew", "drawn"), "lay": ("laid",),
    "forget": ("forgot", "forgotten"), "see": ("saw", "seen"), "tell": ("told",),
    "say": ("said",), "think": ("thought",), "lend": ("lent",),
}  # fmt: skip

_VOWELS = frozenset("aeiou")
# Verbs whose final consonant doubles before -ed/-ing although the CVC rule would not say so.
_DOUBLING = frozenset({"cancel", "label", "travel", "model", "signal", "fuel", "total", "level"})


def _doubles(lemma: str) -> bool:
    """Whether the last consonant doubles before a suffix: ship -> shipped, submit -> submitted."""
    if lemma in _DOUBLING:
        return True
    if len(lemma) < 3 or lemma[-1] in _VOWELS or lemma[-1] in "wxy":
        return False
    return lemma[-2] in _VOWELS and lemma[-3] not in _VOWELS


def verb_forms(lemma: str) -> Iterator[tuple[str, str]]:
    """Yield ``(form, kind)`` for a verb lemma; kind is base, s, ing or past.

    Over-generation is harmless: the forms only serve as a lookup table.
    """
    yield lemma, "base"
    if lemma.endswith(("s", "sh", "ch", "x", "z")):
        yield lemma + "es", "s"
    elif lemma.endswith("y") and len(lemma) > 1 and lemma[-2] not in _VOWELS:
        yield lemma[:-1] + "ies", "s"
    else:
        yield lemma + "s", "s"
    if lemma.endswith("e") and not lemma.endswith("ee"):
        yield lemma[:-1] + "ing", "ing"
        yield lemma + "d", "past"
    elif lemma.endswith("y") and len(lemma) > 1 and lemma[-2] not in _VOWELS:
        yield lemma + "ing", "ing"
        yield lemma[:-1] + "ied", "past"
    else:
        yield lemma + "ing", "ing"
        yield lemma + "ed", "past"
        if _doubles(lemma):
            yield lemma + lemma[-1] + "ing", "ing"
            yield lemma + lemma[-1] + "ed", "past"
    for past in IRREGULAR_PAST.get(lemma, ()):
        yield past, "past"


def noun_forms(lemma: str) -> Iterable[str]:
    """Singular and plural of a noun lemma."""
    if lemma.endswith(("s", "sh", "ch", "x", "z")):
        return (lemma, lemma + "es")
    if lemma.endswith("y") and len(lemma) > 1 and lemma[-2] not in _VOWELS:
        return (lemma, lemma[:-1] + "ies")
    return (lemma, lemma + "s")


def _known_lemmas() -> frozenset[str]:
    words: set[str] = set(GENERAL_WRITE_VERBS | GENERIC_VERBS | READ_VERBS)
    words.update(VERBAL_NOUNS)
    for table in (VERB_SYNONYMS, NOUN_SYNONYMS):
        for key, values in table.items():
            words.add(key)
            words.update(values)
    words.update(NOMINALISATIONS)
    words.update(NOMINALISATIONS.values())
    return frozenset(words)


_KNOWN = _known_lemmas()
_PAST_TO_LEMMA = {past: lemma for lemma, pasts in IRREGULAR_PAST.items() for past in pasts}


def lemmatize(word: str) -> str:
    """Reduce an English word to its lemma: issued -> issue, booked -> book, tickets -> ticket.

    Known lemmas (from the tables above) are preferred; otherwise plain suffix rules apply.
    """
    word = word.lower()
    if word in _KNOWN:
        return word
    if word in _PAST_TO_LEMMA:
        return _PAST_TO_LEMMA[word]
    for suffix in ("ing", "ed", "es", "s"):
        if not word.endswith(suffix) or len(word) <= len(suffix) + 2:
            continue
        stem = word[: -len(suffix)]
        if suffix == "s" and word.endswith("ss"):
            return word
        candidates = [stem, stem + "e"]
        if suffix in ("ed", "es") and stem.endswith("i"):
            candidates.insert(0, stem[:-1] + "y")
        if len(stem) > 2 and stem[-1] == stem[-2]:
            candidates.append(stem[:-1])
        for candidate in candidates:
            if candidate in _KNOWN:
                return candidate
        if suffix == "es" and not stem.endswith(("s", "sh", "ch", "x", "z", "i")):
            return stem + "e"
        if candidates[0] != stem:
            return candidates[0]
        if len(stem) > 2 and stem[-1] == stem[-2] and stem[-1] not in "lsz":
            return stem[:-1]
        return stem
    return word
