"""A route's gateway catalog fitted and checked whole: ids, cards within their token caps, and
the browse tree. The browse index is built on it, and so are the checks at start and at
registration (``broker.gateway.checks``), which is why it stays clear of the ranker and its
numpy: a check needs no ranking.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from broker.gateway.cards import ChoiceCard, GatewayEntry, card_for
from broker.gateway.errors import CatalogError
from broker.gateway.paths import PathNode, build_tree
from broker.tool_id import ToolIdError, parse_tool_id

__all__ = ["FittedCatalog", "fit_catalog"]


@dataclass(frozen=True)
class FittedCatalog:
    """The entries by id, each one's card (same order) and the browse tree over them."""

    ordered: tuple[GatewayEntry, ...]
    cards: tuple[ChoiceCard, ...]
    tree: PathNode


def fit_catalog(entries: Sequence[GatewayEntry]) -> FittedCatalog:
    """Fit every card and check every bound of ``entries``, once.

    Raises:
        CatalogError: two entries share a tool id (§1.5), an id is malformed or disagrees with
            its entry's namespace, a card cannot meet its token cap (§2.3), or two tools share
            a browse path.
    """
    by_id: dict[str, GatewayEntry] = {}
    for entry in entries:
        if entry.tool_id in by_id:
            raise CatalogError(f"two tools share the id {entry.tool_id!r} (seeds/004 §1.5)")
        try:
            namespace = parse_tool_id(entry.tool_id).namespace
        except ToolIdError as exc:
            raise CatalogError(str(exc)) from exc
        if namespace != entry.namespace:
            raise CatalogError(
                f"tool {entry.tool_id!r} is in namespace {namespace!r}, not {entry.namespace!r}"
            )
        by_id[entry.tool_id] = entry
    # Id order, so a stable sort by score alone breaks ties by id (§2.5).
    ordered = tuple(by_id[tool_id] for tool_id in sorted(by_id))
    cards = tuple(card_for(entry) for entry in ordered)
    return FittedCatalog(ordered, cards, build_tree(ordered))
