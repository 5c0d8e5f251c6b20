"""ChoiceCards: the schema-free face of one tool or one browse node (seeds/004 §2).

A card carries only the fields §2.1 permits, under §2.1's names (so the id member is ``id``, not
``tool_id``), and never a schema, example or metadata map (§2.2). Its *rendered* form, one line
the model reads, is what the §2.3 token bounds apply to; the JSON form adds ``score``, which is
never rendered. :func:`card_for` builds a tool's card and is where the budget is enforced: only the
description is ever shortened (§2.4), anything else that does not fit is a :class:`CatalogError`.

``GatewayEntry`` carries ``side_effects`` and ``cost_hint`` because §2.1 permits both on the card.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import msgspec

from broker.gateway.errors import CatalogError
from broker.gateway.tokens import count_tokens, truncate_description

__all__ = [
    "BREAKPOINT_CARD",
    "BREAKPOINT_ID",
    "CARD_HARD_CAP",
    "CARD_TARGET",
    "MAX_NAME_CHARS",
    "MAX_TAGS",
    "MAX_TAG_CHARS",
    "CardKind",
    "ChoiceCard",
    "GatewayEntry",
    "card_for",
    "card_tokens",
    "internal_card",
    "render_card",
]

CARD_TARGET = 60
CARD_HARD_CAP = 80
MAX_NAME_CHARS = 64
MAX_TAGS = 5
MAX_TAG_CHARS = 24
BREAKPOINT_ID = "__cache_breakpoint__"

CardKind = Literal["tool", "agent", "skill", "internal"]

_WHITESPACE = re.compile(r"\s+")
# What §2.2 bans "in any form, including stringified or nested inside tags": structure, the banned
# field names, and server addresses.
_SMUGGLED = re.compile(
    r"[{}\[\]]|://|args_schema|input_?schema|output_?schema|annotations|_meta", re.IGNORECASE
)


class GatewayEntry(msgspec.Struct, frozen=True):
    """One browsable tool as the route may call it; the front door builds these from its catalog.

    ``input_schema`` is kept for hydration and never reaches a card (only ``has_schema`` does).
    """

    tool_id: str
    name: str
    namespace: str
    description: str
    tags: tuple[str, ...] = ()
    input_schema: dict[str, Any] = msgspec.field(default_factory=dict)
    side_effects: bool = False
    cost_hint: float = 0.0


class ChoiceCard(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Exactly the §2.1 fields. ``kind``, ``namespace`` and ``has_schema`` are always serialised;
    ``tags``, ``score``, ``cost_hint`` and ``side_effects`` only when they say something."""

    id: str
    kind: CardKind
    name: str
    namespace: str
    description: str
    has_schema: bool
    tags: tuple[str, ...] = ()
    score: float | None = None
    cost_hint: float = 0.0
    side_effects: bool = False


BREAKPOINT_CARD = ChoiceCard(
    id=BREAKPOINT_ID,
    kind="internal",
    name="cache breakpoint",
    namespace="",
    description="",
    has_schema=False,
)
"""The §5.1 marker between the already-seen prefix of a cache-stable browse and its new cards."""


def render_card(card: ChoiceCard) -> str:
    """The one line a model reads for ``card``: id, kind, name, description, then tags, side
    effects and cost only when present (§2.1). ``namespace`` is the id's prefix and ``has_schema``
    and ``score`` stay in the JSON form, so neither costs prompt tokens."""
    parts = [card.id, card.kind, card.name]
    if card.description:
        parts.append(card.description)
    if card.tags:
        parts.append("tags: " + ", ".join(card.tags))
    if card.side_effects:
        parts.append("side effects")
    if card.cost_hint > 0:
        parts.append(f"cost {card.cost_hint:g}")
    return "- " + " | ".join(parts)


def card_tokens(card: ChoiceCard) -> int:
    """The card's size in ``cl100k_base`` tokens, counted on its rendered line."""
    return count_tokens(render_card(card))


def card_for(entry: GatewayEntry) -> ChoiceCard:
    """The tool card of ``entry``, its description fitted to the §2.3 budget.

    Raises:
        CatalogError: the name or tags break §2.1's limits, or the card is over the hard cap even
            with its description cut to one token.
    """
    if len(entry.name) > MAX_NAME_CHARS:
        raise CatalogError(
            f"tool {entry.tool_id!r}: the name is {len(entry.name)} characters, "
            f"a card's is at most {MAX_NAME_CHARS}"
        )
    card = ChoiceCard(
        id=entry.tool_id,
        kind="tool",
        name=entry.name,
        namespace=entry.namespace,
        description="",
        has_schema=bool(entry.input_schema),
        tags=_card_tags(entry),
        cost_hint=entry.cost_hint,
        side_effects=entry.side_effects,
    )
    return fit_description(card, entry.description)


def internal_card(path: str, name: str, namespace: str, description: str) -> ChoiceCard:
    """A browse node's card (§3.3): its id is the path a model passes back to ``tool_browse``."""
    card = ChoiceCard(
        id=path, kind="internal", name=name, namespace=namespace, description="", has_schema=False
    )
    return fit_description(card, description)


def fit_description(card: ChoiceCard, description: str) -> ChoiceCard:
    """``card`` with ``description`` on one line and cut, if need be, so the card meets the target
    (60 tokens), or failing that the hard cap (80), when the rest of the card leaves too little."""
    text = _WHITESPACE.sub(" ", description).strip()
    whole = msgspec.structs.replace(card, description=text)
    if card_tokens(whole) <= CARD_TARGET:  # the usual case: the card fits as it is
        return whole
    bare = card_tokens(card)
    if text:
        for cap in (CARD_TARGET, CARD_HARD_CAP):
            # The description's own count and its count inside the line can differ by a token at
            # the seam, so the budget backs off until the whole line fits.
            budget = cap - bare
            while budget >= 1:
                fitted = msgspec.structs.replace(
                    card, description=truncate_description(text, budget)
                )
                if card_tokens(fitted) <= cap:
                    return fitted
                budget -= 1
    elif bare <= CARD_HARD_CAP:
        return card
    raise CatalogError(
        f"card {card.id!r} is {bare} tokens before its description; the hard cap is "
        f"{CARD_HARD_CAP} (seeds/004 §2.3)"
    )


def _card_tags(entry: GatewayEntry) -> tuple[str, ...]:
    tags = sorted({tag.strip() for tag in entry.tags if tag.strip()})
    if len(tags) > MAX_TAGS:
        raise CatalogError(
            f"tool {entry.tool_id!r} has {len(tags)} tags, a card has at most {MAX_TAGS}"
        )
    for tag in tags:
        if len(tag) > MAX_TAG_CHARS:
            raise CatalogError(
                f"tool {entry.tool_id!r}: tag {tag!r} is longer than {MAX_TAG_CHARS} characters"
            )
        if _SMUGGLED.search(tag):
            raise CatalogError(
                f"tool {entry.tool_id!r}: tag {tag!r} looks like a schema, metadata or a server "
                "address, which a card never carries (seeds/004 §2.2)"
            )
    return tuple(tags)
