"""The client's example agent loops, one per provider, against a real broker: each model turn is
built with that provider SDK's own types, its tool calls run through the broker, and the
messages to append parse back into the SDK's own param types."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from broker_client import Client

from adapters.demo import DemoBackend

EXAMPLES = Path(__file__).resolve().parents[2] / "client" / "examples"
FORMATS = {"openai": "openai", "anthropic": "anthropic", "gemini": "gemini"}


def _example(provider: str) -> ModuleType:
    path = EXAMPLES / f"{provider}_agent_loop.py"  # "approval" too: not a provider's
    spec = importlib.util.spec_from_file_location(f"example_{provider}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _results(provider: str, messages: list[Any]) -> list[dict[str, Any]]:
    """The tool results among the appended messages, as the model will read them."""
    if provider == "openai":
        from openai.types.chat import ChatCompletionToolMessageParam

        found = [m for m in messages if m.get("role") == "tool"]
        for message in found:  # each is a valid tool message for the SDK
            assert set(message) <= set(ChatCompletionToolMessageParam.__annotations__)
        return [json.loads(m["content"]) for m in found]
    if provider == "anthropic":
        from anthropic.types import ToolResultBlockParam

        user = [m for m in messages if m.get("role") == "user" and isinstance(m["content"], list)]
        blocks = user[-1]["content"]
        for block in blocks:  # each is a valid tool result block for the SDK
            assert set(block) <= set(ToolResultBlockParam.__annotations__)
        return [json.loads(block["content"]) for block in blocks]
    from google.genai import types

    content = types.Content.model_validate(messages[-2])  # the function responses
    parts = content.parts or []
    return [part.function_response.response for part in parts if part.function_response]


@pytest.mark.parametrize("provider", sorted(FORMATS))
def test_the_example_loop_runs_its_tool_calls_once_through_the_broker(
    provider: str, broker: tuple[str, DemoBackend], capsys: pytest.CaptureFixture[str]
) -> None:
    url, demo = broker
    example = _example(provider)
    messages = example.run(url)
    results = _results(provider, messages)
    assert [r.get("order_id") for r in results][:1] == ["O-55291"]
    assert results[1]["status"] == "issued"
    assert len(demo.credits) == 1
    assert "claims backed by executions: True" in capsys.readouterr().out


@pytest.mark.parametrize("provider", sorted(FORMATS))
def test_resending_the_same_model_turn_executes_nothing_twice(
    provider: str, broker: tuple[str, DemoBackend]
) -> None:
    url, demo = broker
    turn = _example(provider).scripted_turn("O-55291", 25, call_id="fixed")
    with Client(url, "demo-billing-token") as client:
        first = client.turn(FORMATS[provider], turn)
        again = client.turn(FORMATS[provider], turn)
    assert first == again
    assert len(demo.credits) == 1


def test_the_approval_example_waits_for_the_approver_then_reports_the_execution(
    broker: tuple[str, DemoBackend], capsys: pytest.CaptureFixture[str]
) -> None:
    url, demo = broker
    example = _example("approval")
    told = example.run(url, approver_token=example.APPROVER_TOKEN, timeout_s=10)
    assert told["outcome"] == "executed", told
    assert told["result"]["status"] == "issued"
    assert [c["amount"] for c in demo.credits] == [150]
    out = capsys.readouterr().out
    assert "a person must approve this credit" in out
    assert "approver: issue_credit" in out


def test_the_approval_example_tells_the_user_when_nobody_decided_in_time(
    broker: tuple[str, DemoBackend],
) -> None:
    url, demo = broker
    told = _example("approval").run(url, timeout_s=0.3)
    assert told["outcome"] == "still_pending"
    assert demo.credits == []
