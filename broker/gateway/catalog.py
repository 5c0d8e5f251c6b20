"""One route's gateway catalog: the index its model browses, built once per catalog version.

What a gateway or proxy route may browse, hydrate and execute is exactly what its catalogs would
list on a ``tools`` route: ``Mediator.visible_to`` (the token's tools, the policy's hide rules,
then the route's mediation rules). A tool outside that set has no entry here, so a ``tool_id``
of another route's tool, or of a hidden one, is answered exactly like an id that never existed.

An index is built on first use for each ``(route, tenant, token tool set)``, in a worker
thread, and kept until a registration changes the catalog (the registry's version moves): with
1,000 tools building it takes about half a second, browsing it microseconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from broker.config import ToolConfig
from broker.gateway.cards import GatewayEntry
from broker.gateway.surface import (
    SENTINEL_SCHEMA,
    CatalogMode,
    MetaTool,
    declare_meta,
    mcp_meta_declaration,
    meta_tools,
)
from broker.mediation.view import Mediator
from broker.model import Principal
from broker.native.names import expose_name
from broker.tool_id import parse_tool_id
from broker.tools.runtime import Registry, ToolRuntime

if TYPE_CHECKING:
    from broker.gateway.browsing import GatewayIndex

__all__ = ["GatewayCatalogs", "RouteCatalog", "entry_for", "entry_of"]

_MAX_CACHED = 256
"""Distinct (route, tenant, token tool set) catalogs kept per catalog version."""


def entry_of(tool: ToolRuntime) -> GatewayEntry:
    """A tool as the gateway indexes it: its declaration as the route's model sees it."""
    return entry_for(tool.tool_id, tool.name, tool.config)


def entry_for(tool_id: str, name: str, config: ToolConfig) -> GatewayEntry:
    """The entry of the tool ``name`` with ``config`` (a registration is checked before it is a
    runnable tool).

    A card's name is at most 64 characters (seed 004 §2.1) and broker names run longer: those
    are abridged as the provider formats abridge them (``broker.native.names``); the id, not
    the name, is what the model passes on."""
    tags: list[str] = [config.risk]
    if config.idempotent:
        tags.append("idempotent")
    return GatewayEntry(
        tool_id=tool_id,
        name=expose_name(name, keep_dots=True, limit=64),
        namespace=parse_tool_id(tool_id).namespace,
        description=config.description,
        tags=tuple(tags),
        input_schema=config.input_schema,
        side_effects=config.risk != "read",
        cost_hint=config.cost_usd,
    )


class RouteCatalog:
    """The tools one caller may reach through the meta-tools, by ``tool_id``."""

    __slots__ = ("_answers", "_building", "_index", "_mcp", "mode", "tools")

    def __init__(self, mode: CatalogMode, tools: list[ToolRuntime]) -> None:
        self.mode = mode
        self.tools: Mapping[str, ToolRuntime] = {tool.tool_id: tool for tool in tools}
        self._index: GatewayIndex | None = None
        self._building: asyncio.Future[GatewayIndex] | None = None
        self._answers: dict[str, bytes] = {}
        self._mcp: list[dict[str, Any]] | None = None

    async def index(self) -> GatewayIndex:
        """The browse index, built on first use (a proxy route may never browse) in a worker
        thread: fitting and indexing a thousand cards takes a good part of a second, in which
        the event loop goes on serving other calls. Concurrent first callers share one build."""
        if self._index is not None:
            return self._index
        if self._building is None:
            self._building = asyncio.ensure_future(asyncio.to_thread(self._build))
        self._index = await asyncio.shield(self._building)
        return self._index

    def _build(self) -> GatewayIndex:
        # Imported on first use: ranking loads numpy and BM25, which a process serving no
        # gateway route should not pay for at start-up.
        from broker.gateway.browsing import GatewayIndex

        return GatewayIndex.build([entry_of(tool) for tool in self.tools.values()])

    def tool(self, tool_id: str) -> ToolRuntime | None:
        return self.tools.get(tool_id)

    async def declarations(self, format: str) -> list[MetaTool]:
        """What the route's catalog lists in ``format``: a proxy's cards, then the meta-tools."""
        listed: list[MetaTool] = []
        if self.mode == "proxy":
            # Each card's description as the index fitted it to its token budget (§2.4).
            descriptions = {card.id: card.description for card in (await self.index()).cards()}
            for tool_id in sorted(self.tools):
                listed.append(self._card(tool_id, descriptions[tool_id], format))
        listed.extend(meta_tools(self.mode, format))
        return listed

    def _card(self, tool_id: str, description: str, format: str) -> MetaTool:
        # §4.1: the id as the name where the format allows it (MCP names are opaque strings);
        # the provider formats take [A-Za-z0-9_-]{1,64}, so there the tool's exposed name
        # stands in and the description starts with the id to pass to tool_execute.
        tool = self.tools[tool_id]
        if format == "mcp":
            return MetaTool(tool_id, description, SENTINEL_SCHEMA, tool.config.risk == "read")
        name = expose_name(tool.name)
        return MetaTool(
            name,
            f"[tool_id {tool_id}] {description}",
            SENTINEL_SCHEMA,
            tool.config.risk == "read",
        )

    async def answer(self, format: str, encoder: msgspec.json.Encoder) -> bytes:
        """The encoded ``GET /v1/tools?format=`` answer (built once per format)."""
        found = self._answers.get(format)
        if found is None:
            found = encoder.encode(declare_meta(await self.declarations(format), format))
            self._answers[format] = found
        return found

    async def mcp_tools(self) -> list[dict[str, Any]]:
        """MCP ``tools/list``: the same declarations as ``GET /v1/tools?format=mcp``."""
        if self._mcp is None:
            self._mcp = [mcp_meta_declaration(tool) for tool in await self.declarations("mcp")]
        return self._mcp


class GatewayCatalogs:
    """Every gateway and proxy route's catalogs, rebuilt when the catalog version moves."""

    def __init__(
        self, registry: Registry, mediator: Mediator, modes: Mapping[str, CatalogMode]
    ) -> None:
        self._registry = registry
        self._mediator = mediator
        self._modes = modes
        self._version = -1
        self._catalogs: dict[tuple[str, str, frozenset[str], bool], RouteCatalog] = {}
        self.encoder = msgspec.json.Encoder()

    def mode(self, route: str | None) -> CatalogMode:
        """How ``route``'s catalogs declare its tools (``tools`` for anything else)."""
        return self._modes.get(route or "", "tools")

    def for_principal(self, principal: Principal) -> RouteCatalog:
        """The catalog of ``principal``'s route, as its token and tenant see it."""
        version = self._registry.version
        if version != self._version:  # a registration changed the catalog: start afresh
            self._catalogs = {}
            self._version = version
        route = principal.route or ""
        key = (route, principal.tenant or "", principal.tools, principal.narrowed)
        found = self._catalogs.get(key)
        if found is None:
            found = RouteCatalog(self.mode(route), self._mediator.visible_to(principal))
            if len(self._catalogs) >= _MAX_CACHED:
                self._catalogs.clear()
            self._catalogs[key] = found
        return found
