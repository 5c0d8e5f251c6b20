"""HTTP controllers: thin translations between Litestar requests and the pipeline's answers."""

from __future__ import annotations

from broker.api.audit import AuditController
from broker.api.health import HealthController
from broker.api.implied_writes import ImpliedWriteController
from broker.api.proposals import ProposalController
from broker.api.tools import ToolController

__all__ = [
    "AuditController",
    "HealthController",
    "ImpliedWriteController",
    "ProposalController",
    "ToolController",
]
