"""``create_app``: build the broker for one config; nothing happens at import time.

``spec_for_config`` builds one without side effects for its OpenAPI document (the document's
builder, ``broker.api.openapi``, never imports the app).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
from litestar import Litestar
from litestar.datastructures import State

from broker.api import (
    AuditController,
    HealthController,
    ImpliedWriteController,
    ProposalController,
    ToolController,
)
from broker.api.approvals import ApprovalController
from broker.api.catalog import CatalogController
from broker.api.errors import exception_handlers
from broker.api.fast_path import ProposalsBeforeRouting
from broker.api.openapi import build_spec, openapi_config
from broker.api.resolution import ResolutionController
from broker.api.shared import BrokerState
from broker.api.tool_calls import ToolCallController
from broker.approvals.webhook import ApprovalWebhook, read_webhook_key
from broker.auth import Authenticator
from broker.clock import steady_clock_for
from broker.completer import Completer
from broker.config import BrokerConfig
from broker.gateway.calls import Gateway
from broker.gateway.catalog import GatewayCatalogs
from broker.ledger import Checkpointer
from broker.ledger.checkpoint_copies import with_checkpoint_copies
from broker.mcp_front import McpFrontDoor
from broker.metrics import BrokerMetrics
from broker.native.catalogs import ProviderCatalogs
from broker.pipeline.orchestrator import Pipeline
from broker.plugins import Backend
from broker.prose_audit import ImpliedWriteChecker
from broker.recovery import LedgerOutcomes
from broker.resilience.breaker_redis import RedisBreakerStates
from broker.resilience.guard import BackendGuards
from broker.resilience.shedding import LoadShedder
from broker.resolution import Resolver
from broker.state import Ledger, open_ledger, open_store, store_path, warn_about_store
from broker.stores import MemoryStore, SqliteStore, Store
from broker.stores.redis_clock import server_clock_for
from broker.taxonomy import ConfigError
from broker.tools.runtime import build_registry
from broker.tools.sync import Catalog
from broker.tracing import Tracing
from broker.ui import InboxState, SessionKeys, inbox_router, template_config

__all__ = ["create_app", "spec_for_config"]


def create_app(
    config: BrokerConfig,
    *,
    store: Store | None = None,
    backends: Mapping[str, Backend] | None = None,
    secrets: Mapping[str, str] | None = None,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    dry_run: bool = False,
    ledger: Ledger | None = None,
    tracing: Tracing | None = None,
    metrics: BrokerMetrics | None = None,
) -> Litestar:
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
    if any(route.catalog != "tools" for route in config.routes.values()):
        # Imported only here: counting card tokens loads tiktoken, which a broker serving no
        # gateway route should not pay for at start-up.
        from broker.gateway.checks import catalog_problems

        problems = catalog_problems(registry.tools, config)
        if problems:
            raise ConfigError(problems)
    webhook = config.approvals.webhook
    webhook_key = read_webhook_key(webhook, secrets) if webhook is not None else None
    own_clock = clock is None  # else a test's: kept as given
    data = store_path(config)
    clock = clock or steady_clock_for([data, Path(f"{data}-wal")])
    store = store or open_store(config, secrets, clock=clock)
    server_clock = server_clock_for(store, clock) if own_clock else None
    clock = server_clock or clock
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
    service = config.service
    load = LoadShedder(
        max_in_flight=service.max_in_flight_proposals,
        max_lag_s=service.max_event_loop_lag_s,
        grace_s=service.shutdown_grace_s,
    )
    guards = registry.outbound.guards
    _share_breakers(guards, store)
    metrics.collect_from(guards.collector())
    metrics.collect_from(load.collector())
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
        load=load,
        gateway=Gateway(
            catalogs=GatewayCatalogs(
                registry,
                pipeline.mediator,
                {name: route.catalog for name, route in config.routes.items()},
            ),
            pipeline=pipeline,
            store=store,
            metrics=metrics,
        ),
    )

    checkpoints = with_checkpoint_copies(ledger.checkpoints, config.service)
    resolver = Resolver(
        store=store,
        ledger=ledger.sink,
        config_hash=pipeline.config_hash,
        ttl_s=config.service.idempotency_ttl_s,
        sensitive=lambda name: (
            registry.tools[name].sensitive if name in registry.tools else frozenset()
        ),
        counter=metrics.resolutions,
        clock=clock,
    )

    durability = None
    if not isinstance(store, MemoryStore):  # (the SQLite store is one): Redis, to be checked
        from broker.redis_durability import durability_of

        durability = durability_of(store, config)
    # A claim that outlived its process is settled from its ledger record when there is one,
    # by the completer and by a retry of its key alike.
    store.recover_from(LedgerOutcomes(ledger.sink, ttl_s=config.service.idempotency_ttl_s))
    if webhook is not None and webhook_key is not None:
        pipeline.approvals.webhook = ApprovalWebhook(
            webhook,
            webhook_key,
            outbound=registry.outbound,
            counter=metrics.approval_webhook,
            clock=clock,
        )
    interval_s = config.service.completer_interval_s
    completer = Completer(store, metrics.stuck_claims_completed, interval_s=interval_s, clock=clock)

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        await warn_about_store(store)
        checkpointer = Checkpointer(
            ledger.sink,
            ledger.signer,
            checkpoints,
            interval_s=config.service.checkpoint_interval_s,
            on_tail=metrics.ledger_unsigned_records.set,
        )
        if server_clock is not None:  # Redis's time before the first proposal, if it answers
            await server_clock.sync()
            server_clock.start()
        checkpointer.start()
        await catalog.start()
        load.start()
        completer.start()
        sweeper = asyncio.create_task(pipeline.approvals.run_sweeper(APPROVAL_SWEEP_S))
        try:
            yield
        finally:
            sweeper.cancel()
            if pipeline.approvals.webhook is not None:  # before the HTTP pool closes
                await pipeline.approvals.webhook.close()
            await load.stop()
            await completer.stop()
            if server_clock is not None:
                await server_clock.stop()
            await catalog.stop()
            await registry.outbound.aclose()
            # The last checkpoint commits to every record written, so a cut tail shows.
            await checkpointer.close()
            await checkpoints.aclose()
            await ledger.sink.close()
            await store.close()

    mcp = McpFrontDoor(state)
    inbox = InboxState(keys=SessionKeys.from_config(config, secrets, clock))

    # Opt-in (see broker.api.fast_path): the same answers, without the framework's layers.
    app_class = ProposalsBeforeRouting if config.service.proposal_fast_path else Litestar
    return app_class(
        route_handlers=[
            ProposalController,
            ToolController,
            ToolCallController,
            AuditController,
            ImpliedWriteController,
            HealthController,
            ResolutionController,
            ApprovalController,
            CatalogController,
            mcp.handler,
            inbox_router(),
        ],
        exception_handlers=exception_handlers,  # type: ignore[arg-type]
        request_max_body_size=config.service.max_body_bytes,
        state=State(
            {
                "broker": state,
                "catalog": catalog,
                "resolver": resolver,
                "provider_catalogs": ProviderCatalogs(registry, pipeline.mediator),
                "redis_durability": durability,
                "inbox": inbox,
            }
        ),
        lifespan=[lifespan, mcp.lifespan],
        openapi_config=openapi_config(),
        template_config=template_config(),
        logging_config=None,  # the process configures logging (broker.logs), not the app
    )


APPROVAL_SWEEP_S = 1.0
"""How often each process expires due approvals and reads the pending count from the store."""


def _share_breakers(guards: BackendGuards, store: Store) -> None:
    """With Redis as the store, open breakers are shared by every process (one key each)."""
    from broker.stores.redis import RedisStore

    if isinstance(store, RedisStore):
        guards.share_breakers(RedisBreakerStates(store.client, store.prefix))


def spec_for_config(config: BrokerConfig, *, strict: bool = True) -> dict[str, Any]:
    """Build the app for ``config`` without side effects and return its document.

    The ledger goes to a temporary directory and state to the memory store, so exporting never
    touches the configured ledger or Redis.
    """
    with tempfile.TemporaryDirectory(prefix="broker-openapi-") as tmp:
        service = msgspec.structs.replace(
            config.service,
            ledger="file",
            redis_url=None,
            ledger_path=str(Path(tmp) / "ledger.jsonl"),
            ledger_key_path=str(Path(tmp) / "ledger-key.pem"),
        )
        app = create_app(
            msgspec.structs.replace(config, service=service),
            store=MemoryStore(),
            secrets=os.environ,
        )
        try:
            return build_spec(app, strict=strict)
        finally:
            _run_apart(app.state.broker.ledger.sink.close())


def _run_apart(coroutine: Any) -> None:
    """Run ``coroutine`` to completion on a private event loop (callers may be inside one)."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(coroutine)
        except BaseException as exc:  # re-raised in the caller's thread
            errors.append(exc)

    thread = threading.Thread(target=run, name="openapi-close")
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
