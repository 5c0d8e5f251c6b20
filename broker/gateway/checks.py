"""Gateway and proxy routes' catalogs checked before they are served: at start, and at each
registration that grants a tool to such a route.

A card over its token cap even with its description cut, or two tools whose browse paths
collide, would otherwise first show when a model browses or a proxy route lists its cards: on
a caller's request, long after the operator or the registrant could have fixed it. Checked
here, the operator hears of it at start (a config error naming the route) and a registrant at
registration (a 422 whose pointer is the tool's name).

A token may narrow a route to some of its tools; a subset of a catalog that fits fits too, so
each route is checked once, whole.
"""

from __future__ import annotations

from collections.abc import Mapping

from broker.config import BrokerConfig, ToolConfig
from broker.gateway.catalog import entry_for, entry_of
from broker.gateway.errors import CatalogError
from broker.gateway.fitting import fit_catalog
from broker.tools.runtime import ToolRuntime

__all__ = ["catalog_problems", "registration_problem"]


def catalog_problems(
    tools: Mapping[str, ToolRuntime], config: BrokerConfig
) -> list[tuple[str, str]]:
    """What keeps each gateway or proxy route's catalog from being served, as config problems
    (``routes.NAME``, why); empty when every one fits."""
    problems: list[tuple[str, str]] = []
    for route in _gateway_routes(config):
        entries = [entry_of(tool) for tool in _on_route(tools, config, route)]
        try:
            fit_catalog(entries)
        except CatalogError as exc:
            problems.append(
                (f"routes.{route}", f"its {config.routes[route].catalog} catalog: {exc}")
            )
    return problems


def registration_problem(
    tool_id: str,
    name: str,
    tool: ToolConfig,
    routes: list[str],
    *,
    tools: Mapping[str, ToolRuntime],
    config: BrokerConfig,
) -> str | None:
    """Why registering ``name`` on ``routes`` would leave a gateway or proxy route's catalog
    unservable, or ``None``. The registered tool replaces one of the same name."""
    for route in _gateway_routes(config):
        if route not in routes:
            continue
        entries = [entry_of(t) for t in _on_route(tools, config, route) if t.name != name]
        entries.append(entry_for(tool_id, name, tool))
        try:
            fit_catalog(entries)
        except CatalogError as exc:
            return f"route {route!r} lists its tools as gateway cards, and {exc}"
    return None


def _gateway_routes(config: BrokerConfig) -> list[str]:
    return sorted(name for name, route in config.routes.items() if route.catalog != "tools")


def _on_route(
    tools: Mapping[str, ToolRuntime], config: BrokerConfig, route: str
) -> list[ToolRuntime]:
    granted = set(config.routes[route].tools)
    return [tool for tool in tools.values() if tool.name in granted or route in tool.routes]
