"""``tool_execute`` against a direct call of the same tool, through the same front door.

Both go to ``POST /v1/tool-calls`` as one OpenAI Chat Completions call of create_support_ticket
(both preconditions, a fresh call id, hence idempotency key, per request) on the demo broker:
directly on ``billing_help`` (``tools`` catalog), and as ``tool_execute(tool_id, args)`` on
``gateway_billing`` (``gateway`` catalog). Each is measured in its own fresh server process pinned
to core 0 with the load generator on core 1; rounds alternate the order and ratios pair one
round's measurements. Target: ``tool_execute`` >= 0.9x the direct call's throughput.

    python bench/bench_gateway_execute.py [--seconds 5] [--rounds 3] [--connections 32]
        [--store sqlite|memory]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bodies import HEADERS, TICKET_TOOL_CALL, ticket  # noqa: E402
from bench.doors import Door, compare  # noqa: E402
from bench.loadgen import post  # noqa: E402

GATEWAY_HEADERS = {"Authorization": "Bearer demo-gateway-token"}
"""The demo's gateway_billing token (acme): the same three tools, behind the meta-tools."""

TICKET_ID = "demo:create_support_ticket@1"


def _execute_call() -> bytes:
    arguments = {"tool_id": TICKET_ID, "args": ticket("")["args"]}
    call = {
        "id": "bench-%d-%d",
        "type": "function",
        "function": {"name": "tool_execute", "arguments": json.dumps(arguments)},
    }
    # Escaped for %-formatting of the call id only.
    raw = json.dumps({"format": "openai", "calls": [call]}, separators=(",", ":"))
    return raw.replace("%", "%%").replace("bench-%%d-%%d", "bench-%d-%d").encode()


EXECUTE_TOOL_CALL = _execute_call()

DOORS: dict[str, Door] = {
    "direct create_support_ticket": lambda r, i: post(
        "/v1/tool-calls", TICKET_TOOL_CALL % (r, i), HEADERS
    ),
    "tool_execute(create_support_ticket)": lambda r, i: post(
        "/v1/tool-calls", EXECUTE_TOOL_CALL % (r, i), GATEWAY_HEADERS
    ),
}


def main() -> None:
    compare(DOORS, ratio="tool_execute/direct", target=0.9)


if __name__ == "__main__":
    main()
