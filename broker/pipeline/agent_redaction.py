"""A tool's ``redact_result`` keys taken out of the result the agent receives.

Taken out, not masked: the agent is not told a value it may not have, only (in
``execution.redacted``) which keys were taken, so it does not read their absence as the
backend's. The ledger records the result as the agent received it, and the names in the
receipt, so an answer rebuilt from the ledger, a replay and the first answer all agree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from broker.model import Decision, Execution

if TYPE_CHECKING:
    from broker.pipeline.context import Decided
    from broker.tools.runtime import ToolRuntime

__all__ = ["redact_answer", "redact_for_agent", "with_redacted"]


def redact_answer(decided: Decided, tool: ToolRuntime, body: Decision) -> None:
    """The tool's ``redact_result`` keys out of the agent's answer (and so of the ledger's
    record of it), their names in the receipt."""
    if not tool.redact_result:
        return
    body.execution, names = redact_for_agent(body.execution, tool.redact_result)
    if names and decided.receipt is not None:
        decided.receipt = msgspec.structs.replace(decided.receipt, redacted=names)


def redact_for_agent(
    execution: Execution | None, keys: frozenset[str]
) -> tuple[Execution | None, tuple[str, ...]]:
    """``execution`` with every key in ``keys`` (case-folded, at any depth) out of its result,
    and the keys taken out (sorted); the same object when there is nothing to take."""
    if not keys or execution is None or not execution.result:
        return execution, ()
    found: set[str] = set()
    result = _without(execution.result, keys, found)
    if not found:
        return execution, ()
    names = tuple(sorted(found))
    return msgspec.structs.replace(execution, result=result, redacted=list(names)), names


def with_redacted(execution: Execution, names: tuple[str, ...]) -> Execution:
    """An execution rebuilt from the ledger, with the names its receipt says were taken out."""
    return msgspec.structs.replace(execution, redacted=list(names)) if names else execution


def _without(value: Any, keys: frozenset[str], found: set[str]) -> Any:
    if type(value) is dict:
        kept = {}
        for key, item in value.items():
            if type(key) is str and key.casefold() in keys:
                found.add(key)
            else:
                kept[key] = _without(item, keys, found)
        return kept
    if type(value) is list:
        return [_without(item, keys, found) for item in value]
    return value
