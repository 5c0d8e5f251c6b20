"""Typed configuration: msgspec structs decoded from TOML, then cross-checked, every problem at once.

Loading happens in two passes, like jsonschema's ``iter_errors``: first each value is converted
field by field so that one bad key does not hide the next (``conversion``), then the semantic
cross-checks run (``cross_checks``: references between sections, tool schemas, regex safety).
Either pass collects problems with their key paths and :func:`load_config` raises one
:class:`~broker.taxonomy.ConfigError`. The structs themselves are in ``model`` (their tool side in ``tool_model``); the checks of a
tool's parts that registrations share are in ``tool_checks``.
"""

from __future__ import annotations

from broker.config.conversion import POINTER, PathStyle, collect_conversion_problems
from broker.config.loading import load_config, parse_config
from broker.config.model import (
    REGISTERED_NAME,
    BrokerConfig,
    BudgetConfig,
    PreconditionConfig,
    RateLimitConfig,
    RouteConfig,
    ServiceAccountConfig,
    ServiceSettings,
    TenantConfig,
    TokenConfig,
    config_hash,
)
from broker.config.tool_checks import (
    check_credential_headers,
    check_secret_source,
    check_tool_schema,
)
from broker.config.tool_model import (
    AdapterConfig,
    BackendConfig,
    ClaimsConfig,
    HttpAdapterConfig,
    McpAdapterConfig,
    PythonAdapterConfig,
    ReadCacheConfig,
    RegisteredToolConfig,
    RetryConfig,
    ToolConfig,
)

__all__ = [
    "POINTER",
    "REGISTERED_NAME",
    "AdapterConfig",
    "BackendConfig",
    "BrokerConfig",
    "BudgetConfig",
    "ClaimsConfig",
    "HttpAdapterConfig",
    "McpAdapterConfig",
    "PathStyle",
    "PreconditionConfig",
    "PythonAdapterConfig",
    "RateLimitConfig",
    "ReadCacheConfig",
    "RegisteredToolConfig",
    "RetryConfig",
    "RouteConfig",
    "ServiceAccountConfig",
    "ServiceSettings",
    "TenantConfig",
    "TokenConfig",
    "ToolConfig",
    "check_credential_headers",
    "check_secret_source",
    "check_tool_schema",
    "collect_conversion_problems",
    "config_hash",
    "load_config",
    "parse_config",
]
