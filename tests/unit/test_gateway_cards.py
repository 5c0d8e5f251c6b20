"""ChoiceCards carry only the §2.1 fields, never a schema (§2.2), and fit §2.3's token budgets."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.gateway.cards import (
    BREAKPOINT_CARD,
    CARD_HARD_CAP,
    CARD_TARGET,
    ChoiceCard,
    GatewayEntry,
    card_for,
    card_tokens,
    internal_card,
    render_card,
)
from broker.gateway.errors import CatalogError
from broker.gateway.tokens import ELLIPSIS, count_tokens

PERMITTED = {
    "id",
    "name",
    "description",
    "tags",
    "kind",
    "namespace",
    "has_schema",
    "score",
    "cost_hint",
    "side_effects",
}

SCHEMA = {
    "type": "object",
    "properties": {"repo": {"type": "string", "description": "owner/name"}},
    "required": ["repo"],
    "examples": [{"repo": "octo/hello"}],
}


def entry(**changes: object) -> GatewayEntry:
    base = GatewayEntry(
        tool_id="github:create_issue@1.4.0",
        name="create_issue",
        namespace="github",
        description="Create an issue in a repository.",
        tags=("write", "issues"),
        input_schema=SCHEMA,
    )
    return msgspec.structs.replace(base, **changes)


def test_a_card_has_only_permitted_fields_and_never_the_schema() -> None:
    card = card_for(entry(side_effects=True, cost_hint=0.5))
    assert set(msgspec.structs.asdict(card)) <= PERMITTED
    wire = msgspec.json.decode(msgspec.json.encode(card))
    assert set(wire) <= PERMITTED
    assert wire == {
        "id": "github:create_issue@1.4.0",
        "kind": "tool",
        "name": "create_issue",
        "namespace": "github",
        "description": "Create an issue in a repository.",
        "has_schema": True,
        "tags": ["issues", "write"],
        "cost_hint": 0.5,
        "side_effects": True,
    }
    text = msgspec.json.encode(card).decode() + render_card(card)
    for banned in (
        "inputSchema",
        "args_schema",
        "properties",
        "owner/name",
        "octo/hello",
        '"repo"',
    ):
        assert banned not in text


def test_tags_are_sorted_and_deduplicated() -> None:
    assert card_for(entry(tags=("write", "issues", "write", " issues "))).tags == (
        "issues",
        "write",
    )


def test_has_schema_says_whether_there_is_one_to_hydrate() -> None:
    assert card_for(entry()).has_schema is True
    assert card_for(entry(input_schema={})).has_schema is False


def test_the_rendered_line_leaves_out_score_namespace_and_unset_flags() -> None:
    card = msgspec.structs.replace(card_for(entry()), score=0.8123)
    line = render_card(card)
    assert line == (
        "- github:create_issue@1.4.0 | tool | create_issue | Create an issue in a repository."
        " | tags: issues, write"
    )
    assert "0.8123" not in line
    flagged = render_card(card_for(entry(side_effects=True, cost_hint=2.5)))
    assert flagged.endswith(" | side effects | cost 2.5")
    assert "cost" not in render_card(card_for(entry(cost_hint=0.0)))


def test_a_long_description_is_cut_to_the_target_at_a_sentence_end() -> None:
    sentences = [
        f"Step {n} of the workflow updates the issue tracker and notifies watchers."
        for n in range(12)
    ]
    card = card_for(entry(description=" ".join(sentences)))
    assert card_tokens(card) <= CARD_TARGET
    assert card.description.endswith("watchers.")
    assert " ".join(sentences).startswith(card.description)


def test_a_description_without_sentence_ends_is_hard_cut_with_an_ellipsis() -> None:
    card = card_for(entry(description="creates issues " * 60))
    assert card.description.endswith(ELLIPSIS)
    assert card_tokens(card) <= CARD_TARGET
    assert card_tokens(card) >= CARD_TARGET - 2  # the budget is used, not thrown away


def test_a_multi_line_description_becomes_one_line() -> None:
    card = card_for(entry(description="Create an issue.\n\n  Labels are\tkept."))
    assert card.description == "Create an issue. Labels are kept."


def test_when_the_rest_of_the_card_is_large_the_hard_cap_still_holds() -> None:
    tags = (
        "aaaa-bbbb-cccc-dddd",
        "ffff-gggg-hhhh-iiii",
        "kkkk-llll-mmmm-nnnn",
        "pppp-qqqq-rrrr-ssss",
        "uuuu-vvvv-wwww-xxxx",
    )
    card = card_for(entry(tags=tags, description="Create an issue in a repository. " * 10))
    bare = card_tokens(msgspec.structs.replace(card, description=""))
    assert CARD_TARGET < bare < CARD_HARD_CAP  # no room under the target: the cap is the budget
    assert card_tokens(card) <= CARD_HARD_CAP
    assert card.description


def test_cards_with_identical_input_are_identical() -> None:
    long = entry(description="Sync every calendar and mailbox. " * 30)
    assert msgspec.json.encode(card_for(long)) == msgspec.json.encode(card_for(long))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"name": "n" * 65}, "at most 64"),
        ({"tags": ("a", "b", "c", "d", "e", "f")}, "at most 5"),
        ({"tags": ("x" * 25,)}, "longer than 24"),
        ({"tags": ('{"type":"object"}',)}, "never carries"),
        ({"tags": ("inputSchema",)}, "never carries"),
        ({"tags": ("https://mcp.local",)}, "never carries"),
        ({"tags": ("_meta",)}, "never carries"),
    ],
)
def test_fields_are_never_silently_dropped_to_fit(changes: dict[str, object], message: str) -> None:
    with pytest.raises(CatalogError, match=message):
        card_for(entry(**changes))


def test_a_card_over_the_hard_cap_before_its_description_is_a_catalog_error() -> None:
    name = "Zq" + "x9Qv" * 15  # 62 characters of rare byte pairs: many tokens
    tool_id = f"github:{name}@{'v9.Q7-x' * 4}"
    big = entry(tool_id=tool_id, name=name, tags=("qz9-xv7-kw3-jj8-pp1-rr2",) * 1)
    assert (
        card_tokens(
            ChoiceCard(
                id=tool_id,
                kind="tool",
                name=name,
                namespace="github",
                description="",
                has_schema=True,
            )
        )
        > CARD_HARD_CAP
    )
    with pytest.raises(CatalogError, match="hard cap"):
        card_for(big)


def test_internal_cards_and_the_breakpoint_are_schema_free_internal_cards() -> None:
    node = internal_card("/github/issues", "issues", "github", "5 tools: create_issue, …")
    assert (node.kind, node.id, node.has_schema) == ("internal", "/github/issues", False)
    assert BREAKPOINT_CARD.id == "__cache_breakpoint__"
    assert BREAKPOINT_CARD.kind == "internal"
    assert count_tokens(render_card(BREAKPOINT_CARD)) <= CARD_TARGET


DESCRIPTIONS = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=1500
) | st.lists(
    st.sampled_from(["Create", "an", "issue", ".", "!", "?", " ", "v2.1", "日本語", "🎉", "\n"]),
    max_size=400,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(
    name=st.from_regex(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}", fullmatch=True),
    description=DESCRIPTIONS,
    tags=st.lists(st.from_regex(r"[a-z][a-z0-9-]{0,23}", fullmatch=True), max_size=5),
    side_effects=st.booleans(),
    cost_hint=st.floats(min_value=0, max_value=1e6, allow_nan=False),
)
def test_any_card_that_builds_is_within_the_hard_cap_and_cut_only_in_its_description(
    name: str, description: str, tags: list[str], side_effects: bool, cost_hint: float
) -> None:
    source = GatewayEntry(
        tool_id=f"github:{name}@1",
        name=name,
        namespace="github",
        description=description,
        tags=tuple(tags),
        side_effects=side_effects,
        cost_hint=cost_hint,
    )
    try:
        card = card_for(source)
    except CatalogError as exc:
        assert "hard cap" in str(exc)
        return
    assert card_tokens(card) <= CARD_HARD_CAP
    assert (card.name, card.tags, card.side_effects, card.cost_hint) == (
        name,
        tuple(sorted(set(tags))),
        side_effects,
        cost_hint,
    )
    flat = " ".join(description.split())
    kept = card.description.removesuffix(ELLIPSIS)
    assert flat.startswith(kept)
    if card.description != flat:
        assert card.description.endswith((ELLIPSIS, ".", "!", "?"))
    assert card_for(source) == card
