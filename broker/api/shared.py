"""What the controllers share: the broker's parts for one app, built by ``create_app``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from litestar import Request

from broker.api.ingress_limits import single_authorization
from broker.auth import Authenticator
from broker.config import BrokerConfig
from broker.metrics import BrokerMetrics
from broker.model import Principal
from broker.pipeline.orchestrator import Pipeline
from broker.prose_audit import ImpliedWriteChecker
from broker.resilience.shedding import LoadShedder
from broker.state import Ledger
from broker.stores import Store
from broker.tools.runtime import Registry

if TYPE_CHECKING:
    from broker.gateway.calls import Gateway

__all__ = ["BrokerState", "broker_state", "principal_of"]


@dataclass(frozen=True, slots=True)
class BrokerState:
    config: BrokerConfig
    registry: Registry
    store: Store
    pipeline: Pipeline
    authenticator: Authenticator
    ledger: Ledger
    metrics: BrokerMetrics
    implied_writes: ImpliedWriteChecker
    load: LoadShedder
    """Proposals in flight, event-loop lag and draining: new proposals are shed past them."""
    gateway: Gateway
    """The meta-tools of gateway and proxy routes (``broker.gateway``)."""


def broker_state(request: Request[Any, Any, Any]) -> BrokerState:
    # An item, not an attribute: ``State`` answers attributes only once the usual look-up has
    # failed, an AttributeError raised and caught on every request.
    state: BrokerState = request.app.state["broker"]
    return state


def principal_of(request: Request[Any, Any, Any]) -> Principal:
    """Authenticate the caller; :class:`AuthError` propagates to the problem+json handler."""
    given = request.headers.getall("authorization", [])
    authorization = single_authorization(given[0] if given else None, len(given) > 1)
    return broker_state(request).authenticator.authenticate(authorization)
