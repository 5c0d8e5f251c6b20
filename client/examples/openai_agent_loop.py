"""An OpenAI agent loop through the broker, offline: the model's turn is scripted with the
``openai`` SDK's own types, the tool calls run through the broker (the demo, ``make run``).

    python client/examples/openai_agent_loop.py [--url http://127.0.0.1:8080]
"""

from __future__ import annotations

import argparse
import json
import uuid
from typing import Any

from broker_client import Client
from openai.types.chat import ChatCompletion

DEMO_TOKEN = "demo-billing-token"  # the demo's billing_help route (make run)


def _call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def scripted_turn(order_id: str, amount: float, call_id: str) -> ChatCompletion:
    """What a model answers when it decides to look an order up and credit it."""
    credit = {"order_id": order_id, "amount": amount, "currency": "USD"}
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            _call(f"{call_id}-lookup", "lookup_order", {"order_id": order_id}),
            _call(f"{call_id}-credit", "issue_credit", credit),
        ],
    }
    return ChatCompletion.model_validate(
        {
            "id": "chatcmpl-scripted",
            "object": "chat.completion",
            "created": 0,
            "model": "scripted",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}],
        }
    )


def run(url: str, token: str = DEMO_TOKEN) -> list[Any]:
    messages: list[Any] = [{"role": "user", "content": "Please refund 25 USD on order O-55291."}]
    trace_id = f"openai-example-{uuid.uuid4().hex[:8]}"
    with Client(url, token) as broker:
        response = scripted_turn("O-55291", 25, call_id=f"call-{uuid.uuid4().hex[:8]}")
        messages += broker.turn("openai", response, trace_id=trace_id)
        # The model's next turn would read these results; here it says what it did.
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
