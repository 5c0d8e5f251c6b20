"""HTTP controllers: thin translations between Litestar requests and the pipeline's answers."""

from __future__ import annotations

from broker.api.health import HealthController
from broker.api.proposals import ProposalController
from broker.api.tools import ToolController

__all__ = ["HealthController", "ProposalController", "ToolController"]
