"""Hand-written English word tables the detector is built from."""

from __future__ import annotations

__all__ = (
    "ADJECTIVAL_PREDICATES",
    "CONTAINER_NOUNS",
    "GENERAL_WRITE_VERBS",
    "GENERIC_IMPLIES",
    "GENERIC_VERBS",
    "IRREGULAR_PAST",
    "NOMINALISATIONS",
    "NOUN_SYNONYMS",
    "PHRASAL_VERBS",
    "READ_VERBS",
    "STOPPING_VERBS",
    "STOP_NOUNS",
    "VERBAL_NOUNS",
    "VERB_SYNONYMS",
)

# Verb lemma -> lemmas that claim the same action.
VERB_SYNONYMS: dict[str, frozenset[str]] = {
    "issue": frozenset({"grant", "process", "apply", "reimburse"}),
    "create": frozenset({"open", "file", "raise", "log", "generate", "submit"}),
    "refund": frozenset({"credit", "reimburse", "process"}),
    "schedule": frozenset({"book", "arrange", "setup"}),
    "book": frozenset({"schedule", "reserve", "arrange", "setup"}),
    "reserve": frozenset({"book", "hold"}),
    "reschedule": frozenset({"move", "rebook", "shift", "push"}),
    "cancel": frozenset({"terminate", "calloff"}),
    "restart": frozenset({"reboot", "recycle", "cycle"}),
    "deploy": frozenset({"rollout", "release", "push", "promote", "redeploy"}),
    "rollback": frozenset({"revert"}),
    "send": frozenset({"email", "mail", "forward", "deliver", "resend"}),
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
    "ticket": frozenset({"case", "issue", "bug", "incident"}),
    "meeting": frozenset(
        {
            "appointment",
            "call",
            "event",
            "demo",
            "sync",
            "standup",
            "session",
            "interview",
            "kickoff",
            "huddle",
            "catchup",
            "1:1",
            "one-on-one",
        }
    ),
    "subscription": frozenset({"plan", "membership"}),
    "email": frozenset({"message", "mail", "invite", "invitation", "newsletter"}),
    "message": frozenset({"dm"}),
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
    "user": frozenset({"member", "teammate", "colleague", "seat", "workspace"}),
    "lead": frozenset({"prospect"}),
    "fund": frozenset({"money", "payment"}),
    "cluster": frozenset({"node"}),
    "service": frozenset({"server", "worker", "pod", "container", "daemon"}),
    "contact": frozenset({"person", "phone"}),
}

# Nouns that are also verbs ("credit your account", "email you") -> the tool verbs whose
# action they name; "issue_credit" accepts "credited", "cancel_order" does not accept "ordered".
_PAYOUT = frozenset({"issue", "grant", "apply", "process", "credit", "refund", "reimburse"})
_SENDING = frozenset({"send", "post", "forward", "deliver"})
VERBAL_NOUNS: dict[str, frozenset[str]] = {
    "credit": _PAYOUT,
    "refund": _PAYOUT,
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
STOP_NOUNS = frozenset(
    {"request", "record", "item", "data", "info", "details", "entry", "new", "support"}
)

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
        "disable", "enable", "merge", "provision", "archive", "publish", "post",
        "rename", "revoke", "void", "waive", "reverse", "replace", "exchange", "subscribe",
        "unsubscribe", "onboard", "offboard", "reimburse", "migrate", "rotate", "restore",
        "patch", "install", "uninstall", "configure", "fix", "renew", "extend", "adjust",
        "dispatch", "mark", "setup", "calloff", "signoff", "text", "release", "scale",
        "arrange", "generate", "correct", "signup", "allocate", "resend", "rerun", "reopen",
        "notify", "pause", "resume", "convert", "flush", "page", "unpause", "reinstate",
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

# Generic verbs that, said of a tool noun, imply one action: "your appointment is confirmed".
GENERIC_IMPLIES: dict[str, str] = {"confirm": "book"}

# Verbs of stopping: "the deploy was blocked" reports a refusal, not a write.
STOPPING_VERBS = frozenset({"block", "lock", "freeze", "suspend", "hold", "halt", "stop"})

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
    ("go", "back"): "goback",
    # Returning something is no sending, paying or giving of the tools' kind: "was sent back".
    ("send", "back"): "sendback",
    ("pay", "back"): "payback",
    ("give", "back"): "giveback",
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
    "deploy": "deploy", "notification": "notify", "payout": "refund",
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
