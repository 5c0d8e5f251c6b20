"""Hand-written English inflection: verb and noun forms, lemmas and singulars."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from broker.implied_write.lexicon import (
    GENERAL_WRITE_VERBS,
    GENERIC_VERBS,
    IRREGULAR_PAST,
    NOMINALISATIONS,
    NOUN_SYNONYMS,
    READ_VERBS,
    VERB_SYNONYMS,
    VERBAL_NOUNS,
)

__all__ = ("lemmatize", "noun_forms", "singular", "verb_forms")

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
        if suffix == "s" and word.endswith(_KEEP_FINAL_S):
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


_KEEP_FINAL_S = ("ss", "us", "is", "ics", "ws")


def singular(noun: str) -> str:
    """Singular of a plural noun (tickets -> ticket, addresses -> address); else unchanged."""
    noun = noun.lower()
    if noun in _KNOWN or len(noun) < 4 or noun.endswith(_KEEP_FINAL_S) or noun[-1] != "s":
        return noun
    if noun.endswith("ies"):
        return noun[:-3] + "y"
    if noun.endswith(("sses", "shes", "ches", "xes", "zes")):
        return noun[:-2]
    return noun[:-1]
