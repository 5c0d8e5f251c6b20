"""What the request-head limits (``broker.http_limits``) cost: uvicorn's stock httptools protocol
against the broker's, each fed the same proposal-sized request in process, CPU microseconds per
request (best of several interleaved rounds), and what the I-JSON repeated-key check costs on the
benchmark's proposal body.

    python bench/bench_http_limits.py [--requests 5000] [--rounds 11]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import timeit
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import uvicorn  # noqa: E402
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol  # noqa: E402
from uvicorn.server import ServerState  # noqa: E402

from bench.bodies import TICKET  # noqa: E402
from broker.api.json_body import duplicate_key_pointers  # noqa: E402
from broker.api.proposal_body import decode_proposal  # noqa: E402
from broker.http_limits import HttpLimits, protocol_for  # noqa: E402

REQUEST = (
    b"POST /v1/proposals HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"
    b"Authorization: Bearer demo-billing-token\r\nContent-Type: application/json\r\n"
    b"Accept: */*\r\nUser-Agent: bench\r\nContent-Length: %d\r\n\r\n" % len(TICKET)
) + TICKET


async def _app(scope: Any, receive: Any, send: Any) -> None:
    await receive()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


class _Transport(asyncio.Transport):
    """Swallows what the protocol writes; counts the writes."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0
        self.closing = False

    def write(self, data: Any) -> None:
        self.writes += 1

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 1), "sockname": ("127.0.0.1", 2)}.get(name, default)

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def _per_request_us(protocol_class: type[HttpToolsProtocol], requests: int) -> float:
    config = uvicorn.Config(_app, log_level="warning", lifespan="off")
    config.load()
    loop = asyncio.get_running_loop()
    protocol = protocol_class(config=config, server_state=ServerState(), app_state={}, _loop=loop)
    transport = _Transport()
    protocol.connection_made(transport)
    started = time.process_time()
    for _ in range(requests):
        protocol.data_received(REQUEST)
        await asyncio.sleep(0)  # the app's task runs
        await asyncio.sleep(0)
    elapsed = time.process_time() - started
    if transport.writes < requests:
        raise RuntimeError("the protocol did not answer every request")
    protocol.connection_lost(None)
    return elapsed / requests * 1e6


async def _protocols(requests: int, rounds: int) -> dict[str, float]:
    variants = {"stock": HttpToolsProtocol, "limited": protocol_for(HttpLimits())}
    best = dict.fromkeys(variants, float("inf"))
    for _ in range(rounds):  # interleaved, so a noisy neighbour hits both alike
        for name, cls in variants.items():
            best[name] = min(best[name], await _per_request_us(cls, requests))
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=11)
    args = parser.parse_args()
    best = asyncio.run(_protocols(args.requests, args.rounds))
    print(f"uvicorn httptools protocol, stock:   {best['stock']:6.2f} us CPU per request")
    print(f"with the request-head limits:        {best['limited']:6.2f} us CPU per request")
    print(f"  the limits cost:                   {best['limited'] - best['stock']:6.2f} us")
    n = 100_000
    check = min(timeit.repeat(lambda: duplicate_key_pointers(TICKET), number=n, repeat=7))
    decode = min(timeit.repeat(lambda: decode_proposal(TICKET), number=n, repeat=7))
    print(f"I-JSON repeated-key check, proposal: {check / n * 1e6:6.2f} us")
    print(f"decode_proposal, the check included: {decode / n * 1e6:6.2f} us")


if __name__ == "__main__":
    main()
