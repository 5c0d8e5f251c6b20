"""The broker's front doors for one tool call, measured in one run against the same broker.

``POST /v1/proposals`` (the typed ingress) and ``POST /v1/tool-calls`` with one OpenAI Chat
Completions call: the same tool (create_support_ticket, both preconditions, a fresh idempotency
key per request), the same demo broker, each measured in its own fresh server process pinned to
core 0 with the load generator on core 1. Rounds alternate the order; ratios pair one round's
measurements. Target: ``/v1/tool-calls`` >= 0.9x the proposal path's throughput.

    python bench/bench_front_doors.py [--seconds 5] [--rounds 3] [--connections 32]
        [--store sqlite|memory]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bodies import HEADERS, TICKET, TICKET_TOOL_CALL  # noqa: E402
from bench.doors import Door, compare  # noqa: E402
from bench.loadgen import post  # noqa: E402

DOORS: dict[str, Door] = {
    "POST /v1/proposals": lambda r, i: post("/v1/proposals", TICKET % (r, i), HEADERS),
    "POST /v1/tool-calls (openai)": lambda r, i: post(
        "/v1/tool-calls", TICKET_TOOL_CALL % (r, i), HEADERS
    ),
}


def main() -> None:
    compare(DOORS, ratio="tool-calls/proposals", target=0.9)


if __name__ == "__main__":
    main()
