"""The audit trail over HTTP: ``GET /v1/traces/{trace_id}`` and ``GET /v1/audit/verify``."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Controller, Request, Response, get
from litestar.params import FromPath

from broker.api.errors import problem_response
from broker.api.shared import broker_state, principal_of
from broker.ledger import verify
from broker.taxonomy import Code

__all__ = ["AuditController"]

_encoder = msgspec.json.Encoder()


class AuditController(Controller):
    @get(
        "/v1/traces/{trace_id:str}",
        operation_id="getTrace",
        summary="Read the audit records of a trace",
        description=(
            "Proposal, decision and execution records of one trace: the caller's own route's "
            "records, or all of them for an admin."
        ),
        tags=["audit"],
    )
    async def trace(
        self, request: Request[Any, Any, Any], trace_id: FromPath[str]
    ) -> Response[bytes]:
        """Plan → decision → outcome for one trace: its own route's records, or all for an admin."""
        principal = principal_of(request)
        records = await broker_state(request).ledger.sink.by_trace(trace_id)
        if not principal.admin:
            records = [
                r for r in records if r.route == principal.route and r.tenant == principal.tenant
            ]
        if not records:
            return problem_response(Code.NOT_FOUND, f"no records for trace {trace_id!r}")
        body = _encoder.encode({"trace_id": trace_id, "records": records})
        return Response(content=body, media_type="application/json")

    @get(
        "/v1/audit/verify",
        operation_id="verifyAudit",
        summary="Verify the ledger",
        description="Walk the whole hash chain and its signed checkpoints (admin only).",
        tags=["audit"],
    )
    async def verify_ledger(self, request: Request[Any, Any, Any]) -> Response[bytes]:
        """Walk the whole chain and its signed checkpoints (admin only)."""
        principal = principal_of(request)
        if not principal.admin:
            return problem_response(Code.FORBIDDEN, "verifying the ledger needs an admin token")
        ledger = broker_state(request).ledger
        report = await verify(
            ledger.sink, checkpoints=ledger.checkpoints, public_key=ledger.signer.public_key()
        )
        return Response(content=_encoder.encode(report), media_type="application/json")
