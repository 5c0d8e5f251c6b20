"""A Gemini agent loop through the broker, offline: the model's turn is scripted with the
``google-genai`` SDK's own types, the tool calls run through the broker (the demo, ``make run``).

    python client/examples/gemini_agent_loop.py [--url http://127.0.0.1:8080]
"""

from __future__ import annotations

import argparse
import json
import uuid
from typing import Any

from broker_client import Client
from google.genai import types

DEMO_TOKEN = "demo-billing-token"  # the demo's billing_help route (make run)


def scripted_turn(order_id: str, amount: float, call_id: str) -> types.GenerateContentResponse:
    """What a model answers when it decides to look an order up and credit it."""
    calls = [
        types.FunctionCall(
            id=f"{call_id}-lookup", name="lookup_order", args={"order_id": order_id}
        ),
        types.FunctionCall(
            id=f"{call_id}-credit",
            name="issue_credit",
            args={"order_id": order_id, "amount": amount, "currency": "USD"},
        ),
    ]
    content = types.Content(role="model", parts=[types.Part(function_call=c) for c in calls])
    return types.GenerateContentResponse(candidates=[types.Candidate(content=content)])


def run(url: str, token: str = DEMO_TOKEN) -> list[Any]:
    contents: list[Any] = [
        {"role": "user", "parts": [{"text": "Please refund 25 USD on order O-55291."}]}
    ]
    trace_id = f"gemini-example-{uuid.uuid4().hex[:8]}"
    with Client(url, token) as broker:
        response = scripted_turn("O-55291", 25, call_id=uuid.uuid4().hex[:8])
        contents += broker.turn("gemini", response, trace_id=trace_id)
        reply = "I've issued a credit of 25 USD on order O-55291."
        contents.append({"role": "model", "parts": [{"text": reply}]})
        report = broker.check_claims(reply, trace_id=trace_id)
    for content in contents:
        print(json.dumps(content))
    print("claims backed by executions:", report.ok)
    return contents


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8080")
    run(parser.parse_args().url)
