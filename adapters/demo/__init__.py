"""The worked example of the pattern article: orders, support tickets and credits for two tenants."""

from __future__ import annotations

from adapters.demo.backend import DemoBackend, create_backend

__all__ = ["DemoBackend", "create_backend"]
