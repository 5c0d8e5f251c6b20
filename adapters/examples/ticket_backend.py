"""An example HTTP backend: support tickets, registered with a broker when it starts.

It shows the backend's side of the contract (docs/api.md, "Registering a tool"):

* at start it registers its tools (``tickets.open_ticket``, ``tickets.get_ticket``) and the
  precondition verifier they use, and keeps the signing secret each registration returns;
* every request must carry a valid ``X-Broker-Signature`` for that tool, at most 300 s old:
  anything else (no signature, a tampered body, a replayed old request) is refused with 401;
* it deduplicates by ``Idempotency-Key``, so the broker may retry a transient failure safely.

Run it beside ``make run``::

    python -m adapters.examples.ticket_backend --broker http://127.0.0.1:8080 \\
        --admin-token demo-admin-token --port 9000

(the broker's ``[service] http_allowlist`` must allow ``http://127.0.0.1:*``).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
from collections.abc import Sequence
from typing import Any

import httpx
import msgspec
import uvicorn
from litestar import Litestar, Request, Response, post

from adapters.http import SIGNATURE_HEADER, TENANT_HEADER, verify_signature

__all__ = ["TicketBackend", "create_app", "main", "registrations"]

log = logging.getLogger("adapters.examples.tickets")

CUSTOMERS = {"acme": {"C-10429", "C-20001"}, "globex": {"C-30001"}}


def registrations(public_url: str, routes: Sequence[str]) -> list[dict[str, Any]]:
    """What this backend registers: two tools and the verifier the first one needs."""
    return [
        {
            "name": "tickets.open_ticket",
            "description": "Open a support ticket for a known customer of the tenant.",
            "input_schema": {
                "type": "object",
                "additionalProperties": False,
                "required": ["customer_id", "subject"],
                "properties": {
                    "customer_id": {"type": "string", "pattern": "^C-[0-9]+$", "maxLength": 32},
                    "subject": {"type": "string", "minLength": 1, "maxLength": 200},
                },
            },
            "risk": "write",
            "idempotent": False,
            "preconditions": ["tickets.customer_known"],
            "verifiers": {
                "tickets.customer_known": {
                    "url": f"{public_url}/verify/customer_known",
                    "remediation": "ASK_FOR_MORE: confirm the customer id",
                }
            },
            "routes": list(routes),
            "adapter": {"kind": "http", "url": f"{public_url}/tools/open_ticket", "timeout_s": 2.0},
            "claims": {"verbs": ["open", "create", "file"], "nouns": ["ticket"]},
            "version": "1",
        },
        {
            "name": "tickets.get_ticket",
            "description": "Read one ticket of the tenant.",
            "input_schema": {
                "type": "object",
                "additionalProperties": False,
                "required": ["ticket_id"],
                "properties": {"ticket_id": {"type": "string", "pattern": "^TK-[0-9]+$"}},
            },
            "risk": "read",
            "idempotent": True,
            "routes": list(routes),
            "adapter": {"kind": "http", "url": f"{public_url}/tools/get_ticket", "timeout_s": 2.0},
            "version": "1",
        },
    ]


class _Call(msgspec.Struct):
    tool: str
    args: dict[str, Any]
    tenant: str
    trace_id: str
    proposal_id: str


class _Check(msgspec.Struct):
    precondition: str
    args: dict[str, Any]
    tenant: str
    route: str
    tool: str
    trace_id: str


class TicketBackend:
    """The tickets and the secrets; shared by the handlers of one app."""

    def __init__(self) -> None:
        self.secrets: dict[str, str] = {}
        self.tickets: dict[tuple[str, str], dict[str, Any]] = {}
        self._by_key: dict[tuple[str, str], dict[str, Any]] = {}
        self._numbers = itertools.count(1001)

    async def register(
        self, broker: str, token: str, public_url: str, routes: Sequence[str]
    ) -> None:
        """Register every tool; each answer's signing secret is kept (rotated on every start)."""
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=broker, timeout=5) as http:
            for body in registrations(public_url, routes):
                answer = await _post_with_retries(http, body, headers)
                self.secrets[body["name"]] = answer["signing_secret"]
                log.info("registered %s as %s", answer["name"], answer["tool_id"])

    def authentic(self, tools: Sequence[str], request_headers: Any, body: bytes) -> bool:
        header = request_headers.get(SIGNATURE_HEADER)
        keys = [self.secrets[t] for t in tools if t in self.secrets]
        return bool(keys) and verify_signature(keys, header, body)

    def open_ticket(self, call: _Call, key: str | None) -> dict[str, Any]:
        if key is not None and (call.tenant, key) in self._by_key:
            return self._by_key[(call.tenant, key)]  # a retry: the same answer, no new ticket
        ticket_id = f"TK-{next(self._numbers)}"
        ticket = {"ticket_id": ticket_id, "status": "open", **call.args}
        self.tickets[(call.tenant, ticket_id)] = ticket
        if key is not None:
            self._by_key[(call.tenant, key)] = ticket
        return ticket


async def _post_with_retries(
    http: httpx.AsyncClient, body: dict[str, Any], headers: dict[str, str]
) -> dict[str, Any]:
    for attempt in range(30):  # the broker may still be starting
        try:
            answer = await http.post("/v1/tools?rotate_secret=true", json=body, headers=headers)
        except httpx.TransportError:
            await asyncio.sleep(min(0.1 * 2**attempt, 2.0))
            continue
        if answer.status_code >= 300:
            raise RuntimeError(
                f"registering {body['name']} failed: {answer.status_code} {answer.text}"
            )
        result: dict[str, Any] = answer.json()
        return result
    raise RuntimeError("the broker did not answer")


def _refuse(status: int, detail: str) -> Response[bytes]:
    return Response(
        content=msgspec.json.encode({"detail": detail}),
        status_code=status,
        media_type="application/json",
    )


def create_app(
    backend: TicketBackend,
    *,
    broker: str | None = None,
    token: str | None = None,
    public_url: str | None = None,
    routes: Sequence[str] = ("billing_help",),
) -> Litestar:
    """The backend's HTTP app; with ``broker`` it registers its tools when it starts."""

    async def call_of(request: Request[Any, Any, Any], tool: str) -> _Call | Response[bytes]:
        body = await request.body()
        if not backend.authentic([tool], request.headers, body):
            return _refuse(401, "missing, invalid or stale X-Broker-Signature")
        call = msgspec.json.decode(body, type=_Call)
        if call.tool != tool or request.headers.get(TENANT_HEADER) != call.tenant:
            return _refuse(400, "the call does not match this endpoint")
        return call

    @post("/tools/open_ticket", status_code=200)
    async def open_ticket(request: Request[Any, Any, Any]) -> Response[bytes] | dict[str, Any]:
        call = await call_of(request, "tickets.open_ticket")
        if isinstance(call, Response):
            return call
        return backend.open_ticket(call, request.headers.get("idempotency-key"))

    @post("/tools/get_ticket", status_code=200)
    async def get_ticket(request: Request[Any, Any, Any]) -> Response[bytes] | dict[str, Any]:
        call = await call_of(request, "tickets.get_ticket")
        if isinstance(call, Response):
            return call
        ticket = backend.tickets.get((call.tenant, call.args["ticket_id"]))
        if ticket is None:
            return _refuse(404, f"no ticket {call.args['ticket_id']}")
        return ticket

    @post("/verify/customer_known", status_code=200)
    async def customer_known(request: Request[Any, Any, Any]) -> Response[bytes] | dict[str, Any]:
        body = await request.body()
        if not backend.authentic(list(backend.secrets), request.headers, body):
            return _refuse(401, "missing, invalid or stale X-Broker-Signature")
        check = msgspec.json.decode(body, type=_Check)
        if check.args.get("customer_id") in CUSTOMERS.get(check.tenant, set()):
            return {"ok": True}
        return {"ok": False, "reason": f"unknown customer {check.args.get('customer_id')!r}"}

    async def register_at_start() -> None:
        if broker and token and public_url:
            await backend.register(broker, token, public_url, routes)

    return Litestar(
        route_handlers=[open_ticket, get_ticket, customer_known],
        on_startup=[register_at_start],
        openapi_config=None,
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m adapters.examples.ticket_backend", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--broker", default="http://127.0.0.1:8080")
    parser.add_argument("--admin-token", required=True, help="an admin or tickets backend token")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9000)
    parser.add_argument("--route", action="append", help="grant the tools to this route")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s %(message)s")
    public_url = f"http://{args.host}:{args.port}"
    app = create_app(
        TicketBackend(),
        broker=args.broker,
        token=args.admin_token,
        public_url=public_url,
        routes=args.route or ["billing_help"],
    )
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning")
    # Bind first: the tools are registered at startup, and a backend that cannot take its port
    # must not leave behind registrations pointing at whoever holds it. bind_socket is what
    # uvicorn.run does itself, and exits 1 with uvicorn's message when the port is taken.
    sock = config.bind_socket()
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
