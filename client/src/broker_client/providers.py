"""From a provider's response to the messages an agent loop appends next.

Each function takes the provider SDK's own response object (or the same thing as plain JSON) and
needs no provider SDK installed: SDK objects are read through their ``model_dump``.
"""

from __future__ import annotations

from typing import Any

from broker_client._protocol import plain
from broker_client.models import ToolCallsAnswer

__all__ = ["FORMATS", "assistant_turn", "has_tool_calls", "messages_to_append"]

FORMATS = ("openai", "openai-responses", "anthropic", "gemini")


def assistant_turn(format: str, response: Any) -> Any:
    """The model's turn in a provider response, as plain JSON ready to append and to send.

    ``openai``: a ``ChatCompletion`` (its first choice's message) or the message itself;
    ``openai-responses``: a ``Response`` (its ``output`` items) or the item list;
    ``anthropic``: a ``Message``, as ``{"role": "assistant", "content": [...]}``;
    ``gemini``: a ``GenerateContentResponse`` (its first candidate's content) or a ``Content``.
    """
    data = plain(response)
    if format == "openai":
        if isinstance(data, dict) and "choices" in data:
            return data["choices"][0]["message"]
        return data
    if format == "openai-responses":
        if isinstance(data, dict) and "output" in data:
            return data["output"]
        return data
    if format == "anthropic":
        if isinstance(data, dict) and "content" in data:
            return {"role": data.get("role", "assistant"), "content": data["content"]}
        return data
    if format == "gemini":
        if isinstance(data, dict) and "candidates" in data:
            return data["candidates"][0]["content"]
        return data
    raise ValueError(f"unknown format {format!r}; expected one of {', '.join(FORMATS)}")


def has_tool_calls(format: str, turn: Any) -> bool:
    """Whether the model asked for any tool in this turn."""
    if format == "openai":
        return bool(turn.get("tool_calls"))
    if format == "openai-responses":
        return any(item.get("type") == "function_call" for item in turn)
    if format == "anthropic":
        return any(block.get("type") == "tool_use" for block in turn.get("content", []))
    if format == "gemini":
        return any("functionCall" in part for part in turn.get("parts", []))
    raise ValueError(f"unknown format {format!r}; expected one of {', '.join(FORMATS)}")


def messages_to_append(format: str, turn: Any, answer: ToolCallsAnswer | None) -> list[Any]:
    """The model's turn, then the broker's results, in the order the provider expects them."""
    own = list(turn) if format == "openai-responses" else [turn]
    if answer is None:
        return own
    results = answer.results
    return own + (list(results) if isinstance(results, list) else [results])
