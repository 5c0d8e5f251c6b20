"""How a route's tools look to an MCP client: the declaration is the ``mcp`` catalog format's
(``broker.native.catalogs``), so ``GET /v1/tools?format=mcp`` and ``tools/list`` agree."""

from __future__ import annotations

from broker.native.catalogs import IDEMPOTENCY_ARGUMENT, mcp_declaration

__all__ = ["IDEMPOTENCY_ARGUMENT", "IDEMPOTENCY_META_KEY", "mcp_declaration"]

IDEMPOTENCY_META_KEY = "io.action-broker/idempotency_key"
"""Where a client may send the key instead of the argument: ``params._meta``."""
