"""The http adapter path: a loopback backend called directly, and through the broker, same run.

Server processes pinned to cores: the backend on core 0; the brokers (demo config, memory store,
file ledger in a temporary directory, one registered ``http`` tool pointing at the backend), one
per ledger fsync policy measured, on core 1 beside the load generator (one connection: it waits
while the broker works). The backend verifies every request's ``X-Broker-Signature`` and
answers a small JSON object; by default it is built like the example backend (a Litestar app,
as adapters/examples is), and ``--backend bare`` makes it a bare ASGI callable, the cheapest
backend there can be (the worst case for the ratio). The load generator alternates, round by
round:

* direct: the same signed body the broker would send, POSTed straight to the backend;
* the broker's HTTP client alone: that call made with the broker's own outbound client
  (``adapters.http.HttpPool.post``: allowlist, pooled connection, response cap), from this
  process, on the event loop the broker's server uses; no proposal path around it;
* through each broker: ``POST /v1/proposals`` for the registered read tool (token lookup,
  strict decoding, schema, admission, the signed outbound call over a pooled connection, the
  ledger record, the answer);
* each broker with an in-process tool: the same proposal path, no outbound call.

It prints p50/p99 of each and what the broker adds, as a multiple of the direct call's own p50
(target: at most 2x), per fsync policy: ``batch`` (the record is written before the answer and
fsynced about once a second) and ``always`` (the answer also waits for the fsync of its record,
which on a disk is a cost no change to the broker removes: with ``always`` it also prints one
fsync of a record-sized append on this disk, measured alone, against the direct p50). One
connection by default, so latency is not queueing.

Placement: the direct call crosses cores (load generator on core 1, backend on core 0), as the
broker's outbound call does; the broker's own hop from the load generator stays on core 1. On
this kind of box a same-core hop is the cheaper one (a direct call from core 0 measured about
0.22 ms against 0.29 ms across cores), so the direct baseline is not flattered by placement.

    python bench/bench_http_adapter.py [--seconds 5] [--rounds 3] [--connections 1]
        [--ledger-fsync batch,always] [--backend litestar|bare] [--work-ms 0]
        [--http-client httpx,http1] [--baseline NAME=PATH ...]

``--http-client`` measures this checkout's brokers (and the client alone) once per outbound
client (``BROKER_HTTP_CLIENT``): httpx's own, the default, and the hand-built ``http1`` opt-in.

``--baseline`` serves more brokers from other checkouts (another commit's tree, exported with
``git archive``) in the same rounds, so a change is priced against what it replaced.
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
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import litestar  # noqa: E402
import msgspec  # noqa: E402
from litestar import Litestar, Request, Response  # noqa: E402

from bench.loadgen import (  # noqa: E402
    LoadResult,
    free_port,
    pin_load_generator,
    post,
    run_load,
    start_server,
)

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
        secrets.append((await request.body()).decode())  # one per broker

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
            secrets.append(body.decode())
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

    from broker.gc_tuning import tune_gc_for_serving
    from broker.serving import serve

    logging.disable(logging.INFO)  # one log line per request would be measured too
    if kind == "backend":
        app = bare_backend() if extra[0] == "bare" else litestar_backend(float(extra[1]))
    else:
        app = broker_app(extra[0], extra[1])
    tune_gc_for_serving()  # as `broker serve` does (for the backend too: same footing)
    if kind == "backend":  # served as a service would be: uvicorn as it comes
        uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
    else:  # as `broker serve` serves it
        serve(app, host="127.0.0.1", port=port, log_level="warning")


# -- the benchmark -------------------------------------------------------------------------------


def _start(
    args: list[str], port: int, core: int, tree: Path = ROOT, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """This script's server mode, from ``tree`` (this checkout, or a ``--baseline`` one)."""
    command = [sys.executable, str(tree / "bench" / "bench_http_adapter.py"), *args]
    return start_server(command, port, core=core, cwd=str(tree), env=env)


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


def _body() -> bytes:
    """The JSON body the adapter sends for the bench tool."""
    call = {
        "tool": TOOL,
        "args": ARGS,
        "tenant": "acme",
        "trace_id": "bench",
        "proposal_id": "prp_bench",
    }
    return json.dumps(call, separators=(",", ":")).encode()


def _direct_request(secret: str) -> bytes:
    from adapters.http import SIGNATURE_HEADER, TENANT_HEADER, sign, traceparent_for

    body = _body()
    headers = {
        SIGNATURE_HEADER: sign(secret, body),  # fresh per round: valid for 300 s
        TENANT_HEADER: "acme",
        "traceparent": traceparent_for("bench"),
    }
    return post("/lookup", body, headers)


def _adapter_call(secret: str) -> tuple[bytes, dict[str, str]]:
    """The body and headers the adapter sends for the bench tool (fresh signature)."""
    from adapters.http import SIGNATURE_HEADER, TENANT_HEADER, sign, traceparent_for

    body = _body()
    headers = {
        "Content-Type": "application/json",
        "traceparent": traceparent_for("bench"),
        TENANT_HEADER: "acme",
        "X-Broker-Attempt": "1",
        SIGNATURE_HEADER: sign(secret, body),
        "Idempotency-Key": "bench-key",
    }
    return body, headers


async def _client_calls(backend_url: str, secret: str, seconds: float, kind: Any) -> LoadResult:
    """The broker's outbound client alone: ``HttpPool.post`` back to back on one connection."""
    from adapters.http import HttpPool
    from broker.allowlist import Allowlist

    pool = HttpPool(Allowlist([backend_url + "/"]), client=kind)
    url = f"{backend_url}/lookup"
    result = LoadResult()
    try:
        for phase_seconds, record in ((0.5, False), (seconds, True)):
            started = time.perf_counter()
            stop_at = started + phase_seconds
            while time.perf_counter() < stop_at:
                body, headers = _adapter_call(secret)  # signed per call, as the adapter does
                sent = time.perf_counter()
                status, _ = await pool.post(url, body, headers, timeout_s=2.0)
                if record:
                    result.latencies.append(time.perf_counter() - sent)
                    result.statuses[status] = result.statuses.get(status, 0) + 1
                    result.requests += 1
            if record:
                result.seconds = time.perf_counter() - started
    finally:
        await pool.aclose()
    return result


def _measure_client(backend_url: str, secret: str, seconds: float, kind: str) -> LoadResult:
    """On uvloop when it is installed, as under the broker's server (uvicorn's ``auto`` loop)."""
    calls = _client_calls(backend_url, secret, seconds, kind)
    try:
        import uvloop
    except ImportError:
        return asyncio.run(calls)
    return uvloop.run(calls)


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
    parser.add_argument(
        "--ledger-fsync",
        default="batch,always",
        help="the ledger fsync policies to measure, one broker process each (default: both "
        "of batch and always; always adds one fsync of the ledger file to every answer)",
    )
    parser.add_argument("--backend", choices=["litestar", "bare"], default="litestar")
    parser.add_argument(
        "--http-client",
        default="httpx",
        help="the outbound clients (BROKER_HTTP_CLIENT) this checkout's brokers and the client "
        "alone are measured with, comma-separated: httpx (the default), http1 (the opt-in)",
    )
    parser.add_argument(
        "--baseline",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="also measure brokers served from another checkout of this repository (its own "
        "bench/bench_http_adapter.py serves them), in the same rounds: e.g. the commit before "
        "a change, to price that change; repeatable",
    )
    parser.add_argument(
        "--work-ms",
        type=float,
        default=0.0,
        help="the litestar backend's own I/O per call (default 0: the cheapest backend call)",
    )
    args = parser.parse_args()
    policies = args.ledger_fsync.split(",")
    if not set(policies) <= {"always", "batch", "never"}:
        parser.error("--ledger-fsync takes always, batch and never, comma-separated")
    pin_load_generator()

    kinds = args.http_client.split(",")
    if not set(kinds) <= {"httpx", "http1"}:
        parser.error("--http-client takes httpx and http1, comma-separated")
    # Each broker variant: the checkout it is served from, and its environment.
    trees: dict[str, tuple[Path, dict[str, str]]] = {
        ("this checkout" if len(kinds) == 1 else f"this checkout, {kind}"): (
            ROOT,
            {"BROKER_HTTP_CLIENT": kind},
        )
        for kind in kinds
    }
    for baseline in args.baseline:
        name, _, path = baseline.partition("=")
        if not path or not (Path(path) / "bench" / "bench_http_adapter.py").is_file():
            parser.error(f"--baseline {baseline!r}: NAME=PATH to a checkout of this repository")
        trees[name] = Path(path).resolve(), {}
    variants = [(tree, policy) for tree in trees for policy in policies]

    backend_port = free_port()
    backend_url = f"http://127.0.0.1:{backend_port}"
    backend = _start(
        ["backend", str(backend_port), args.backend, str(args.work_ms)], backend_port, core=0
    )
    brokers: dict[tuple[str, str], tuple[int, subprocess.Popen[bytes]]] = {}
    proposal = json.dumps({"tool": TOOL, "args": ARGS}).encode()
    # The demo's lookup_order: the same proposal path with a Python adapter (no outbound call).
    in_process = json.dumps({"tool": "lookup_order", "args": ARGS}).encode()
    direct = _Latencies()
    client = {kind: _Latencies() for kind in kinds}
    through = {variant: _Latencies() for variant in variants}
    floor = {variant: _Latencies() for variant in variants}
    try:
        secret = ""
        for tree, policy in variants:
            port = free_port()
            command = ["broker", str(port), backend_url, policy]
            path, env = trees[tree]
            brokers[tree, policy] = port, _start(command, port, core=1, tree=path, env=env)
            secret = _register(f"http://127.0.0.1:{port}", backend_url)
        for round_no in range(1, args.rounds + 1):
            signed = _direct_request(secret)
            measured = {
                "direct": direct.add(
                    _measure(
                        backend_port,
                        lambda i, signed=signed: signed,
                        args.seconds,
                        args.connections,
                    )
                ),
            }
            for kind in kinds:
                measured[f"client alone, {kind}"] = client[kind].add(
                    _measure_client(backend_url, secret, args.seconds, kind)
                )
            for (tree, policy), (port, _) in brokers.items():
                label = policy if len(trees) == 1 else f"{policy}, {tree}"
                measured[f"through broker, {label}"] = through[tree, policy].add(
                    _measure(
                        port,
                        lambda i: post("/v1/proposals", proposal, BILLING),
                        args.seconds,
                        args.connections,
                    )
                )
                measured[f"in-process tool, {label}"] = floor[tree, policy].add(
                    _measure(
                        port,
                        lambda i: post("/v1/proposals", in_process, BILLING),
                        args.seconds,
                        args.connections,
                    )
                )
            for label, result in measured.items():
                assert set(result.statuses) == {200}, (label, result.statuses)
                print(f"round {round_no}: {label:<26} {result.summary()}")
    finally:
        for _, process in [*brokers.values(), (backend_port, backend)]:
            process.terminate()
            process.wait(timeout=10)

    print(
        f"\nmedian of {args.rounds} rounds, {args.connections} connection(s), "
        f"{args.backend} backend doing {args.work_ms:g} ms of I/O:"
    )
    print(f"  direct to the backend: {direct.line()}")
    for kind in kinds:
        print(f"  broker's client alone, {kind}: {client[kind].line()}  (HttpPool.post)")
    d50 = direct.p50()
    for tree, policy in variants:
        b50, f50 = through[tree, policy].p50(), floor[tree, policy].p50()
        added = (b50 - d50) / d50
        where = "" if len(trees) == 1 else f" [{tree}]"
        print(f"  through the broker, ledger_fsync={policy}{where}: {through[tree, policy].line()}")
        print(
            f"    the broker adds {b50 - d50:.2f} ms at p50 = {added:.2f}x the direct p50 "
            f"(target <= 2x): {'met' if added <= 2 else 'NOT met'}; the proposal path alone "
            f"(an in-process tool) p50 {f50:.2f} ms"
        )
    first = next(iter(trees))
    for tree in list(trees)[1:]:
        for policy in policies:
            ours, theirs = through[first, policy].p50(), through[tree, policy].p50()
            print(
                f"  ledger_fsync={policy}: {tree} answers in {theirs:.2f} ms at p50, {first} "
                f"in {ours:.2f} ms: {tree} takes {(ours - theirs) / ours:.1%} less"
            )
    for kind in kinds:
        print(
            f"  the broker's client alone ({kind}) takes {client[kind].p50() - d50:.2f} ms more "
            "than the direct call for the same request"
        )
    if "always" in policies:
        disk = _fsync_p50_ms()
        print(
            f"  one fsync of a ledger-sized append on this disk: p50 {disk:.2f} ms = "
            f"{disk / d50:.2f}x the direct p50, which ledger_fsync=always adds at the least"
        )


def _fsync_p50_ms(appends: int = 2000) -> float:
    """What the disk alone makes an ``always`` answer wait: append a record-sized line to a file
    beside the brokers' ledgers and fsync it, from this process, one at a time."""
    line = b"x" * 1500 + b"\n"
    with tempfile.TemporaryDirectory(prefix="bench-fsync-") as scratch:
        fd = os.open(Path(scratch) / "fsync", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            waits = []
            for _ in range(appends):
                started = time.perf_counter()
                os.write(fd, line)
                os.fsync(fd)
                waits.append(time.perf_counter() - started)
        finally:
            os.close(fd)
    return statistics.median(waits) * 1000


class _Latencies:
    """p50 and p99 of each round, and their medians over the rounds."""

    def __init__(self) -> None:
        self.p50s: list[float] = []
        self.p99s: list[float] = []

    def add(self, result: LoadResult) -> LoadResult:
        self.p50s.append(result.percentile(50))
        self.p99s.append(result.percentile(99))
        return result

    def p50(self) -> float:
        return statistics.median(self.p50s)

    def line(self) -> str:
        return f"p50 {self.p50():6.2f} ms  p99 {statistics.median(self.p99s):6.2f} ms"


if __name__ == "__main__":
    main()
