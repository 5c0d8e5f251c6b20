"""Hand-checked vectors for seeds/004: §2.4 truncation outputs and the §2.1/§2.3 rendered card.

The token counts were checked piece by piece (cl100k_base splits digits in runs of up to three, so
``@1.4.0`` is five tokens); a change here is a change in what models are shown.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from broker.gateway import GatewayEntry, card_for
from broker.gateway.cards import card_tokens, render_card
from broker.gateway.tokens import count_tokens, truncate_description

VECTORS = Path(__file__).parent / "gateway_vectors"
TRUNCATION: list[dict[str, Any]] = json.loads(
    (VECTORS / "truncation.json").read_text(encoding="utf-8")
)["vectors"]


@pytest.mark.parametrize("vector", TRUNCATION, ids=lambda v: f"{v['budget']}:{v['rule']}")
def test_truncation_vectors(vector: dict[str, Any]) -> None:
    cut = truncate_description(vector["description"], vector["budget"])
    assert cut == vector["expected"]
    assert count_tokens(cut) == vector["tokens"] <= vector["budget"]


@pytest.mark.parametrize(
    ("entry", "line", "tokens"),
    [
        (
            GatewayEntry(
                "github:create_issue@1.4.0",
                "create_issue",
                "github",
                "Create an issue in a repository.",
                ("write", "issues"),
                side_effects=True,
            ),
            "- github:create_issue@1.4.0 | tool | create_issue | Create an issue in a repository."
            " | tags: issues, write | side effects",
            32,
        ),
        (
            GatewayEntry("weather:get@2024-05", "get", "weather", "Current weather for a city."),
            "- weather:get@2024-05 | tool | get | Current weather for a city.",
            19,
        ),
        (
            GatewayEntry(
                "slack:slack_send_message#3a91c7d2",
                "slack_send_message",
                "slack",
                "Post a message.",
                cost_hint=0.25,
            ),
            "- slack:slack_send_message#3a91c7d2 | tool | slack_send_message | Post a message."
            " | cost 0.25",
            31,
        ),
    ],
)
def test_seed_example_cards_render_and_count(entry: GatewayEntry, line: str, tokens: int) -> None:
    card = card_for(entry)
    assert render_card(card) == line
    assert card_tokens(card) == tokens
