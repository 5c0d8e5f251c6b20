"""``create_app``: build the broker for one config; nothing happens at import time."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from functools import cached_property
from typing import cast

from litestar import Litestar
from litestar.datastructures import State
from litestar.enums import ScopeType
from litestar.types import (
    HTTPScope,
    LifeSpanReceive,
    LifeSpanScope,
    LifeSpanSend,
    Receive,
    Scope,
    Send,
)

from broker.api import (
    AuditController,
    HealthController,
    ImpliedWriteController,
    ProposalController,
    ToolController,
    create_proposal,
)
from broker.api.errors import exception_handlers
from broker.api.openapi import openapi_config
from broker.api.proposals import answer_directly
from broker.api.state import BrokerState
from broker.auth import Authenticator
from broker.catalog import Catalog
from broker.config import BrokerConfig
from broker.implied_checks import ImpliedWriteChecker
from broker.ledger import Checkpointer
from broker.metrics import BrokerMetrics
from broker.pipeline import Pipeline
from broker.plugins import Backend
from broker.registry import build_registry
from broker.state import Ledger, open_ledger, open_store, warn_about_store
from broker.stores import SqliteStore, Store
from broker.tracing import Tracing

__all__ = ["BrokerApp", "create_app"]


class BrokerApp(Litestar):
    """The broker's Litestar app, which answers ``POST /v1/proposals`` before routing it.

    Proposals are nearly all of the traffic, and the route's handler needs nothing the
    framework's layers prepare (see ``answer_directly``); every other request, and any
    proposal the direct path declines, takes Litestar's usual way. ``create_app`` gives the
    app no middleware, guards or ``before_send`` hooks, which the direct path would skip (a
    test holds it to that).
    """

    _through_litestar = Litestar.__call__

    @cached_property
    def broker(self) -> BrokerState:
        """``state.broker``, looked up once (a ``State`` look-up costs half a µs)."""
        state: BrokerState = self.state.broker
        return state

    async def __call__(
        self,
        scope: Scope | LifeSpanScope,
        receive: Receive | LifeSpanReceive,
        send: Send | LifeSpanSend,
    ) -> None:
        if scope["type"] == ScopeType.HTTP:
            http = cast(HTTPScope, scope)  # "http" is not "lifespan"; mypy cannot tell them apart
            if await answer_directly(
                self.broker, http, cast(Receive, receive), cast(Send, send), self._through_litestar
            ):
                return
        await self._through_litestar(scope, receive, send)


def create_app(
    config: BrokerConfig,
    *,
    store: Store | None = None,
    backends: Mapping[str, Backend] | None = None,
    secrets: Mapping[str, str] | None = None,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    dry_run: bool = False,
    ledger: Ledger | None = None,
    tracing: Tracing | None = None,
    metrics: BrokerMetrics | None = None,
) -> BrokerApp:
    """Build the ASGI app.

    Args:
        config: a checked config (see :func:`broker.config.load_config`).
        store: shared state; when omitted, the one ``[service] store`` names, else Redis if
            ``REDIS_URL`` (in ``secrets``) or ``[service] redis_url`` names one, else the SQLite
            file beside the ledger (:func:`broker.state.open_store`).
        backends: prebuilt backends by name (tests); otherwise built from ``[backends]``.
        secrets: where ``env:`` credentials and the token signing key are read (``os.environ``).
        clock: wall-clock seconds, injectable for tests of expiry and windows.
        dry_run: run every proposal as a dry run (``broker serve --dry-run``).
        ledger: where proposals are recorded; opened from ``[service]`` when omitted.
        tracing: spans for executions; from ``[service] tracing`` when omitted.
        metrics: the app's metrics (benchmarks price them); a fresh registry when omitted.

    Raises:
        ConfigError: when tools, backends or secrets cannot be bound.
        LedgerUnavailableError: when the ledger cannot be opened.
    """
    secrets = os.environ if secrets is None else secrets
    registry = build_registry(config, secrets=secrets, backends=backends)
    store = store or open_store(config, secrets, clock=clock)
    catalog = Catalog(registry, store, config, secrets=secrets, clock=clock)
    ledger = ledger or open_ledger(config, store)
    key = secrets.get(config.service.token_signing_key_env)
    metrics = metrics or BrokerMetrics(
        registry.tools,
        budgets=config.budgets,
        is_known=lambda name: name in registry.tools,
        tenant_label=config.service.metrics_tenant_label,
    )
    if isinstance(store, SqliteStore):
        metrics.watch_store_size(store.size_bytes)
    pipeline = Pipeline(
        config=config,
        registry=registry,
        store=store,
        ledger=ledger.sink,
        probe_ledger=ledger.probe_before_write,
        metrics=metrics,
        tracing=tracing or Tracing.from_environment(config.service.tracing),
        clock=clock,
        sleep=sleep,
        dry_run=dry_run,
    )
    state = BrokerState(
        config=config,
        registry=registry,
        store=store,
        pipeline=pipeline,
        ledger=ledger,
        authenticator=Authenticator(config, signing_key=key.encode() if key else None, clock=clock),
        metrics=metrics,
        implied_writes=ImpliedWriteChecker(
            lambda: (registry.version, {n: t.config for n, t in registry.tools.items()}),
            ledger.sink,
            metrics,
            config_hash=pipeline.config_hash,
        ),
    )

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        await warn_about_store(store)
        checkpointer = Checkpointer(
            ledger.sink,
            ledger.signer,
            ledger.checkpoints,
            interval_s=config.service.checkpoint_interval_s,
        )
        checkpointer.start()
        await catalog.start()
        try:
            yield
        finally:
            await catalog.stop()
            await registry.outbound.aclose()
            # The last checkpoint commits to every record written, so a cut tail shows.
            await checkpointer.close()
            await ledger.sink.close()
            await store.close()

    return BrokerApp(
        route_handlers=[
            create_proposal,
            ProposalController,
            ToolController,
            AuditController,
            ImpliedWriteController,
            HealthController,
        ],
        exception_handlers=exception_handlers,  # type: ignore[arg-type]
        request_max_body_size=config.service.max_body_bytes,
        state=State({"broker": state, "catalog": catalog}),
        lifespan=[lifespan],
        openapi_config=openapi_config(),
        logging_config=None,  # the process configures logging (broker.logs), not the app
    )
