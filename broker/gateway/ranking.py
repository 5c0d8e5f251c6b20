"""Lexical ranking for ``tool_browse(query=...)``: BM25 (``bm25s``) over a tool's words.

A tool's document is its name (twice: the name is the densest statement of what a tool does),
namespace, tags and description. Words are split at anything that is not a letter or digit (of any
script), ASCII words also at camelCase humps and between letters and digits; then they are
lower-cased, stripped of English stop words and Snowball-stemmed (``PyStemmer``), so
``listIssues`` and "list issues" meet on the same terms. Scores come back for every document, so
the caller owns the order and its ties (seeds/004 §2.5).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

import bm25s
import numpy as np
import numpy.typing as npt
import Stemmer
from bm25s.stopwords import STOPWORDS_EN

from broker.gateway.cards import GatewayEntry

__all__ = ["LexicalRanker", "document_terms", "query_terms", "stems", "words"]

# bm25s sets its own logger to DEBUG on import, which would put a line per index build into the
# broker's log whatever its level; its warnings still pass.
logging.getLogger("bm25s").setLevel(logging.WARNING)

_RUN = re.compile(r"[^\W_]+")  # letters and digits of any script, split at everything else
_ASCII_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")  # camelCase humps, digit runs
_STOPWORDS = frozenset(STOPWORDS_EN)
_STEMMER = Stemmer.Stemmer("english")


def words(text: str) -> list[str]:
    """The lower-cased words of ``text``: ``create_issue``, ``createIssue`` and ``create-issue``
    all give ``["create", "issue"]``; ``HTTPServer`` gives ``["http", "server"]``."""
    found: list[str] = []
    for run in _RUN.findall(text):
        # Case humps split ASCII identifiers; other scripts keep their runs whole.
        found.extend(_ASCII_WORD.findall(run) if run.isascii() else (run,))
    return [word.lower() for word in found]


def stems(text_words: list[str]) -> list[str]:
    """The Snowball (English) stem of each word: ``issues`` and ``issue`` both give ``issu``."""
    stemmed: list[str] = _STEMMER.stemWords(text_words)
    return stemmed


def query_terms(text: str) -> list[str]:
    """Stemmed, stop-word-free terms of ``text``, as both documents and queries are indexed."""
    return stems([word for word in words(text) if word not in _STOPWORDS])


def document_terms(entry: GatewayEntry) -> list[str]:
    """The terms one tool is found by."""
    text = " ".join(
        (entry.name, entry.name, entry.namespace, " ".join(entry.tags), entry.description)
    )
    return query_terms(text)


class LexicalRanker:
    """A BM25 index over a fixed list of tools, built once."""

    def __init__(self, entries: Sequence[GatewayEntry]) -> None:
        self._size = len(entries)
        self._model = bm25s.BM25()
        corpus = [document_terms(entry) for entry in entries]
        if self._size:
            self._model.index(corpus, show_progress=False)
        self._vocabulary: dict[str, int] = dict(self._model.vocab_dict) if self._size else {}

    def scores(self, query: str) -> npt.NDArray[np.float32]:
        """One BM25 score per tool, in build order; all zero when no query term is indexed."""
        ids = [self._vocabulary[term] for term in query_terms(query) if term in self._vocabulary]
        if not ids:
            return np.zeros(self._size, dtype=np.float32)
        result: npt.NDArray[np.float32] = self._model.get_scores_from_ids(ids)
        return result
