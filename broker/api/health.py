"""Operations: ``/livez``, ``/readyz`` (state reachable, config loaded) and ``/metrics``."""

from __future__ import annotations

import contextlib
from typing import Any

import msgspec
from litestar import Controller, Request, Response, get

from broker.api.shared import broker_state
from broker.metrics import CONTENT_TYPE
from broker.taxonomy import StoreUnavailableError

__all__ = ["HealthController"]


class HealthController(Controller):
    @get(
        "/livez",
        operation_id="livez",
        summary="Liveness probe",
        description="The process is alive.",
        tags=["operations"],
    )
    async def livez(self) -> Response[bytes]:
        return Response(content=b'{"status":"ok"}', media_type="application/json")

    @get(
        "/metrics",
        operation_id="metrics",
        summary="Prometheus metrics",
        description="Prometheus text format (every worker process's values when several run).",
        tags=["operations"],
    )
    async def metrics(self, request: Request[Any, Any, Any]) -> Response[bytes]:
        """Prometheus text format (every worker process's values when several run)."""
        state = broker_state(request)
        # One store read per scrape (never on the hot path); an unreachable store keeps the
        # last value, and readyz says why.
        with contextlib.suppress(StoreUnavailableError):
            state.metrics.outcome_unknown_keys.set(await state.store.unknown_keys())
        exposition = state.metrics.exposition()
        return Response(content=exposition, media_type=CONTENT_TYPE)

    @get(
        "/readyz",
        operation_id="readyz",
        summary="Readiness probe",
        description=(
            "The store and the ledger are reachable and the process is neither overloaded nor "
            "draining; 503 with the failing check if not."
        ),
        tags=["operations"],
    )
    async def readyz(self, request: Request[Any, Any, Any]) -> Response[bytes]:
        state = broker_state(request)
        checks = {"config": "ok", "store": "ok", "ledger": "ok"}
        for name, ping in (("store", state.store.ping), ("ledger", state.ledger.sink.ping)):
            try:
                await ping()
            except StoreUnavailableError:  # LedgerUnavailableError is one too
                checks[name] = "unavailable"
        checks["load"] = state.load.not_ready() or "ok"  # overloaded, or draining after SIGTERM
        durability = request.app.state.get("redis_durability")
        if durability is not None:  # the Redis store: could it lose idempotency records?
            checks["redis_durability"] = await durability.verdict()
        ready = all(v in ("ok", "volatile_allowed") for v in checks.values())
        body = {"status": "ok" if ready else "unavailable", "checks": checks}
        return Response(
            content=msgspec.json.encode(body),
            status_code=200 if ready else 503,
            media_type="application/json",
        )
