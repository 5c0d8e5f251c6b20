"""Decides which identifiers each claim cites: its part of the sentence, or a reference line."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from broker.implied_write.hits import Hit
from broker.implied_write.identifiers import extract_identifiers
from broker.implied_write.model import Claim

__all__ = ("build_claims", "cited_identifiers", "claim_segments", "reference_after")

_LEADING_MARKS = frozenset({"-", "\u2014", "\u2013", "\n", "(", ")", ":", ",", ";", "*"})

_SEGMENT_CUTS = frozenset({"and", ",", ";", "then", "also", "but", "\u2014", ":", "plus"})
_REFERENCE_WORDS = frozenset(
    {"id", "reference", "ref", "confirmation", "number", "code", "receipt", "credit",
     "ticket", "transfer", "order", "case", "booking", "reservation", "invoice", "tracking"}
)  # fmt: skip


def cited_identifiers(
    verb_indices: Sequence[tuple[int, ...]],
    words: list[str],
    spans: list[tuple[int, int]],
    masked: str,
    first: int,
    last: int,
) -> list[list[str]]:
    """Identifiers each claim cites.  With several claims in a sentence, each gets the part
    of the sentence around its own verbs, cut at the conjunction between two claims."""
    return [
        [i for a, b in parts for i in extract_identifiers(masked[a:b])]
        for parts in claim_segments(verb_indices, words, spans, first, last)
    ]


def claim_segments(
    verb_indices: Sequence[tuple[int, ...]],
    words: list[str],
    spans: list[tuple[int, int]],
    first: int,
    last: int,
) -> list[list[tuple[int, int]]]:
    """The character ranges each claim of a sentence speaks for: the whole sentence for a
    single claim, else the part around each claim's verbs (what it cites, identifiers or
    quantities)."""
    if len(verb_indices) == 1:
        return [[(spans[first][0], spans[last - 1][1])]]
    verbs = sorted((i, number) for number, indices in enumerate(verb_indices) for i in indices)
    cuts = [first]
    for (left, _), (right, _) in itertools.pairwise(verbs):
        cut = right
        for position in range(right - 1, left, -1):
            if words[position] in _SEGMENT_CUTS:
                cut = position
                break
        cuts.append(cut)
    cuts.append(last)
    cited: list[list[tuple[int, int]]] = [[] for _ in verb_indices]
    for (_, number), begin, finish in zip(verbs, cuts, cuts[1:], strict=False):
        if finish > begin:
            cited[number].append((spans[begin][0], spans[finish - 1][1]))
    return cited


def reference_after(
    words: list[str], sentence: tuple[int, int], spans: list[tuple[int, int]], masked: str
) -> list[str]:
    """Identifiers of a claim-free follow-up such as "Reference: CR-1001." or "Your ticket
    number is T-77391."."""
    first, last = sentence
    if not any(w in _REFERENCE_WORDS for w in words[first : min(last, first + 6)]):
        return []
    return list(extract_identifiers(masked[spans[first][0] : spans[last - 1][1]]))


def build_claims(
    text: str,
    masked: str,
    words: list[str],
    spans: list[tuple[int, int]],
    sentences: list[tuple[int, int]],
    found: list[list[Hit]],
    name: Callable[[int | None], str | None],
) -> list[Claim]:
    """The claims of a message from each sentence's hits: the sentence's text (without
    leading marks), the tool ``name`` gives, and the identifiers each claim cites."""
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
        segments = claim_segments([hit[3] for hit in hits], words, spans, first, last)
        cited = [[i for a, b in parts for i in extract_identifiers(masked[a:b])]
                 for parts in segments]  # fmt: skip
        if position + 1 < len(found) and not found[position + 1] and len(hits) == 1:
            cited[0] += reference_after(words, sentences[position + 1], spans, masked)
        for (tool, verb, _, _), identifiers, parts in zip(hits, cited, segments, strict=True):
            claims.append(
                Claim(
                    text=text[start:end],
                    start=start,
                    end=end,
                    tool=name(tool),
                    verb=verb,
                    identifiers=tuple(dict.fromkeys(identifiers)),
                    # The quantities are read by the judge, where they are compared.
                    cites=tuple(parts) if len(hits) > 1 else (),
                )
            )
    return claims
