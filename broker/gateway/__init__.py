"""The gateway surface's core (seeds/004): ChoiceCards, browsing by query and path, and the
session memory that keeps repeated browses cache-stable. Front doors build a
:class:`GatewayIndex` from the tools a route may call and answer ``tool_browse`` with it.

The names below load on first use (PEP 562): ranking and token counting bring numpy, bm25s
and tiktoken, which a broker serving no gateway route should not pay for at start-up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_HOMES = {
    "BrowseMemory": "browsing",
    "BrowseResult": "browsing",
    "GatewayIndex": "browsing",
    "ChoiceCard": "cards",
    "GatewayEntry": "cards",
    "card_for": "cards",
    "CatalogError": "errors",
    "GatewayCode": "errors",
    "GatewayError": "errors",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'broker.gateway' has no attribute {name!r}")
    return getattr(importlib.import_module(f"broker.gateway.{home}"), name)
