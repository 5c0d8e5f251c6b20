"""The gateway surface's core (seeds/004): ChoiceCards, browsing by query and path, and the
session memory that keeps repeated browses cache-stable. Front doors build a
:class:`GatewayIndex` from the tools a route may call and answer ``tool_browse`` with it."""

from broker.gateway.browsing import BrowseMemory, BrowseResult, GatewayIndex
from broker.gateway.cards import ChoiceCard, GatewayEntry, card_for
from broker.gateway.errors import CatalogError, GatewayCode, GatewayError

__all__ = [
    "BrowseMemory",
    "BrowseResult",
    "CatalogError",
    "ChoiceCard",
    "GatewayCode",
    "GatewayEntry",
    "GatewayError",
    "GatewayIndex",
    "card_for",
]
