"""The lifecycle phase of a call, derived where its front door knows it (seed 001).

A phase says which part of the tool workflow a call belongs to, so that a policy rule can govern
one part and not another (``[[policy.rules]] phases = [...]``):

- ``planning``: the agent previews what it would do; nothing executes (a dry run).
- ``execution``: the model asks for the action to be carried out.
- ``result_interpretation``: the model made this call right after reading tool results (the
  conversation it answered ends with them): it is choosing the next action from what a tool
  returned, where injected instructions in that result would act.

The phase is derived, never taken from the caller's word: a field the agent could set would let
a prompt-injected agent pick the phase that escapes a rule. ``POST /v1/tool-calls`` derives it
from the conversation the caller passes in the provider's own format (absent: ``execution``);
``POST /v1/proposals`` and MCP ``tools/call`` carry no conversation, so their calls are
``execution`` (``planning`` for dry runs).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal, get_args

__all__ = ["PHASES", "Phase", "conversation_phase", "proposal_phase"]

Phase = Literal["planning", "execution", "result_interpretation"]
PHASES: tuple[str, ...] = get_args(Phase)


def proposal_phase(dry_run: bool) -> Phase:
    """A call without a conversation: a dry run plans, anything else executes."""
    return "planning" if dry_run else "execution"


def conversation_phase(
    provider: str, conversation: Sequence[dict[str, Any]] | None, *, dry_run: bool
) -> Phase:
    """The phase of the calls a model made after reading ``conversation`` (its messages in
    ``provider``'s own format, with or without the model's own turn at the end)."""
    if dry_run:
        return "planning"
    if not conversation:
        return "execution"
    own, read_results = _FORMATS[provider]
    for message in reversed(conversation):
        if own(message):
            continue  # the turn that made these calls: look at what came before it
        return "result_interpretation" if read_results(message) else "execution"
    return "execution"


def _blocks(message: dict[str, Any], key: str) -> list[Any]:
    found = message.get(key)
    return found if isinstance(found, list) else []


def _openai_own(message: dict[str, Any]) -> bool:
    return message.get("role") == "assistant"


def _openai_results(message: dict[str, Any]) -> bool:
    return message.get("role") in ("tool", "function")


def _anthropic_own(message: dict[str, Any]) -> bool:
    return message.get("role") == "assistant"


def _anthropic_results(message: dict[str, Any]) -> bool:
    return message.get("role") == "user" and any(
        isinstance(block, dict) and block.get("type") == "tool_result"
        for block in _blocks(message, "content")
    )


def _responses_own(item: dict[str, Any]) -> bool:
    kind = item.get("type")
    if kind == "message" or (kind is None and "role" in item):
        return item.get("role") == "assistant"
    return isinstance(kind, str) and kind.endswith("_call")  # function_call, web_search_call


def _responses_results(item: dict[str, Any]) -> bool:
    kind = item.get("type")
    return isinstance(kind, str) and kind.endswith("_call_output")


def _gemini_own(content: dict[str, Any]) -> bool:
    return content.get("role") == "model"


def _gemini_results(content: dict[str, Any]) -> bool:
    return any(
        isinstance(part, dict) and "functionResponse" in part for part in _blocks(content, "parts")
    )


_Test = Callable[[dict[str, Any]], bool]
_FORMATS: dict[str, tuple[_Test, _Test]] = {
    "openai": (_openai_own, _openai_results),
    "anthropic": (_anthropic_own, _anthropic_results),
    "openai-responses": (_responses_own, _responses_results),
    "gemini": (_gemini_own, _gemini_results),
}
