"""``redact_for_agent``: a tool's ``redact_result`` keys out of the result, wherever they are."""

from __future__ import annotations

from broker.model import Execution
from broker.pipeline.agent_redaction import redact_for_agent, with_redacted


def test_keys_are_taken_out_at_any_depth_and_in_lists_case_insensitively() -> None:
    result = {
        "Card_Number": "4111",
        "orders": [{"id": 1, "card_number": "4242", "lines": [{"card_number": "x"}]}, 7],
        "note": {"card_number": None, "kept": True},
    }
    execution = Execution(status="succeeded", result=result, attempts=1)
    redacted, names = redact_for_agent(execution, frozenset({"card_number"}))
    assert redacted is not None
    assert redacted.result == {
        "orders": [{"id": 1, "lines": [{}]}, 7],
        "note": {"kept": True},
    }
    assert names == ("Card_Number", "card_number")
    assert redacted.redacted == ["Card_Number", "card_number"]
    assert execution.result is result and "Card_Number" in result  # the original is untouched


def test_nothing_to_take_leaves_the_same_object_and_no_member() -> None:
    execution = Execution(status="succeeded", result={"id": 1}, attempts=1)
    assert redact_for_agent(execution, frozenset({"secret"})) == (execution, ())
    assert redact_for_agent(execution, frozenset()) == (execution, ())
    assert redact_for_agent(None, frozenset({"secret"})) == (None, ())
    failed = Execution(status="failed", result=None)
    assert redact_for_agent(failed, frozenset({"secret"})) == (failed, ())
    assert with_redacted(execution, ()) is execution
    assert with_redacted(execution, ("a",)).redacted == ["a"]
