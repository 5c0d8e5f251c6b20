"""Running an approved proposal: the adapter call wrapped in a deadline and safe retries."""

from __future__ import annotations

from broker.execution.executor import ExecutionReport, execute, preview

__all__ = ["ExecutionReport", "execute", "preview"]
