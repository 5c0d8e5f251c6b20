"""A large generated catalog for the gateway tests: 1,000 tools in ten namespaces behind one
``gateway`` route, plus the tools that make its edges testable.

- ``gateway`` (tokens :data:`GATEWAY_TOKEN`, tenant ``acme``, and :data:`GLOBEX_TOKEN`):
  :data:`SIZE` generated tools, ``report.big_report`` (a result far larger than the inline
  bound) and ``payroll_export``, which a mediation rule hides.
- ``proxy`` (:data:`PROXY_TOKEN`): the same tools as one schema-free card each.
- ``other`` (:data:`OTHER_TOKEN`): ``secret_payroll`` only, a tool the gateway route cannot
  reach.

Every tool runs on :class:`CatalogBackend`, which counts what it executed: the ground truth of
"nothing ran" for the bad-input tests.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from broker.auth import hash_token
from broker.config import BrokerConfig, parse_config
from broker.plugins import Adapter, AdapterContext, PreconditionVerifier

__all__ = [
    "GATEWAY_TOKEN",
    "GLOBEX_TOKEN",
    "NAMESPACES",
    "OTHER_TOKEN",
    "PROXY_TOKEN",
    "SIZE",
    "CatalogBackend",
    "catalog_config",
    "create_backend",
    "tool_name",
]

SIZE = 1000
NAMESPACES = (
    "billing",
    "crm",
    "files",
    "calendar",
    "mail",
    "shipping",
    "inventory",
    "payroll",
    "support",
    "analytics",
)
_VERBS = (
    "create",
    "list",
    "get",
    "update",
    "delete",
    "archive",
    "export",
    "search",
    "sync",
    "audit",
)
_OBJECTS = (
    "invoice",
    "customer",
    "document",
    "event",
    "message",
    "parcel",
    "stock",
    "payslip",
    "ticket",
    "metric",
)

GATEWAY_TOKEN = "gw-large-token"
GLOBEX_TOKEN = "gw-large-globex-token"
PROXY_TOKEN = "gw-proxy-token"
OTHER_TOKEN = "gw-other-token"

BIG_ROWS = 2000


def tool_name(index: int) -> str:
    """The ``index``-th generated tool: ``<namespace>_<verb>_<object>``, a hundred per
    namespace (every verb on every object), so path browsing clusters them by object."""
    namespace = NAMESPACES[index // (SIZE // len(NAMESPACES))]
    return f"{namespace}_{_VERBS[index % 10]}_{_OBJECTS[(index // 10) % 10]}"


class _Echo:
    def __init__(self, backend: CatalogBackend, operation: str) -> None:
        self._backend = backend
        self._operation = operation

    async def invoke(self, args: dict[str, Any], ctx: AdapterContext) -> dict[str, Any]:
        self._backend.executed[ctx.tool] += 1
        if self._operation == "big":
            rows = [{"id": i, "name": f"row {i}", "note": "n" * 40} for i in range(BIG_ROWS)]
            return {"title": "the big report", "rows": rows}
        return {"tool": ctx.tool, "args": args}


class CatalogBackend:
    """Serves every generated tool; ``executed`` counts runs per tool name."""

    def __init__(self) -> None:
        self.executed: Counter[str] = Counter()
        self._adapters: dict[str, Adapter] = {
            "echo": _Echo(self, "echo"),
            "big": _Echo(self, "big"),
        }

    @property
    def adapters(self) -> Mapping[str, Adapter]:
        return self._adapters

    @property
    def verifiers(self) -> Mapping[str, PreconditionVerifier]:
        return {}


def create_backend() -> CatalogBackend:
    """Factory for the generated config's backends (tests pass their own instance)."""
    return CatalogBackend()


def _tool(index: int) -> tuple[str, dict[str, Any]]:
    name = tool_name(index)
    namespace, verb, thing = name.split("_")
    tool = {
        "description": f"{verb.capitalize()} a {thing} in {namespace}. Generated tool {index}.",
        "risk": "read" if verb in ("list", "get", "search", "export") else "write",
        "idempotent": verb in ("list", "get", "search", "export"),
        "input_schema": {
            "type": "object",
            "additionalProperties": False,
            "required": ["ref"],
            "properties": {"ref": {"type": "string", "maxLength": 40}},
        },
        "adapter": {"kind": "python", "backend": namespace, "operation": "echo"},
        "timeout_s": 2.0,
    }
    return name, tool


def _extra(backend: str, operation: str, description: str) -> dict[str, Any]:
    return {
        "description": description,
        "risk": "read",
        "idempotent": True,
        "input_schema": {"type": "object", "additionalProperties": False, "properties": {}},
        "adapter": {"kind": "python", "backend": backend, "operation": operation},
        "timeout_s": 2.0,
    }


def catalog_raw() -> dict[str, Any]:
    tools = dict(_tool(index) for index in range(SIZE))
    generated = sorted(tools)
    tools["big_report"] = _extra("report", "big", "Build the big report of every row.")
    tools["payroll_export"] = _extra("payroll", "echo", "Export the whole payroll.")
    tools["secret_payroll"] = _extra("payroll", "echo", "Read the secret payroll.")
    on_gateway = [*generated, "big_report", "payroll_export"]
    accounts = ("gateway", "proxy", "other")
    return {
        "service": {"allow_volatile_redis": True},
        "tenants": {"acme": {}, "globex": {}},
        "routes": {
            "gateway": {
                "tools": on_gateway,
                "tenants": ["acme", "globex"],
                "catalog": "gateway",
                "mediation": {
                    "rules": [{"id": "no-export", "action": "hide", "tool": "payroll_export"}]
                },
            },
            "proxy": {"tools": on_gateway, "tenants": ["acme"], "catalog": "proxy"},
            "other": {"tools": ["secret_payroll"], "tenants": ["acme"]},
        },
        "service_accounts": {f"{name}@bots": {"route": name} for name in accounts},
        "tokens": [
            _token(GATEWAY_TOKEN, "gateway", "acme"),
            _token(GLOBEX_TOKEN, "gateway", "globex"),
            _token(PROXY_TOKEN, "proxy", "acme"),
            _token(OTHER_TOKEN, "other", "acme"),
        ],
        "backends": {
            name: {"factory": "tests.gateway_catalog:create_backend"}
            for name in (*NAMESPACES, "report")
        },
        "tools": tools,
    }


def _token(value: str, route: str, tenant: str) -> dict[str, Any]:
    return {
        "name": f"{route}-{tenant}",
        "sha256": hash_token(value),
        "service_account": f"{route}@bots",
        "tenant": tenant,
    }


def catalog_config() -> BrokerConfig:
    return parse_config(catalog_raw())


def backends(backend: CatalogBackend) -> dict[str, Any]:
    """The one counting backend under every backend name of the config."""
    return {name: backend for name in (*NAMESPACES, "report")}
