"""What ``hide`` rules take out of a route's catalogs (``GET /v1/tools``, provider and MCP lists).

Catalog code calls ``PolicyCatalog(config, registry).hidden_tools(route, tenant)``: the names
of the tools that route's tenant must not be shown. Only fully enforced rules without argument
or session conditions hide (a catalog has neither arguments nor a session); the first ``allow``
or ``hide`` in rule order decides, as for calls. A hidden tool is also refused if called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.policy.chain_hook import compiled_policy

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from broker.tools.runtime import Registry

__all__ = ["PolicyCatalog"]


class PolicyCatalog:
    __slots__ = ("_config", "_registry")

    def __init__(self, config: BrokerConfig, registry: Registry) -> None:
        self._config = config
        self._registry = registry

    def hidden_tools(self, route: str | None, tenant: str | None) -> set[str]:
        policy = compiled_policy(self._config)
        if not policy or route is None:
            return set()
        return {
            tool.name
            for tool in self._registry.tools.values()
            if policy.hidden(tool.name, tool.config.risk, route, tenant or "")
        }
