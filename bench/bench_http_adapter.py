"""The http adapter path: a loopback backend called directly, and through the broker, same run.

Two server processes, each on its own core: the backend on core 0, the broker (demo config,
memory store, file ledger in a temporary directory, one registered ``http`` tool pointing at the
backend) on core 1, beside the load generator (one connection: it waits while the broker works).
The backend verifies every request's ``X-Broker-Signature`` and answers a small JSON object; by
default it is built like the example backend (a Litestar app, as adapters/examples is), and
``--backend bare`` makes it a bare ASGI callable, the cheapest backend there can be (the worst
case for the ratio). The load generator alternates, round by round:

* direct: the same signed body the broker would send, POSTed straight to the backend;
* through the broker: ``POST /v1/proposals`` for the registered read tool (token lookup, strict
  decoding, schema, admission, the signed outbound call over a pooled connection, the ledger
  record, the answer).

It prints p50/p99 of each and what the broker adds, as a multiple of the direct call's own p50
(target: at most 2x). One connection by default, so latency is not queueing.

    python bench/bench_http_adapter.py [--seconds 5] [--rounds 3] [--connections 1]
        [--ledger-fsync always|batch|never] [--backend litestar|bare] [--work-ms 0]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import litestar  # noqa: E402
import msgspec  # noqa: E402
from litestar import Litestar, Request, Response  # noqa: E402

from bench.loadgen import LoadResult, free_port, post, run_load, start_server  # noqa: E402

ADMIN = {"Authorization": "Bearer demo-admin-token"}
BILLING = {"Authorization": "Bearer demo-billing-token"}
TOOL = "bench.lookup"
ARGS = {"order_id": "O-55291"}


# -- the servers (run as ``python bench/bench_http_adapter.py backend|broker PORT ...``) ------------


class _Call(msgspec.Struct):
    tool: str
    args: dict[str, Any]
    tenant: str
    trace_id: str
    proposal_id: str


def litestar_backend(work_ms: float) -> Any:
    """The backend as a service would be written: a Litestar app, like adapters/examples.

    ``work_ms`` stands for the backend's own I/O (a database read): an ``asyncio.sleep``.
    """
    from adapters.http import SIGNATURE_HEADER, verify_signature

    secrets: list[str] = []

    @litestar.post("/_secret", status_code=204)
    async def set_secret(request: Request[Any, Any, Any]) -> None:
        secrets[:] = [(await request.body()).decode()]

    @litestar.post("/lookup", status_code=200)
    async def lookup(request: Request[Any, Any, Any]) -> Response[bytes] | dict[str, Any]:
        body = await request.body()
        if not verify_signature(secrets, request.headers.get(SIGNATURE_HEADER), body):
            return Response(content=b'{"detail":"bad signature"}', status_code=401)
        call = msgspec.json.decode(body, type=_Call)
        if work_ms:
            await asyncio.sleep(work_ms / 1000)
        return {"order_id": call.args["order_id"], "status": "paid", "total": 120.0}

    return Litestar(route_handlers=[set_secret, lookup], openapi_config=None)


def bare_backend() -> Any:
    from adapters.http import SIGNATURE_HEADER, verify_signature

    secrets: list[str] = []
    header_name = SIGNATURE_HEADER.lower().encode()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if scope["path"] == "/_secret":
            secrets[:] = [body.decode()]
            status, answer = 204, b""
        else:
            signature = next((v.decode() for k, v in scope["headers"] if k == header_name), None)
            if secrets and verify_signature(secrets, signature, body):
                call = json.loads(body)
                status = 200
                answer = json.dumps(
                    {"order_id": call["args"]["order_id"], "status": "paid", "total": 120.0}
                ).encode()
            else:
                status, answer = 401, b'{"detail":"bad signature"}'
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(answer)).encode()),
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": answer})

    return app


def broker_app(backend_url: str, fsync: str) -> Any:
    from broker.app import create_app
    from broker.config import load_config

    scratch = Path(tempfile.mkdtemp(prefix="bench-http-"))
    config = load_config(ROOT / "deploy" / "demo.toml")
    service = msgspec.structs.replace(
        config.service,
        ledger_path=str(scratch / "ledger.jsonl"),
        ledger_key_path=str(scratch / "key.pem"),
        ledger_fsync=fsync,
        http_allowlist=[backend_url + "/"],
    )
    return create_app(msgspec.structs.replace(config, service=service), secrets={})


def serve(kind: str, port: int, extra: list[str]) -> None:
    import logging

    import uvicorn

    logging.disable(logging.INFO)  # one log line per request would be measured too
    if kind == "backend":
        app = bare_backend() if extra[0] == "bare" else litestar_backend(float(extra[1]))
    else:
        app = broker_app(extra[0], extra[1])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


# -- the benchmark -------------------------------------------------------------------------------


def _start(args: list[str], port: int, core: int) -> subprocess.Popen[bytes]:
    command = [sys.executable, str(Path(__file__).resolve()), *args]
    return start_server(command, port, core=core, cwd=str(ROOT))


def _register(broker: str, backend: str) -> str:
    registration = {
        "name": TOOL,
        "description": "Look up one order (benchmark).",
        "input_schema": {
            "type": "object",
            "additionalProperties": False,
            "required": ["order_id"],
            "properties": {"order_id": {"type": "string", "pattern": "^O-[0-9]+$"}},
        },
        "risk": "read",
        "idempotent": True,
        "routes": ["billing_help"],
        "adapter": {"kind": "http", "url": f"{backend}/lookup", "timeout_s": 2.0},
        "version": "1",
    }
    answer = httpx.post(f"{broker}/v1/tools", json=registration, headers=ADMIN, timeout=10)
    answer.raise_for_status()
    secret: str = answer.json()["signing_secret"]
    httpx.post(f"{backend}/_secret", content=secret.encode(), timeout=10).raise_for_status()
    return secret


def _direct_request(secret: str) -> bytes:
    from adapters.http import SIGNATURE_HEADER, TENANT_HEADER, sign, traceparent_for

    body = json.dumps(
        {
            "tool": TOOL,
            "args": ARGS,
            "tenant": "acme",
            "trace_id": "bench",
            "proposal_id": "prp_bench",
        },
        separators=(",", ":"),
    ).encode()
    headers = {
        SIGNATURE_HEADER: sign(secret, body),  # fresh per round: valid for 300 s
        TENANT_HEADER: "acme",
        "traceparent": traceparent_for("bench"),
    }
    return post("/lookup", body, headers)


def _measure(port: int, request: Any, seconds: float, connections: int) -> LoadResult:
    asyncio.run(run_load("127.0.0.1", port, request, connections=connections, seconds=0.5))
    return asyncio.run(
        run_load("127.0.0.1", port, request, connections=connections, seconds=seconds)
    )


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] in ("backend", "broker"):
        serve(sys.argv[1], int(sys.argv[2]), sys.argv[3:])
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=1)
    parser.add_argument("--ledger-fsync", choices=["always", "batch", "never"], default="always")
    parser.add_argument("--backend", choices=["litestar", "bare"], default="litestar")
    parser.add_argument(
        "--work-ms",
        type=float,
        default=0.0,
        help="the litestar backend's own I/O per call (default 0: the cheapest backend call)",
    )
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {1})

    backend_port, broker_port = free_port(), free_port()
    backend_url = f"http://127.0.0.1:{backend_port}"
    backend = _start(
        ["backend", str(backend_port), args.backend, str(args.work_ms)], backend_port, core=0
    )
    broker = _start(
        ["broker", str(broker_port), backend_url, args.ledger_fsync], broker_port, core=1
    )
    proposal = json.dumps({"tool": TOOL, "args": ARGS}).encode()
    # The demo's lookup_order: the same proposal path with a Python adapter (no outbound call).
    in_process = json.dumps({"tool": "lookup_order", "args": ARGS}).encode()
    direct_p50, direct_p99, broker_p50, broker_p99, floor_p50 = [], [], [], [], []
    try:
        secret = _register(f"http://127.0.0.1:{broker_port}", backend_url)
        for round_no in range(1, args.rounds + 1):
            signed = _direct_request(secret)
            direct = _measure(
                backend_port, lambda i, signed=signed: signed, args.seconds, args.connections
            )
            through = _measure(
                broker_port,
                lambda i: post("/v1/proposals", proposal, BILLING),
                args.seconds,
                args.connections,
            )
            floor = _measure(
                broker_port,
                lambda i: post("/v1/proposals", in_process, BILLING),
                args.seconds,
                args.connections,
            )
            for result in (direct, through, floor):
                assert set(result.statuses) == {200}, result.statuses
            print(f"round {round_no}: direct                 {direct.summary()}")
            print(f"round {round_no}: through broker         {through.summary()}")
            print(f"round {round_no}: broker, in-process tool {floor.summary()}")
            floor_p50.append(floor.percentile(50))
            direct_p50.append(direct.percentile(50))
            direct_p99.append(direct.percentile(99))
            broker_p50.append(through.percentile(50))
            broker_p99.append(through.percentile(99))
    finally:
        for process in (broker, backend):
            process.terminate()
            process.wait(timeout=10)

    d50, d99 = statistics.median(direct_p50), statistics.median(direct_p99)
    b50, b99 = statistics.median(broker_p50), statistics.median(broker_p99)
    added = (b50 - d50) / d50
    print(
        f"\nmedian of {args.rounds} rounds, {args.connections} connection(s), "
        f"{args.backend} backend doing {args.work_ms:g} ms of I/O, "
        f"ledger_fsync={args.ledger_fsync}:"
    )
    print(f"  direct to the backend: p50 {d50:6.2f} ms  p99 {d99:6.2f} ms")
    print(f"  through the broker:    p50 {b50:6.2f} ms  p99 {b99:6.2f} ms")
    print(
        f"  the broker adds {b50 - d50:.2f} ms at p50 = {added:.2f}x the direct p50 "
        f"(target <= 2x): {'met' if added <= 2 else 'NOT met'}"
    )
    f50 = statistics.median(floor_p50)
    print(
        f"  of which the proposal path itself (an in-process tool: p50 {f50:.2f} ms) and the "
        f"outbound call, signed and pooled, about {b50 - f50:.2f} ms"
    )


if __name__ == "__main__":
    main()
