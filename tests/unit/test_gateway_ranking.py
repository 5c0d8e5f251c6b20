"""How tools and queries become BM25 terms (broker.gateway.ranking)."""

from __future__ import annotations

import logging

import pytest

from broker.gateway import GatewayEntry, GatewayIndex
from broker.gateway.ranking import LexicalRanker, query_terms, words


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("create_issue", ["create", "issue"]),
        ("createIssue", ["create", "issue"]),
        ("create-issue", ["create", "issue"]),
        ("HTTPServer2", ["http", "server", "2"]),
        ("github:create_issue#0cfaac3b", ["github", "create", "issue", "0", "cfaac", "3", "b"]),
        ("Größe ändern", ["größe", "ändern"]),
        ("日本語のテキスト", ["日本語のテキスト"]),
        ("", []),
        ("—…!?", []),
    ],
)
def test_words(text: str, expected: list[str]) -> None:
    assert words(text) == expected


def test_terms_drop_stop_words_and_share_stems() -> None:
    assert query_terms("List the issues") == query_terms("list issue")
    assert query_terms("the of and a") == []


def test_a_tool_described_in_another_script_is_found_by_its_words() -> None:
    index = GatewayIndex.build(
        [
            GatewayEntry("shop:resize@1", "resize", "shop", "Bildgröße ändern für Produktfotos."),
            GatewayEntry("shop:refund@1", "refund", "shop", "Erstattung einer Bestellung."),
        ]
    )
    assert [card.id for card in index.browse(query="Bildgröße").cards] == ["shop:resize@1"]


def test_building_an_index_logs_nothing_below_warning(caplog: pytest.LogCaptureFixture) -> None:
    """bm25s sets its logger to DEBUG on import: an index build must not reach the broker's log."""
    caplog.set_level(logging.DEBUG)
    LexicalRanker([GatewayEntry("demo:a#0123abcd", "a", "demo", "Look an order up.")])
    assert [r for r in caplog.records if r.name.startswith("bm25s")] == []
