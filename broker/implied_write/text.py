"""Turns a message into tokens, sentences and clauses, keeping character offsets."""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence

__all__ = (
    "CONDITIONAL",
    "TEMPORAL",
    "Clause",
    "Tokens",
    "boundaries",
    "mask_quotes",
    "name_versions",
    "normalise",
    "split_clauses",
    "split_sentences",
    "tokenize",
)

_FAR = 1 << 62
# Literal prefixes, scanned far faster than _VERSION (which a message rarely holds).
_VERSION_HINTS = (re.compile(r"v\d"), re.compile(r"V\d"))
_VERSION = re.compile(r"\bv\d+(?:\.\d+){1,3}\b", re.IGNORECASE)
_CURLY = re.compile("[\u2018\u2019\u201c\u201d]")
_DOUBLE_QUOTED = re.compile(r'"[^"\n]{1,400}"')
# An apostrophe before a letter: a literal prefix, far faster to scan for than a pattern
# opening with a lookbehind; the character before it is checked by hand.
_SINGLE_OPENING = re.compile(r"'(?=[^\s'])")
_WORD_CHAR = re.compile(r"\w")
_SINGLE_QUOTED = re.compile(r"(?<!\w)'(?=[^\s'])[^\n]{1,300}?(?<=[^\s'])'(?!\w)")
# Words keep inner hyphens, apostrophes, dots, slashes and "@" (T-77391, I've, v2.4.1,
# example.com/T-1, a@b.test); a colon joins digits only (10:30, 1:1).
_TOKEN = re.compile(
    r"[^\W_]+(?:(?:[-'./@_+#]|(?<=\d):(?=\d))[^\W_]+)*"
    r"|#\d+|[.!?;:,()\[\]\u2014\u2013\n]|(?<=\s)-(?=\s)"
)
_CLAUSE_PUNCT = frozenset({",", ";", ":", "(", ")", "[", "]", "\u2014", "\u2013", "-"})
_SENTENCE_END = frozenset({".", "!", "?", "\n"})
_ABBREVIATIONS = frozenset(
    {"e.g", "i.e", "etc", "mr", "mrs", "ms", "dr", "vs", "approx", "st", "inc", "ltd", "no"}
)
_PRONOUN_CONTRACTIONS = frozenset(
    {"it", "that", "there", "here", "what", "he", "she", "who", "everything", "this",
     "which", "where", "nothing", "something", "let"}
)  # fmt: skip
_NOT_BASES = {"can": "can", "won": "will", "shan": "shall", "ain": "is", "don": "do"}
_CONTRACTED = {"ve": "have", "ll": "will", "re": "are", "m": "am"}

# Words that end one clause and start another.
_CLAUSE_WORDS = frozenset(
    {"but", "so", "however", "although", "though", "whereas", "because", "while", "meanwhile"}
)
# Subordinators whose clause states nothing as fact (TEMPORAL ones allow a plain past).
CONDITIONAL = frozenset(
    {"if", "once", "unless", "until", "till", "whether", "provided", "assuming", "whenever"}
)
TEMPORAL = frozenset({"when", "after", "before"})
_MULTIWORD_SUBORDINATORS = {("as", "soon"): "once", ("in", "case"): "if", ("so", "that"): "if"}
_BOUNDARY_WORDS = frozenset(
    {"as", "in", "and", "or"}
    | _CLAUSE_PUNCT
    | _SENTENCE_END
    | _CLAUSE_WORDS
    | CONDITIONAL
    | TEMPORAL
)
_NEW_SUBJECT = frozenset(
    {"i", "we", "you", "it", "they", "he", "she", "the", "your", "this", "that", "these",
     "our", "my", "there", "then", "also", "everything", "all"}
)  # fmt: skip

Tokens = tuple[list[str], list[tuple[int, int]]]
"""Parallel lists: lower-cased words and their ``(start, end)`` character offsets."""

Clause = tuple[int, int, str]
"""Token range ``[start, end)`` of a clause and the subordinator that opened it ('' if none)."""


def name_versions(words: list[str], text: str) -> list[str]:
    """The words with each version number ("v2.5.0") read as "version", the release it
    names ("v2.5.0 is now live")."""
    if not any(hint.search(text) is not None for hint in _VERSION_HINTS):
        return words
    if _VERSION.search(text) is None:
        return words
    return ["version" if _VERSION.fullmatch(w) else w for w in words]


def normalise(text: str) -> str:
    """Straighten curly quotes; the result has the same length as the input."""
    if _CURLY.search(text) is None:
        return text
    return (
        text.replace("\u2019", "'")
        .replace("\u2018", "'")
        .replace("\u201c", '"')
        .replace("\u201d", '"')
    )


def _blank(match: re.Match[str]) -> str:
    span = match.group(0)
    return span[0] + " " * (len(span) - 2) + span[-1]


def _opens_single_quote(text: str) -> bool:
    """Whether an apostrophe that no word character precedes opens something."""
    for match in _SINGLE_OPENING.finditer(text):
        start = match.start()
        if start == 0 or not _WORD_CHAR.match(text, start - 1):
            return True
    return False


def mask_quotes(text: str) -> str:
    """Blank out quoted passages (someone else's words), keeping every offset."""
    if '"' in text:
        text = _DOUBLE_QUOTED.sub(_blank, text)
    if "'" in text and _opens_single_quote(text):
        text = _SINGLE_QUOTED.sub(_blank, text)
    return text


def _expand(word: str) -> list[str]:
    """Contractions: "haven't" -> have, not; "I've" -> i, have; "ticket's" -> ticket."""
    head, _, tail = word.partition("'")
    if tail == "t" and head.endswith("n"):
        return [_NOT_BASES.get(head[:-1], head[:-1]), "not"]
    if tail in _CONTRACTED:
        return [head, _CONTRACTED[tail]]
    if tail == "d":
        return [head, "'d"]
    if tail == "s":
        return [head, "'s"] if head in _PRONOUN_CONTRACTIONS else [head]
    return [word]


def tokenize(text: str) -> Tokens:
    """Split into lower-cased tokens; contractions expand into two tokens with one span.

    "re-sent" becomes "resent", so prefixed verbs are looked up like any other word.
    """
    lowered = text.lower()
    if len(lowered) != len(text):  # a few characters change length when lower-cased
        lowered = "".join(ch if len(ch.lower()) != 1 else ch.lower() for ch in text)
    spans = [m.span() for m in _TOKEN.finditer(lowered)]
    words = [lowered[a:b] for a, b in spans]
    if "re-" in lowered:
        words = [w[:2] + w[3:] if w.startswith("re-") and w[3:].isalpha() else w for w in words]
    if "'" not in lowered:
        return words, spans
    # Expand contractions from the last, so earlier indices stay valid.
    for index in reversed(_apostrophe_tokens(lowered, spans)):
        parts = _expand(words[index])
        if len(parts) == 1:
            words[index] = parts[0]
        else:
            words[index : index + 1] = parts
            spans[index : index + 1] = [spans[index]] * len(parts)
    return words, spans


def _apostrophe_tokens(text: str, spans: list[tuple[int, int]]) -> list[int]:
    """Indices of the tokens holding an apostrophe, found from the text's apostrophes."""
    marked: list[int] = []
    position = text.find("'")
    while position >= 0:
        index = bisect.bisect_right(spans, (position, _FAR)) - 1
        inside = index >= 0 and spans[index][0] < position < spans[index][1] - 1
        if inside and (not marked or marked[-1] != index):
            marked.append(index)
        position = text.find("'", position + 1)
    return marked


def boundaries(words: list[str]) -> list[int]:
    """Indices of the words that may end a sentence or a clause, for ``split_sentences`` and
    ``split_clauses`` to share one pass over a message."""
    return [i for i, w in enumerate(words) if w in _BOUNDARY_WORDS]


def split_sentences(
    tokens: Tokens, text: str, bounds: Sequence[int] | None = None
) -> list[tuple[int, int]]:
    """Token ranges ``[start, end)`` of the sentences, end punctuation included (``bounds``:
    the message's ``boundaries``, if known)."""
    words, spans = tokens
    sentences: list[tuple[int, int]] = []
    begin = 0
    count = len(words)
    if bounds is None:
        ends = [i for i, w in enumerate(words) if w in _SENTENCE_END]
    else:
        ends = [i for i in bounds if words[i] in _SENTENCE_END]
    for index in ends:
        if words[index] == ".":
            after = spans[index][1]
            if after < len(text) and not text[after].isspace():
                continue
            previous = words[index - 1] if index else ""
            following = text[spans[index + 1][0]] if index + 1 < count else ""
            if previous in _ABBREVIATIONS and (previous != "no" or following.isdigit()):
                continue
            if following.islower():
                continue
        if index + 1 > begin:
            sentences.append((begin, index + 1))
        begin = index + 1
    if begin < count:
        sentences.append((begin, count))
    return [
        (a, b)
        for a, b in sentences
        if words[a] not in _SENTENCE_END or any(w not in _SENTENCE_END for w in words[a:b])
    ]


def split_clauses(
    words: list[str], start: int, end: int, bounds: Sequence[int] | None = None
) -> list[Clause]:
    """Split a sentence's token range at punctuation, conjunctions and subordinators
    (``bounds``: the message's ``boundaries``, if known)."""
    clauses: list[Clause] = []
    begin, opener = start, ""
    cuts: Sequence[int]
    if bounds is None:
        cuts = [i for i in range(start, end) if words[i] in _BOUNDARY_WORDS]
    else:
        cuts = bounds[bisect.bisect_left(bounds, start) : bisect.bisect_left(bounds, end)]
    for index in cuts:
        if index < begin:
            continue  # inside a multi-word subordinator already consumed
        word = words[index]
        nxt = words[index + 1] if index + 1 < end else ""
        new_opener, skip = "", 1
        if word in _CLAUSE_PUNCT or (word in _SENTENCE_END and word != "."):
            pass
        elif (word, nxt) in _MULTIWORD_SUBORDINATORS:
            new_opener = _MULTIWORD_SUBORDINATORS[word, nxt]
            skip = 3 if word == "as" else 2  # "as soon as"
        elif word in CONDITIONAL or word in TEMPORAL:
            new_opener = word
        elif word in _CLAUSE_WORDS or (word in ("and", "or") and nxt in _NEW_SUBJECT):
            pass
        else:
            continue
        if index > begin:
            clauses.append((begin, index, opener))
        begin, opener = index + skip, new_opener
    if end > begin:
        clauses.append((begin, end, opener))
    return clauses
