"""Closed word classes that decide whether a clause asserts that an action happened."""

from __future__ import annotations

__all__ = (
    "APPROVAL_NOUNS",
    "APPROVAL_OPENERS",
    "ASSERTIVE",
    "BE_FORMS",
    "CAUSATIVE_FILLER",
    "CHAIN_ADVERBS",
    "DETERMINERS",
    "FAILURE_AFTER",
    "FINITE_AFTER",
    "HABITUAL",
    "HAVE_FORMS",
    "INTENT",
    "INTENT_BEFORE_TO",
    "MODALS",
    "NEGATIONS",
    "OBJECT_STOPS",
    "PERCEPTION",
    "PERCEPTION_BEFORE_LIKE",
    "PRESENT_BE",
    "QUESTION_STARTS",
    "REPORTERS",
    "REPORT_VERBS",
)

MODALS = frozenset(
    {"will", "shall", "would", "could", "can", "should", "may", "might", "must", "gonna",
     "cannot", "wanna", "ought"}
)  # fmt: skip
HAVE_FORMS = frozenset({"have", "has", "had", "'d", "having"})
BE_FORMS = frozenset(
    {"is", "are", "was", "were", "am", "'s", "been", "be", "being", "get", "gets", "got",
     "gotten", "getting"}
)  # fmt: skip
PRESENT_BE = frozenset({"is", "are", "am", "'s"})
NEGATIONS = frozenset(
    {"not", "no", "never", "nothing", "none", "neither", "nor", "without", "nobody", "nowhere"}
)
# Adverbs that may sit inside a verb group: "has now been", "was successfully".
CHAIN_ADVERBS = frozenset(
    {"already", "now", "just", "also", "successfully", "all", "fully", "both", "finally",
     "automatically", "manually", "officially", "indeed", "actually", "immediately", "promptly",
     "quickly", "really", "correctly", "properly", "recently", "previously", "personally",
     "completely", "partially", "instantly", "formally", "since", "then", "today", "earlier",
     "therefore", "accordingly", "likewise", "too", "again", "directly", "safely", "ever",
     "newly", "securely", "temporarily", "permanently", "internally", "remotely"}
)  # fmt: skip
DETERMINERS = frozenset(
    {"the", "a", "an", "your", "my", "our", "their", "its", "this", "that", "these", "those",
     "his", "her", "any", "some", "every", "another", "newly", "recently", "previously",
     "already", "auto", "pre", "non", "un"}
)  # fmt: skip
# After a modal or "to", these keep the sentence an assertion: "I can confirm that ...".
ASSERTIVE = frozenset(
    {"confirm", "tell", "report", "say", "share", "inform", "let", "mention", "note",
     "reassure", "clarify", "update", "know", "notify", "advise", "be"}
)  # fmt: skip
# Words that put what follows out of the realm of fact, wherever they sit before the verb.
INTENT = frozenset(
    {"want", "wants", "wanted", "wanting", "need", "needs", "planning",
     "try", "tries", "tried", "trying", "attempt", "attempts", "attempted", "attempting",
     "hope", "hoping", "hopefully", "expect", "expects", "expecting", "intend", "intends",
     "intended", "aim", "please", "let", "ensure", "suggest", "suggested", "recommend",
     "propose", "proposed", "proposing", "offer", "offered", "awaiting", "waiting", "pending",
     "unable", "failed", "fail", "fails", "failing", "failure", "error", "errors",
     "unsuccessful", "rejected", "declined", "denied", "impossible", "prevented", "until",
     "whether", "if", "wish", "supposed", "imagine", "suppose", "supposing", "hypothetically"}
)  # fmt: skip
# Intent only when followed by "to": "going to", "happy to", "able to".
INTENT_BEFORE_TO = frozenset(
    {
        "going",
        "about",
        "happy",
        "glad",
        "able",
        "due",
        "meant",
        "set",
        "like",
        "love",
        "asked",
        "ready",
        "pleased",
        "delighted",
    }
)
PERCEPTION = frozenset(
    {"see", "sees", "saw", "seen", "seeing", "notice", "notices", "noticed", "show", "shows",
     "showed", "shown", "showing", "seem", "seems", "seemed", "appear", "appears", "appeared",
     "according", "indicate", "indicates", "indicated", "reflect", "reflects", "reads",
     "suggests", "apparently", "understand", "understands"}
)  # fmt: skip
PERCEPTION_BEFORE_LIKE = frozenset({"look", "looks", "looked", "sounds", "sound"})
REPORT_VERBS = frozenset(
    {"said", "say", "says", "mentioned", "mention", "mentions", "wrote", "write", "writes",
     "told", "tell", "tells", "claim", "claims", "claimed", "reported", "report", "reports",
     "noted", "stated", "states", "think", "thinks", "thought", "believe", "believes",
     "believed", "heard", "hear", "indicated", "asked", "explained", "complained", "suggested",
     "insisted", "assumed", "understood", "remember", "remembered", "recall", "recalled",
     "mentioning", "saying", "claiming", "insist", "assume", "wondering", "wondered", "asking"}
)  # fmt: skip
REPORTERS = frozenset(
    {"you", "they", "he", "she", "customer", "user", "someone", "rep", "representative",
     "agent", "caller", "colleague", "email", "message", "log", "logs", "note", "notes",
     "page", "screen", "dashboard", "manager", "team", "client", "buyer", "bank", "it",
     "chat", "previous", "earlier", "somebody", "vendor", "carrier", "courier"}
)  # fmt: skip
CAUSATIVE_FILLER = frozenset(
    {"be", "been", "have", "get", "got", "it", "them", "this", "that", "all", "already", "now",
     "just", "fully", "properly", "successfully", "everything", "these", "those", "one",
     "him", "her", "quickly"}
)  # fmt: skip
HABITUAL = frozenset(
    {"usually", "typically", "normally", "generally", "always", "automatically", "often",
     "sometimes", "regularly", "within", "whenever", "daily", "weekly", "monthly", "nightly",
     "routinely", "only"}
)  # fmt: skip
QUESTION_STARTS = frozenset(
    {"is", "are", "was", "were", "has", "have", "had", "do", "does", "did", "can", "could",
     "will", "would", "shall", "should", "may", "might", "what", "when", "where", "why", "how",
     "which", "who", "want", "need", "anything", "any", "or", "right", "ok", "okay"}
)  # fmt: skip
FINITE_AFTER = frozenset(
    {"is", "are", "was", "were", "has", "have", "will", "would", "can", "should", "must",
     "may", "might", "does", "do", "did", "'s", "appear", "appears", "show", "shows", "take",
     "takes", "need", "needs", "get", "gets"}
)  # fmt: skip
FAILURE_AFTER = frozenset(
    {"failed", "fails", "failure", "errored", "error", "unsuccessful", "rejected", "declined",
     "denied", "bounced", "timed", "blocked", "reverted", "didn't", "never"}
)  # fmt: skip
OBJECT_STOPS = frozenset(
    {"to", "for", "on", "in", "at", "with", "from", "by", "and", "or", "via", "as", "under",
     "so", "because", "into", "onto", "against", "until", "after", "before", "since"}
)  # fmt: skip
APPROVAL_OPENERS = frozenset(
    {"for", "pending", "awaiting", "await", "needs", "requires", "require", "need", "needing",
     "seeking", "requesting", "request", "until", "subject"}
)  # fmt: skip
APPROVAL_NOUNS = frozenset(
    {"approval", "review", "signoff", "sign-off", "authorization", "authorisation",
     "manager", "sign"}
)  # fmt: skip
