"""tool_browse over a generated catalog of 1,000 tools: query and path answers, their errors in the
§3.4 shape, the token bounds of §2.3 and cache-stable browsing (§5), all per seeds/004."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from broker.gateway import (
    BrowseMemory,
    BrowseResult,
    CatalogError,
    ChoiceCard,
    GatewayEntry,
    GatewayError,
    GatewayIndex,
)
from broker.gateway.browsing import MAX_LIMIT, MAX_QUERY_CHARS, MAX_REMEMBERED
from broker.gateway.cards import BREAKPOINT_ID, CARD_HARD_CAP, CARD_TARGET, card_tokens, render_card
from broker.gateway.tokens import count_tokens
from tests.unit.gateway_vectors.catalog import NAMESPACES, generated_entries

PREAMBLE_CAP = 32


@pytest.fixture(scope="module")
def entries() -> list[GatewayEntry]:
    return generated_entries()


@pytest.fixture(scope="module")
def index(entries: list[GatewayEntry]) -> GatewayIndex:
    return GatewayIndex.build(entries)


def error_of(index: GatewayIndex, **arguments: Any) -> dict[str, Any]:
    with pytest.raises(GatewayError) as caught:
        index.browse(**arguments)
    payload = caught.value.payload()
    assert set(payload) == {"error", "message", "path", "details"}  # §3.4, always all four
    assert payload["message"]
    json.dumps(payload)
    return payload


# --- the catalog -------------------------------------------------------------------------------


def test_the_index_holds_every_tool(index: GatewayIndex, entries: list[GatewayEntry]) -> None:
    assert len(index) == 1000
    assert index.entry(entries[0].tool_id) == entries[0]
    assert index.entry("github:no_such_tool#00000000") is None


def test_two_tools_with_one_id_are_a_catalog_error(entries: list[GatewayEntry]) -> None:
    with pytest.raises(CatalogError, match="share the id"):
        GatewayIndex.build([*entries[:3], entries[1]])


@pytest.mark.parametrize(
    ("tool_id", "namespace", "message"),
    [
        ("github:create_issue", "github", "neither @version nor #hash8"),
        ("GitHub:create_issue@1", "github", "not a tool id"),
        ("gitlab:create_issue@1", "github", "in namespace 'gitlab'"),
    ],
)
def test_an_id_that_is_malformed_or_disagrees_with_its_namespace_is_refused(
    tool_id: str, namespace: str, message: str
) -> None:
    bad = GatewayEntry(tool_id=tool_id, name="create_issue", namespace=namespace, description="x")
    with pytest.raises(CatalogError, match=message):
        GatewayIndex.build([bad])


def test_an_empty_catalog_browses_to_nothing() -> None:
    empty = GatewayIndex.build([])
    assert empty.browse(query="anything").cards == ()
    assert empty.browse(path="/").cards == ()
    assert error_of(empty, path="/github")["error"] == "PATH_NOT_FOUND"


def test_tools_whose_words_are_all_stop_words_are_still_indexed() -> None:
    few = GatewayIndex.build(
        [
            GatewayEntry("mcp:a@1", "a", "mcp", "the"),
            GatewayEntry("mcp:the_it@1", "the_it", "mcp", ""),
            GatewayEntry("ops:restart@1", "restart", "ops", "Restart a service."),
        ]
    )
    assert [card.id for card in few.browse(query="restart the service").cards] == ["ops:restart@1"]
    assert [card.id for card in few.browse(query="mcp").cards] == ["mcp:a@1", "mcp:the_it@1"]
    assert few.browse(query="the it a").cards == ()


# --- query browsing ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected_first"),
    [
        ("kubernetes pod", "k8s:create_pod"),
        ("merge request pipeline", "gitlab:create_merge_request"),
        ("refund", "stripe:create_refund"),
        ("send a slack message", "slack:create_message"),
        ("timeOff", "hr:create_time_off"),  # camelCase meets the snake_case name
        ("calendar event attendees", "calendar:create_attendee"),
    ],
)
def test_a_query_ranks_the_tools_it_names_first(
    index: GatewayIndex, query: str, expected_first: str
) -> None:
    result = index.browse(query=query, limit=4)
    assert result.cards[0].id.startswith(expected_first + "#")
    namespace, _, name = expected_first.partition(":")
    thing = name.removeprefix("create_")
    assert all(card.namespace == namespace and thing in card.name for card in result.cards)


def test_query_answers_order_by_score_then_id(index: GatewayIndex) -> None:
    for query in ("delete", "issue", "list every file", "dashboard metric alert", "pipeline"):
        result = index.browse(query=query, limit=MAX_LIMIT)
        keys = [(-(card.score or 0.0), card.id) for card in result.cards]
        assert keys == sorted(keys), query
        assert all(card.score is not None and card.score > 0 for card in result.cards)
        assert all(card.score == round(card.score, 4) for card in result.cards if card.score)
    # "delete" ties across 20 namespaces: the tie-break is the id, so the first ten are by id.
    ties = index.browse(query="delete", limit=10).cards
    assert len({card.score for card in ties}) == 1
    assert [card.id for card in ties] == sorted(card.id for card in ties)


def test_limit_and_total(index: GatewayIndex) -> None:
    result = index.browse(query="issue", limit=3)
    assert len(result.cards) == 3
    assert result.total == 15  # github, gitlab and jira issues, five verbs each
    assert result.preamble().startswith("3 of 15 matching cards, best first.")
    assert len(index.browse(query="issue").cards) == 10  # the default limit


@pytest.mark.parametrize("query", ["zebra unicorn", "the of and", "!!!", "日本語"])
def test_a_query_that_matches_nothing_says_so(index: GatewayIndex, query: str) -> None:
    result = index.browse(query=query)
    assert (result.cards, result.total) == ((), 0)
    assert "No tool matches" in result.render()


def test_the_same_query_gives_the_same_bytes(entries: list[GatewayEntry]) -> None:
    first = GatewayIndex.build(entries).browse(query="update a customer invoice")
    again = GatewayIndex.build(list(reversed(entries))).browse(query="update a customer invoice")
    assert msgspec.json.encode(first) == msgspec.json.encode(again)


# --- path browsing -----------------------------------------------------------------------------


def test_the_root_lists_one_internal_card_per_namespace(index: GatewayIndex) -> None:
    result = index.browse(path="/")
    assert [card.id for card in result.cards] == [f"/{ns}" for ns in sorted(NAMESPACES)]
    assert result.total == 20
    assert all(card.kind == "internal" and not card.has_schema for card in result.cards)
    assert result.cards[0].description.startswith("50 tools in 10 groups: ")
    assert index.browse(path="/*") == result


def test_a_namespace_lists_its_clusters_and_a_cluster_its_tools(index: GatewayIndex) -> None:
    github = index.browse(path="/github")
    assert [card.id for card in github.cards] == [
        f"/github/{cluster}"
        for cluster in sorted(
            (
                "issue",
                "pull_request",
                "repository",
                "branch",
                "commit",
                "release",
                "label",
                "milestone",
                "webhook",
                "gist",
            )
        )
    ]
    issues = index.browse(path="/github/issue")
    assert [card.name for card in issues.cards] == [
        "create_issue",
        "delete_issue",
        "get_issue",
        "list_issues",
        "update_issue",
    ]
    assert all(card.kind == "tool" and card.score is None for card in issues.cards)
    assert index.browse(path="/github/issue/*") == issues
    leaf = index.browse(path="/github/issue/create_issue")
    assert [card.name for card in leaf.cards] == ["create_issue"]
    assert leaf.total == 1
    assert index.browse(path="/github/issue/create_issue/*") == leaf  # "*" is the node itself


def test_walking_the_tree_reaches_every_tool_exactly_once(
    index: GatewayIndex, entries: list[GatewayEntry]
) -> None:
    found: list[str] = []
    pending = ["/"]
    while pending:
        result = index.browse(path=pending.pop())
        assert len(result.cards) == result.total  # no node of this catalog is over MAX_LIMIT
        for card in result.cards:
            if card.kind == "internal":
                pending.append(card.id)
            else:
                found.append(card.id)
    assert sorted(found) == sorted(entry.tool_id for entry in entries)


def test_a_node_over_the_listing_bound_shows_the_first_by_id_and_says_how_many() -> None:
    # Sixty tools that all act on a file: one object, so the namespace is not split.
    wide = GatewayIndex.build(
        [GatewayEntry(f"files:op{n:02}_file@1", f"op{n:02}_file", "files", "") for n in range(60)]
    )
    result = wide.browse(path="/files")
    assert (len(result.cards), result.total) == (MAX_LIMIT, 60)
    assert [card.id for card in result.cards] == [f"files:op{n:02}_file@1" for n in range(50)]
    assert result.preamble().startswith(f"{MAX_LIMIT} of 60 cards here, by id.")


@pytest.mark.parametrize(
    ("path", "depth"),
    [
        ("/gitea", 1),
        ("/github/issues", 2),
        ("/github/issue/close_issue", 3),
        ("/github/issue/create_issue/comments", 4),
    ],
)
def test_a_well_formed_path_that_is_not_there_is_path_not_found(
    index: GatewayIndex, path: str, depth: int
) -> None:
    payload = error_of(index, path=path)
    assert payload["error"] == "PATH_NOT_FOUND"
    assert payload["path"] == path
    assert payload["details"] == {"field": "path", "pointer": "/path", "depth": depth}


@pytest.mark.parametrize("path", ["/github/", "//", "/GitHub", "github", "/9lives", "/*/issue"])
def test_a_malformed_path_is_path_invalid(index: GatewayIndex, path: str) -> None:
    payload = error_of(index, path=path)
    assert (payload["error"], payload["path"]) == ("PATH_INVALID", path)


# --- bad arguments -----------------------------------------------------------------------------


def test_both_query_and_path_or_neither_is_args_invalid(index: GatewayIndex) -> None:
    both = error_of(index, query="issue", path="/github")
    assert both["error"] == "ARGS_INVALID"
    assert both["details"] == {"field": "", "pointer": "", "reason": "both"}
    assert both["path"] == "/github"  # §3.4: the offending path, when there is one
    neither = error_of(index)
    assert (neither["error"], neither["details"]["reason"], neither["path"]) == (
        "ARGS_INVALID",
        "neither",
        "",
    )


@pytest.mark.parametrize(
    ("query", "reason"),
    [("", "empty"), ("   \n\t", "empty"), ("x" * (MAX_QUERY_CHARS + 1), "too_long"), (7, "type")],
)
def test_a_bad_query_is_args_invalid_pointing_at_query(
    index: GatewayIndex, query: object, reason: str
) -> None:
    payload = error_of(index, query=query)
    assert payload["error"] == "ARGS_INVALID"
    assert payload["details"]["field"] == "query"
    assert payload["details"]["pointer"] == "/query"
    assert payload["details"]["reason"] == reason


def test_a_query_of_exactly_the_bound_is_accepted(index: GatewayIndex) -> None:
    assert index.browse(query=("issue " * 200)[:MAX_QUERY_CHARS]).cards


@pytest.mark.parametrize("limit", [0, -1, MAX_LIMIT + 1, True, "5", 2.0])
def test_a_bad_limit_is_args_invalid(index: GatewayIndex, limit: object) -> None:
    payload = error_of(index, query="issue", limit=limit)
    assert (payload["error"], payload["details"]["field"]) == ("ARGS_INVALID", "limit")


def test_a_path_that_is_not_a_string_is_args_invalid(index: GatewayIndex) -> None:
    payload = error_of(index, path=["github"])
    assert (payload["error"], payload["details"]["field"]) == ("ARGS_INVALID", "path")


# --- token bounds (§2.3) -----------------------------------------------------------------------


def test_every_card_of_the_catalog_is_within_the_target(
    index: GatewayIndex, entries: list[GatewayEntry]
) -> None:
    cards = [index.card(entry.tool_id) for entry in entries]
    assert all(card is not None and card_tokens(card) <= CARD_TARGET for card in cards)
    # The generated catalog has long descriptions: the cuts were exercised, not avoided.
    cut = [card for card in cards if card is not None and card.description.endswith("…")]
    assert len(cut) >= 20


def test_every_internal_card_is_within_the_cap(index: GatewayIndex) -> None:
    pending = ["/"]
    while pending:
        for card in index.browse(path=pending.pop()).cards:
            assert card_tokens(card) <= CARD_HARD_CAP
            if card.kind == "internal":
                pending.append(card.id)


QUERIES = [
    *(thing.replace("_", " ") for _, things in NAMESPACES.values() for thing in things[:3]),
    "create",
    "list everything newest first with paging",
    "delete permanently cannot be undone",
]


@pytest.mark.parametrize("limit", [1, 10, MAX_LIMIT])
def test_a_rendered_answer_is_within_its_bound(index: GatewayIndex, limit: int) -> None:
    for query in QUERIES:
        result = index.browse(query=query, limit=limit)
        rendered = count_tokens(result.render())
        assert rendered <= PREAMBLE_CAP + CARD_HARD_CAP * len(result.cards), query
        assert count_tokens(result.preamble()) <= PREAMBLE_CAP


def test_a_ten_card_answer_is_within_32_plus_10_times_80_tokens(index: GatewayIndex) -> None:
    result = index.browse(query="create a new record", limit=10)
    assert len(result.cards) == 10
    assert count_tokens(result.render()) <= PREAMBLE_CAP + 10 * CARD_HARD_CAP


@pytest.mark.parametrize("mode", ["query", "path"])
@pytest.mark.parametrize("cache_stable", [False, True])
def test_the_preamble_stays_within_32_tokens_at_its_largest(mode: str, cache_stable: bool) -> None:
    card = ChoiceCard(
        id="a:b@1", kind="tool", name="b", namespace="a", description="", has_schema=False
    )
    result = BrowseResult((card,) * MAX_LIMIT, 123_456_789, mode, cache_stable)  # type: ignore[arg-type]
    assert count_tokens(result.preamble()) <= PREAMBLE_CAP


def test_the_payload_is_json_with_the_rendered_text_and_the_scored_cards(
    index: GatewayIndex,
) -> None:
    result = index.browse(query="refund", limit=2)
    payload = json.loads(json.dumps(result.payload()))
    assert payload["text"] == result.render()
    assert payload["total"] == 5
    assert [card["id"] for card in payload["cards"]] == [card.id for card in result.cards]
    assert all(isinstance(card["score"], float) for card in payload["cards"])
    assert all("score" not in line for line in payload["text"].splitlines())
    path_payload = index.browse(path="/stripe/refund").payload()
    assert all("score" not in card for card in path_payload["cards"])


# --- cache-stable browsing (§5) ----------------------------------------------------------------


def ids(result: BrowseResult) -> list[str]:
    return [card.id for card in result.cards]


def test_the_first_browse_of_a_session_has_no_marker(index: GatewayIndex) -> None:
    memory = BrowseMemory()
    result = index.browse(query="refund", limit=5, memory=memory)
    assert BREAKPOINT_ID not in ids(result)
    assert ids(result) == sorted(ids(result))  # all new: by id
    assert result.cache_stable
    assert len(memory) == 5


def test_seen_cards_come_first_then_the_marker_then_new_ones(index: GatewayIndex) -> None:
    memory = BrowseMemory()
    first = index.browse(query="stripe refund", limit=3, memory=memory)
    second = index.browse(query="refund dispute", limit=6, memory=memory)
    seen = {card.id for card in first.cards}
    wire = ids(second)
    cut = wire.index(BREAKPOINT_ID)
    prefix, suffix = wire[:cut], wire[cut + 1 :]
    assert prefix and suffix
    assert set(prefix) <= seen and not set(suffix) & seen
    assert prefix == sorted(prefix) and suffix == sorted(suffix)
    assert wire.count(BREAKPOINT_ID) == 1
    marker = second.cards[cut]
    assert (marker.kind, marker.id) == ("internal", BREAKPOINT_ID)
    # The same set of cards as a plain browse: only the order changed.
    plain = index.browse(query="refund dispute", limit=6)
    assert sorted(wire[:cut] + wire[cut + 1 :]) == sorted(ids(plain))


def test_seen_cards_keep_their_first_bytes_and_score(index: GatewayIndex) -> None:
    memory = BrowseMemory()
    first = {card.id: card for card in index.browse(query="refund", limit=5, memory=memory).cards}
    later = index.browse(query="stripe refund charge dispute payout", limit=20, memory=memory)
    fresh = {
        card.id: card
        for card in index.browse(query="stripe refund charge dispute payout", limit=20).cards
    }
    reused = [card for card in later.cards if card.id in first]
    assert reused
    for card in reused:
        assert msgspec.json.encode(card) == msgspec.json.encode(first[card.id])
        assert render_card(card) == render_card(first[card.id])
    # The router would score them differently now; the frozen score is what §5.1.4 keeps.
    assert any(fresh[card.id].score != card.score for card in reused)
    # §5.2: the score is on every tool card, so rank can be read back from it.
    assert all(card.score is not None for card in later.cards if card.id != BREAKPOINT_ID)


def test_an_all_seen_answer_has_no_marker_and_is_byte_stable(index: GatewayIndex) -> None:
    memory = BrowseMemory()
    first = index.browse(query="refund", limit=5, memory=memory)
    again = index.browse(query="refund", limit=5, memory=memory)
    assert msgspec.json.encode(again.cards) == msgspec.json.encode(first.cards)
    subset = index.browse(query="refund", limit=2, memory=memory)
    assert BREAKPOINT_ID not in ids(subset)


def test_an_all_new_later_answer_has_no_marker(index: GatewayIndex) -> None:
    memory = BrowseMemory()
    index.browse(query="refund", limit=5, memory=memory)
    other = index.browse(query="kubernetes pod", limit=5, memory=memory)
    assert BREAKPOINT_ID not in ids(other)
    assert ids(other) == sorted(ids(other))


def test_path_browses_share_the_memory(index: GatewayIndex) -> None:
    memory = BrowseMemory()
    index.browse(path="/stripe/refund", memory=memory)
    result = index.browse(query="stripe refund", limit=8, memory=memory)
    cut = ids(result).index(BREAKPOINT_ID)
    assert all("refund" in card_id for card_id in ids(result)[:cut])
    # Seen on a path first, the card keeps its path form: no score (§5.1.4 freezes the content).
    assert all(card.score is None for card in result.cards[:cut])


def test_a_hydrated_tool_counts_as_seen_and_freezes_on_its_first_browse(
    index: GatewayIndex,
) -> None:
    memory = BrowseMemory()
    refund = next(card.id for card in index.browse(query="create refund", limit=1).cards)
    memory.note_hydrated(refund)
    first = index.browse(query="refund", limit=3, memory=memory)
    assert ids(first)[0] == refund and ids(first)[1] == BREAKPOINT_ID
    frozen = first.cards[0]
    assert frozen.score is not None
    later = index.browse(query="create a new refund in stripe", limit=3, memory=memory)
    assert msgspec.json.encode(later.cards[0]) == msgspec.json.encode(frozen)


def test_the_memory_round_trips_through_bytes(index: GatewayIndex) -> None:
    live = BrowseMemory()
    index.browse(query="refund", limit=4, memory=live)
    live.note_hydrated("stripe:get_dispute#00000000")
    stored = BrowseMemory.loads(live.dumps())
    assert len(stored) == len(live) == 5
    assert stored.dumps() == live.dumps()
    a = index.browse(query="refund dispute", limit=8, memory=live)
    b = index.browse(query="refund dispute", limit=8, memory=stored)
    assert msgspec.json.encode(a) == msgspec.json.encode(b)
    assert len(live.dumps()) < 4096  # small enough to keep per session


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not msgpack at all",
        msgspec.msgpack.encode({"version": 2, "seen": []}),
        msgspec.msgpack.encode({"version": 1, "seen": [["a:b@1", {"id": "a:b@1"}]]}),
        msgspec.msgpack.encode({"version": 1, "seen": [], "extra": 1}),
        msgspec.msgpack.encode(
            {"version": 1, "seen": [[f"a:b{n}@1", None] for n in range(MAX_REMEMBERED + 1)]}
        ),
    ],
)
def test_bytes_that_are_not_a_memory_are_refused(data: bytes) -> None:
    with pytest.raises(ValueError, match="not a browse memory"):
        BrowseMemory.loads(data)


def test_the_memory_is_bounded(index: GatewayIndex) -> None:
    memory = BrowseMemory()
    for _, things in NAMESPACES.values():
        for thing in things:
            index.browse(query=thing.replace("_", " "), limit=MAX_LIMIT, memory=memory)
    assert len(memory) == MAX_REMEMBERED
    memory.note_hydrated("zz:never_seen@1")
    assert "zz:never_seen@1" not in memory


def test_a_remembered_tool_the_route_no_longer_offers_never_reappears(
    entries: list[GatewayEntry],
) -> None:
    memory = BrowseMemory()
    full = GatewayIndex.build(entries)
    shown = ids(full.browse(query="refund", limit=5, memory=memory))
    hidden = shown[0]
    narrower = GatewayIndex.build([entry for entry in entries if entry.tool_id != hidden])
    result = narrower.browse(query="refund", limit=5, memory=memory)
    assert hidden not in ids(result)
    assert BREAKPOINT_ID not in ids(result)  # nothing new joined, so still no boundary
