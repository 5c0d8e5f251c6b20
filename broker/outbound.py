"""The outbound side of one broker process: the URL policy, and the pooled HTTP and MCP clients.

Every ``http`` and ``mcp`` tool and every HTTP verifier of the process shares one
:class:`Outbound`, so connections are pooled per process, not per tool. The clients themselves
live in ``adapters.http`` and ``adapters.mcp`` and are imported only when a tool needs them (the
MCP SDK is an optional extra); they are created with the first tool that needs them (so no
tool call pays for building one, CA certificates included), connect inside the serving event
loop, and are closed when the app stops.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from broker.allowlist import Allowlist
from broker.config import BrokerConfig
from broker.plugins import CLIENT_ENV, Adapter, HttpClientKind, PreconditionVerifier
from broker.resilience.guard import BackendGuards
from broker.taxonomy import ConfigError

if TYPE_CHECKING:
    from adapters.http import HttpPool
    from adapters.mcp import McpPool

__all__ = ["Outbound", "http_client_from_environment", "mcp_available"]


def http_client_from_environment() -> HttpClientKind:
    """``BROKER_HTTP_CLIENT``: ``httpx`` when unset or empty, or the opt-in ``http1``.

    Raises:
        ConfigError: any other value (checked when the app is built, before it serves).
    """
    value = os.environ.get(CLIENT_ENV, "").strip().lower() or "httpx"
    if value == "httpx":
        return "httpx"
    if value == "http1":
        return "http1"
    raise ConfigError([(CLIENT_ENV, f"must be httpx or http1, not {value!r}")])


def mcp_available() -> bool:
    """Whether the optional MCP SDK (``action-broker[mcp]``) is installed."""
    return importlib.util.find_spec("mcp") is not None


class Outbound:
    def __init__(
        self,
        allowlist: Allowlist,
        *,
        max_response_bytes: int = 1_048_576,
        http_client: HttpClientKind = "httpx",
        guards: BackendGuards | None = None,
    ) -> None:
        self.allowlist = allowlist
        self.guards = guards or BackendGuards()
        """Every backend's breaker, bulkhead and retry budget in this process."""
        self.max_response_bytes = max_response_bytes
        self.http_client: HttpClientKind = http_client
        self._http: HttpPool | None = None
        self._mcp: McpPool | None = None

    @classmethod
    def from_config(cls, config: BrokerConfig) -> Outbound:
        service = config.service
        return cls(
            Allowlist(service.http_allowlist),
            max_response_bytes=service.http_max_response_bytes,
            http_client=http_client_from_environment(),
            guards=BackendGuards(service),
        )

    @classmethod
    def disabled(cls) -> Outbound:
        """Nothing allowed: for registries built without a config (tests of Python tools)."""
        return cls(Allowlist(()))

    @property
    def http(self) -> HttpPool:
        if self._http is None:
            from adapters.http import HttpPool

            self._http = HttpPool(
                self.allowlist,
                max_response_bytes=self.max_response_bytes,
                client=self.http_client,
            )
        return self._http

    @property
    def mcp(self) -> McpPool:
        """The MCP session pool; :class:`ImportError` when the ``mcp`` extra is missing."""
        if self._mcp is None:
            from adapters.mcp import McpPool

            self._mcp = McpPool(self.allowlist)
        return self._mcp

    def http_adapter(
        self, *, tool: str, url: str, secret: str, credential_headers: Mapping[str, str]
    ) -> Adapter:
        from adapters.http import HttpAdapter

        return HttpAdapter(
            self.http, tool=tool, url=url, secret=secret, credential_headers=credential_headers
        )

    def http_verifier(self, *, precondition: str, url: str, secret: str) -> PreconditionVerifier:
        from adapters.http import HttpVerifier

        return HttpVerifier(self.http, precondition=precondition, url=url, secret=secret)

    def mcp_adapter(
        self,
        *,
        tool: str,
        url: str,
        upstream_tool: str,
        credential_headers: Mapping[str, str] = {},
    ) -> Adapter:
        if not mcp_available():
            raise ImportError("the mcp extra is not installed")
        from adapters.mcp import McpAdapter

        return McpAdapter(
            self.mcp,
            tool=tool,
            url=url,
            upstream_tool=upstream_tool,
            credential_headers=credential_headers,
        )

    async def aclose(self) -> None:
        http, mcp = self._http, self._mcp
        self._http = self._mcp = None
        if http is not None:
            await http.aclose()
        if mcp is not None:
            await mcp.aclose()
