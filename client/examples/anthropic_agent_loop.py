"""An Anthropic agent loop through the broker, offline: the model's turn is scripted with the
``anthropic`` SDK's own types, the tool calls run through the broker (the demo, ``make run``).

    python client/examples/anthropic_agent_loop.py [--url http://127.0.0.1:8080]
"""

from __future__ import annotations

import argparse
import json
import uuid
from typing import Any

from anthropic.types import Message
from broker_client import Client

DEMO_TOKEN = "demo-billing-token"  # the demo's billing_help route (make run)


def scripted_turn(order_id: str, amount: float, call_id: str) -> Message:
    """What a model answers when it decides to look an order up and credit it."""
    return Message.model_validate(
        {
            "id": "msg_scripted",
            "type": "message",
            "role": "assistant",
            "model": "scripted",
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 0, "output_tokens": 0},
            "content": [
                {"type": "text", "text": "Let me check the order first."},
                {
                    "type": "tool_use",
                    "id": f"toolu_{call_id}_lookup",
                    "name": "lookup_order",
                    "input": {"order_id": order_id},
                },
                {
                    "type": "tool_use",
                    "id": f"toolu_{call_id}_credit",
                    "name": "issue_credit",
                    "input": {"order_id": order_id, "amount": amount, "currency": "USD"},
                },
            ],
        }
    )


def run(url: str, token: str = DEMO_TOKEN) -> list[Any]:
    messages: list[Any] = [{"role": "user", "content": "Please refund 25 USD on order O-55291."}]
    trace_id = f"anthropic-example-{uuid.uuid4().hex[:8]}"
    with Client(url, token) as broker:
        response = scripted_turn("O-55291", 25, call_id=uuid.uuid4().hex[:8])
        messages += broker.turn("anthropic", response, trace_id=trace_id)
        reply = "I've issued a credit of 25 USD on order O-55291."
        messages.append({"role": "assistant", "content": reply})
        report = broker.check_claims(reply, trace_id=trace_id)
    for message in messages:
        print(json.dumps(message))
    print("claims backed by executions:", report.ok)
    return messages


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8080")
    run(parser.parse_args().url)
