"""``tool_browse``: cards by query or by path over one route's callable tools (seeds/004 §3, §5).

A :class:`GatewayIndex` is built once from the tools a route may call (never hidden ones: the
front door leaves them out, so they do not exist here) and answers :meth:`GatewayIndex.browse`.
Query answers rank by BM25 and order by score, then id (§2.5); path answers list a node's children
by id. With a :class:`BrowseMemory` the answer is cache-stable instead (§5): cards seen before in
the session come first, by id and byte for byte as first shown, then the breakpoint card, then new
cards by id.

Bounds a model can hit, each an ``ARGS_INVALID`` (or ``PATH_INVALID``) naming its ``field``: a query
is 1 to :data:`MAX_QUERY_CHARS` characters and not all whitespace; ``limit`` is 1 to
:data:`MAX_LIMIT`. As §3.1 puts it, a query returns the top ``limit`` cards and a path returns the
children of its node: all of them, up to :data:`MAX_LIMIT` (the tree keeps nodes small, see
:mod:`broker.gateway.paths`). Either way ``total`` says how many there were, and so does the
rendered preamble, so nothing is left out unannounced.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import msgspec
import numpy as np

from broker.gateway.cards import (
    BREAKPOINT_CARD,
    ChoiceCard,
    GatewayEntry,
    internal_card,
    render_card,
)
from broker.gateway.errors import GatewayError
from broker.gateway.fitting import fit_catalog
from broker.gateway.paths import PathNode, parse_path
from broker.gateway.ranking import LexicalRanker

__all__ = [
    "MAX_LIMIT",
    "MAX_QUERY_CHARS",
    "MAX_REMEMBERED",
    "BrowseMemory",
    "BrowseResult",
    "GatewayIndex",
]

MAX_LIMIT = 50
MAX_QUERY_CHARS = 512
MAX_REMEMBERED = 512
SCORE_DIGITS = 4
_LISTED_NAMES = 8


class BrowseResult(msgspec.Struct, frozen=True):
    """One ``tool_browse`` answer: ``cards`` in wire order (the breakpoint card included), and how
    many cards the query or node had before ``limit`` (``total``)."""

    cards: tuple[ChoiceCard, ...]
    total: int = 0
    mode: Literal["query", "path"] = "query"
    cache_stable: bool = False

    def preamble(self) -> str:
        """The line before the cards: what they are and what to do with them. It never quotes the
        query or path, so its size is bounded (32 tokens, §2.3) whatever the model sent."""
        shown = sum(card.id != BREAKPOINT_CARD.id for card in self.cards)
        if self.mode == "query" and not shown:
            return 'No tool matches this query: try other words, or browse path "/".'
        if self.cache_stable:
            order = "seen first, then new, by id"
        elif self.mode == "query":
            order = "best first"
        else:
            order = "by id"
        what = "matching cards" if self.mode == "query" else "cards here"
        return (
            f"{shown} of {self.total} {what}, {order}. "
            "tool_execute takes a tool id; an internal id is a path."
        )

    def render(self) -> str:
        """The prompt form the model reads: the preamble, then one line per card (§2.3)."""
        return "\n".join([self.preamble(), *(render_card(card) for card in self.cards)])

    def payload(self) -> dict[str, Any]:
        """The JSON-ready answer: ``text`` is what a model reads (:meth:`render`); ``cards`` carry
        the same cards as data, with their ``score`` (§2.1: never rendered, always in JSON)."""
        return {
            "text": self.render(),
            "cards": msgspec.json.decode(msgspec.json.encode(self.cards)),
            "total": self.total,
        }


class _MemoryState(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    version: int
    seen: list[tuple[str, ChoiceCard | None]]


class BrowseMemory:
    """What one session has seen, for cache-stable browsing (§5.1).

    Holds each seen card id with the card as first shown (``None`` while a tool has only been
    hydrated, §5.1.1: its content freezes on its first browse). :meth:`GatewayIndex.browse` updates
    it in place; hydration goes through :meth:`note_hydrated`, and only after it succeeded (§5.5).
    At most :data:`MAX_REMEMBERED` ids are kept: past that, newly seen cards are shown as new every
    time, which costs cache hits, never correctness.
    """

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: dict[str, ChoiceCard | None] = {}

    def __len__(self) -> int:
        return len(self._seen)

    def __contains__(self, card_id: object) -> bool:
        return card_id in self._seen

    def note_hydrated(self, tool_id: str) -> None:
        """Record a successful ``tool_hydrate(tool_id)``."""
        if tool_id not in self._seen and len(self._seen) < MAX_REMEMBERED:
            self._seen[tool_id] = None

    def arrange(self, cards: Sequence[ChoiceCard]) -> tuple[ChoiceCard, ...]:
        """``cards`` in the §5.1 order, remembering the new ones."""
        seen: list[ChoiceCard] = []
        new: list[ChoiceCard] = []
        for card in cards:
            if card.id in self._seen:
                frozen = self._seen[card.id]
                if frozen is None:
                    self._seen[card.id] = frozen = card
                seen.append(frozen)
            else:
                new.append(card)
        seen.sort(key=lambda card: card.id)
        new.sort(key=lambda card: card.id)
        for card in new:
            if len(self._seen) >= MAX_REMEMBERED:
                break
            self._seen[card.id] = card
        marker = (BREAKPOINT_CARD,) if seen and new else ()
        return (*seen, *marker, *new)

    def dumps(self) -> bytes:
        """The memory as bytes for the session store (msgpack)."""
        return msgspec.msgpack.encode(_MemoryState(1, list(self._seen.items())))

    @classmethod
    def loads(cls, data: bytes) -> BrowseMemory:
        """The memory :meth:`dumps` wrote.

        Raises:
            ValueError: ``data`` is not a browse memory of this version.
        """
        try:
            state = msgspec.msgpack.decode(data, type=_MemoryState)
        except msgspec.MsgspecError as exc:
            raise ValueError(f"not a browse memory: {exc}") from exc
        if state.version != 1 or len(state.seen) > MAX_REMEMBERED:
            raise ValueError("not a browse memory of version 1 within its size bound")
        memory = cls()
        memory._seen = dict(state.seen)
        return memory


class GatewayIndex:
    """The browsable catalog of one route: tool cards, the BM25 index and the path tree."""

    __slots__ = ("_by_id", "_cards", "_entries", "_internal", "_ranker", "_tree")

    def __init__(
        self,
        entries: dict[str, GatewayEntry],
        cards: tuple[ChoiceCard, ...],
        ranker: LexicalRanker,
        tree: PathNode,
        internal: dict[str, ChoiceCard],
    ) -> None:
        self._entries = entries
        self._cards = cards
        self._by_id = {card.id: card for card in cards}
        self._ranker = ranker
        self._tree = tree
        self._internal = internal

    @classmethod
    def build(cls, entries: Sequence[GatewayEntry]) -> GatewayIndex:
        """Index ``entries``: every card is fitted and every bound checked here, once.

        Raises:
            CatalogError: as :func:`~broker.gateway.fitting.fit_catalog` says.
        """
        fitted = fit_catalog(entries)
        by_id = {entry.tool_id: entry for entry in fitted.ordered}
        return cls(
            by_id,
            fitted.cards,
            LexicalRanker(fitted.ordered),
            fitted.tree,
            _internal_cards(fitted.tree, by_id),
        )

    def __len__(self) -> int:
        return len(self._cards)

    def entry(self, tool_id: str) -> GatewayEntry | None:
        """The tool ``tool_id`` names, if this route may call it."""
        return self._entries.get(tool_id)

    def card(self, tool_id: str) -> ChoiceCard | None:
        """The tool's card as a browse would show it (without a score)."""
        return self._by_id.get(tool_id)

    def cards(self) -> tuple[ChoiceCard, ...]:
        """Every tool's card, by id: the whole catalog, as the proxy's discovery channel lists it
        (§4.1, whose stripped ``tools/list`` entries take the card's fitted description)."""
        return self._cards

    def browse(
        self,
        *,
        query: str | None = None,
        path: str | None = None,
        limit: int = 10,
        memory: BrowseMemory | None = None,
    ) -> BrowseResult:
        """Cards for exactly one of ``query`` or ``path`` (§3.1).

        Raises:
            GatewayError: ``ARGS_INVALID`` for both, neither, a bad query or limit;
                ``PATH_INVALID`` / ``PATH_NOT_FOUND`` for paths (§3.4).
        """
        if (query is None) == (path is None):
            which = "both" if query is not None else "neither"
            raise GatewayError(
                "ARGS_INVALID",
                f"tool_browse takes exactly one of query or path; got {which}",
                path=path if isinstance(path, str) else "",
                details={"field": "", "pointer": "", "reason": which},
            )
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise GatewayError(
                "ARGS_INVALID",
                f"limit is an integer from 1 to {MAX_LIMIT}",
                details={"field": "limit", "pointer": "/limit", "reason": "out_of_range"},
            )
        if query is not None:
            cards, total = self._by_query(query, limit)
            mode: Literal["query", "path"] = "query"
        else:
            assert path is not None  # noqa: S101 - exactly one of the two, checked above
            cards, total = self._by_path(path)
            mode = "path"
        if memory is None:
            return BrowseResult(tuple(cards), total, mode)
        return BrowseResult(memory.arrange(cards), total, mode, cache_stable=True)

    def _by_query(self, query: str, limit: int) -> tuple[list[ChoiceCard], int]:
        if not isinstance(query, str):
            raise GatewayError(
                "ARGS_INVALID",
                "query is a string",
                details={"field": "query", "pointer": "/query", "reason": "type"},
            )
        if not query.strip():
            raise GatewayError(
                "ARGS_INVALID",
                "query has words, not only whitespace",
                details={"field": "query", "pointer": "/query", "reason": "empty"},
            )
        if len(query) > MAX_QUERY_CHARS:
            raise GatewayError(
                "ARGS_INVALID",
                f"query is at most {MAX_QUERY_CHARS} characters, not {len(query)}",
                details={
                    "field": "query",
                    "pointer": "/query",
                    "reason": "too_long",
                    "max_length": MAX_QUERY_CHARS,
                },
            )
        scores = np.round(self._ranker.scores(query).astype(np.float64), SCORE_DIGITS)
        matching = np.flatnonzero(scores > 0)
        # Index order is id order, so a stable sort on the negated score breaks ties by id.
        ranked = matching[np.argsort(-scores[matching], kind="stable")][:limit]
        cards = [msgspec.structs.replace(self._cards[i], score=float(scores[i])) for i in ranked]
        return cards, int(matching.size)

    def _by_path(self, path: str) -> tuple[list[ChoiceCard], int]:
        if not isinstance(path, str):
            raise GatewayError(
                "ARGS_INVALID",
                "path is a string",
                details={"field": "path", "pointer": "/path", "reason": "type"},
            )
        node = self._tree
        for depth, segment in enumerate(parse_path(path)):
            child = node.children.get(segment)
            if child is None:
                raise GatewayError(
                    "PATH_NOT_FOUND",
                    f"no node {segment!r} under {node.path}",
                    path=path,
                    details={"field": "path", "pointer": "/path", "depth": depth + 1},
                )
            node = child
        if node.tool_id is not None:
            card = self.card(node.tool_id)
            assert card is not None  # noqa: S101 - the tree holds only indexed tools
            return [card], 1
        cards = sorted((self._card_of(child) for child in node.children.values()), key=_by_id)
        return cards[:MAX_LIMIT], len(cards)

    def _card_of(self, node: PathNode) -> ChoiceCard:
        if node.tool_id is not None:
            card = self.card(node.tool_id)
            assert card is not None  # noqa: S101 - the tree holds only indexed tools
            return card
        return self._internal[node.path]


def _by_id(card: ChoiceCard) -> str:
    return card.id


def _internal_cards(tree: PathNode, entries: dict[str, GatewayEntry]) -> dict[str, ChoiceCard]:
    cards: dict[str, ChoiceCard] = {}
    pending = list(tree.children.values())
    while pending:
        node = pending.pop()
        if node.tool_id is not None:
            continue
        namespace = node.path.split("/")[1]
        tools = node.tool_ids()
        groups = [child for child in node.children.values() if child.tool_id is None]
        if groups:
            names = [child.segment for child in groups]
            summary = f"{len(tools)} tools in {len(groups)} groups: "
        else:
            names = sorted(entries[tool_id].name for tool_id in tools)
            summary = f"{len(tools)} tools: "
        shown = ", ".join(names[:_LISTED_NAMES]) + (", …" if len(names) > _LISTED_NAMES else "")
        cards[node.path] = internal_card(node.path, node.segment, namespace, summary + shown)
        pending.extend(node.children.values())
    return cards
