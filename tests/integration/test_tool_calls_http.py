"""``POST /v1/tool-calls`` over real HTTP: each provider's tool calls, built with that provider's
own SDK types, go in; the answer parses back into the SDK's own result types; every call is a
proposal through the whole chain, counted at the demo backend and read back from the ledger."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from anthropic.types import (
    Message,
    TextBlock,
    ToolResultBlockParam,
    ToolUseBlock,
    Usage,
    UserMessageParam,
)
from google.genai import types as gemini
from openai.types.chat import (
    ChatCompletionMessage,
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionToolMessageParam,
)
from openai.types.chat.chat_completion_message_function_tool_call import Function
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage
from openai.types.responses.response_input_param import FunctionCallOutput
from openai.types.responses.response_output_text import ResponseOutputText
from pydantic import TypeAdapter

from adapters.demo import DemoBackend
from tests.conftest import BILLING, SCHEDULING

CREDIT = {"order_id": "O-55291", "amount": 25, "currency": "USD"}
UNPAID = {"order_id": "O-60000", "amount": 10, "currency": "USD"}
LOOKUP = {"order_id": "O-55291"}


@pytest.fixture
def effects(tmp_path: Path) -> Path:
    """The demo backend's effects file: one line per ticket or credit, with its idempotency key."""
    return tmp_path / "effects.jsonl"


@pytest.fixture
def demo(make_broker: Callable[..., tuple[str, Any]], effects: Path) -> tuple[str, DemoBackend]:
    backend = DemoBackend(effects_path=str(effects))
    url, _ = make_broker(backends={"demo": backend})
    return url, backend


@pytest.fixture
async def http(demo: tuple[str, DemoBackend]) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=demo[0], timeout=10) as client:
        yield client


def executed_keys(effects: Path) -> list[str]:
    """The idempotency key of every write the backend executed, in order."""
    if not effects.exists():
        return []
    return [json.loads(line)["idempotency_key"] for line in effects.read_text().splitlines()]


async def tool_calls(
    http: httpx.AsyncClient, format: str, calls: Any, headers: dict[str, str] = BILLING, **more: Any
) -> dict[str, Any]:
    response = await http.post(
        "/v1/tool-calls", json={"format": format, "calls": calls, **more}, headers=headers
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    body: dict[str, Any] = response.json()
    assert body["format"] == format
    return body


def openai_turn(*calls: tuple[str, str, str]) -> dict[str, Any]:
    message = ChatCompletionMessage(
        role="assistant",
        content=None,
        tool_calls=[
            ChatCompletionMessageFunctionToolCall(
                id=call_id, type="function", function=Function(name=name, arguments=arguments)
            )
            for call_id, name, arguments in calls
        ],
    )
    return message.model_dump(mode="json", exclude_none=True)


def tool_messages(body: dict[str, Any]) -> list[ChatCompletionToolMessageParam]:
    adapter = TypeAdapter(ChatCompletionToolMessageParam)
    messages = [adapter.validate_python(result) for result in body["results"]]
    assert messages == body["results"]  # nothing the SDK's type does not know
    return messages


async def verified_ledger(http: httpx.AsyncClient) -> None:
    report = await http.get(
        "/v1/audit/verify", headers={"Authorization": "Bearer demo-admin-token"}
    )
    assert report.status_code == 200, report.text
    assert report.json()["ok"] is True, report.text


# -- OpenAI Chat Completions ------------------------------------------------------------------------


async def test_openai_turn_executes_and_answers_tool_messages(
    http: httpx.AsyncClient, effects: Path
) -> None:
    turn = openai_turn(
        ("call_lookup", "lookup_order", json.dumps(LOOKUP)),
        ("call_credit", "issue_credit", json.dumps(CREDIT)),
    )
    body = await tool_calls(http, "openai", turn)
    lookup, credit = tool_messages(body)
    assert lookup["role"] == "tool" and lookup["tool_call_id"] == "call_lookup"
    assert json.loads(str(lookup["content"]))["order_id"] == "O-55291"
    assert credit["tool_call_id"] == "call_credit"
    issued = json.loads(str(credit["content"]))
    assert issued["status"] == "issued" and issued["amount"] == 25
    assert executed_keys(effects) == ["openai:call_credit"]
    # decisions: exactly what POST /v1/proposals answers, keyed by the call id
    first, second = body["decisions"]
    assert first["decision"] == second["decision"] == "approved"
    assert (first["tool"], second["tool"]) == ("lookup_order", "issue_credit")
    assert second["execution"]["result"] == issued
    assert json.loads(effects.read_text())["credit_id"] == issued["credit_id"]
    stored = await http.get(f"/v1/proposals/{second['proposal_id']}", headers=BILLING)
    assert stored.json()["execution"]["result"] == issued
    await verified_ledger(http)


async def test_the_same_turn_sent_again_executes_nothing_twice(
    http: httpx.AsyncClient, effects: Path
) -> None:
    turn = openai_turn(("call_1", "issue_credit", json.dumps(CREDIT)))
    first = await tool_calls(http, "openai", turn)
    again = await tool_calls(http, "openai", turn)
    assert len(executed_keys(effects)) == 1
    assert first["results"] == again["results"]
    assert again["decisions"][0]["replayed"] is True
    assert again["decisions"][0]["proposal_id"] == first["decisions"][0]["proposal_id"]
    # the caller's own key for a call id replaces "<format>:<call id>"
    mapped = await tool_calls(http, "openai", turn, idempotency_keys={"call_1": "my-credit-key"})
    assert mapped["decisions"][0]["replayed"] is False
    assert len(executed_keys(effects)) == 2
    assert executed_keys(effects) == ["openai:call_1", "my-credit-key"]


async def test_a_mixed_turn_answers_every_call_in_order(
    http: httpx.AsyncClient, effects: Path
) -> None:
    turn = openai_turn(
        ("call_ok", "issue_credit", json.dumps(CREDIT)),
        ("call_refused", "issue_credit", json.dumps({**UNPAID})),
        ("call_unknown", "delete_everything", "{}"),
        ("call_garbled", "issue_credit", '{"order_id": "O-55291", "amount": 2'),
        ("call_listish", "lookup_order", "[1, 2]"),
    )
    body = await tool_calls(http, "openai", turn)
    messages = tool_messages(body)
    assert [m["tool_call_id"] for m in messages] == [
        "call_ok",
        "call_refused",
        "call_unknown",
        "call_garbled",
        "call_listish",
    ]
    contents = [json.loads(str(m["content"])) for m in messages]
    assert contents[0]["status"] == "issued"
    errors = [c["error"] for c in contents[1:]]
    assert [(e["category"], e["code"]) for e in errors] == [
        ("PRECONDITION", "precondition_failed"),
        ("SCHEMA", "unknown_tool"),
        ("SCHEMA", "schema_invalid"),
        ("SCHEMA", "schema_invalid"),
    ]
    for error in errors:
        assert error["reason"] and error["remediation"], error
    assert errors[2]["errors"] == [
        {
            "path": "/calls/tool_calls/3/function/arguments",
            "message": "the arguments are not valid JSON",
        }
    ]
    assert errors[3]["errors"][0]["message"] == "the arguments must be a JSON object"
    assert len(executed_keys(effects)) == 1  # only the good call ran
    assert [d["code"] for d in body["decisions"]] == [
        None,
        "precondition_failed",
        "unknown_tool",
        "schema_invalid",
        "schema_invalid",
    ]
    await verified_ledger(http)


async def test_a_call_outside_the_route_is_its_own_authz_error(
    http: httpx.AsyncClient, effects: Path
) -> None:
    turn = openai_turn(
        ("call_read", "lookup_order", json.dumps(LOOKUP)),
        ("call_write", "issue_credit", json.dumps(CREDIT)),
    )
    body = await tool_calls(http, "openai", turn, headers=SCHEDULING)
    read, write = (json.loads(str(m["content"])) for m in tool_messages(body))
    assert read["order_id"] == "O-55291"
    assert write["error"]["category"] == "AUTHZ"
    assert write["error"]["code"] == "tool_not_allowed"
    assert executed_keys(effects) == []


async def test_dry_run_and_session_apply_to_every_call(
    http: httpx.AsyncClient, effects: Path
) -> None:
    turn = openai_turn(("call_dry", "issue_credit", json.dumps(CREDIT)))
    body = await tool_calls(http, "openai", turn, dry_run=True, trace_id="trace-native-1")
    decision = body["decisions"][0]
    assert decision["dry_run"] is True and decision["trace_id"] == "trace-native-1"
    assert json.loads(body["results"][0]["content"]) == {
        "would_issue": {"order_id": "O-55291", "amount": 25}
    }
    assert executed_keys(effects) == []


# -- OpenAI Responses -------------------------------------------------------------------------------


async def test_openai_responses_items_answer_function_call_outputs(
    http: httpx.AsyncClient, effects: Path
) -> None:
    items = [
        ResponseOutputMessage(
            id="msg_1",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text="Issuing it.", annotations=[])],
        ),
        ResponseFunctionToolCall(
            type="function_call",
            id="fc_1",
            call_id="call_r1",
            name="issue_credit",
            arguments=json.dumps(CREDIT),
        ),
        ResponseFunctionToolCall(
            type="function_call", call_id="call_r2", name="lookup_order", arguments="not json"
        ),
    ]
    payload = [item.model_dump(mode="json", exclude_none=True) for item in items]
    body = await tool_calls(http, "openai-responses", payload)
    adapter = TypeAdapter(FunctionCallOutput)
    outputs = [adapter.validate_python(result) for result in body["results"]]
    assert outputs == body["results"]
    assert [o["call_id"] for o in outputs] == ["call_r1", "call_r2"]
    assert all(o["type"] == "function_call_output" for o in outputs)
    assert json.loads(str(outputs[0]["output"]))["status"] == "issued"
    assert json.loads(str(outputs[1]["output"]))["error"]["code"] == "schema_invalid"
    assert executed_keys(effects) == ["openai-responses:call_r1"]
    again = await tool_calls(http, "openai-responses", payload)
    assert again["results"] == body["results"] and len(executed_keys(effects)) == 1
    # the response object holding the items reads the same (and replays the same)
    whole = await tool_calls(http, "openai-responses", {"id": "resp_1", "output": payload})
    assert whole["results"][0] == body["results"][0] and len(executed_keys(effects)) == 1
    garbled = json.loads(whole["results"][1]["output"])["error"]
    assert garbled["errors"][0]["path"] == "/calls/output/2/arguments"


# -- Anthropic --------------------------------------------------------------------------------------


async def test_anthropic_message_answers_one_user_message_of_tool_results(
    http: httpx.AsyncClient, effects: Path
) -> None:
    message = Message(
        id="msg_01",
        type="message",
        role="assistant",
        model="claude-sonnet-4-5",
        stop_reason="tool_use",
        usage=Usage(input_tokens=10, output_tokens=10),
        content=[
            TextBlock(type="text", text="Let me credit that order."),
            ToolUseBlock(type="tool_use", id="toolu_01", name="issue_credit", input=CREDIT),
            ToolUseBlock(type="tool_use", id="toolu_02", name="issue_credit", input=UNPAID),
        ],
    )
    payload = message.model_dump(mode="json", exclude_none=True)
    body = await tool_calls(http, "anthropic", payload)
    # The message's content is an Iterable, which pydantic validates lazily: check the
    # envelope's keys, then each block as the SDK's ToolResultBlockParam.
    assert set(body["results"]) == {"role", "content"} <= set(UserMessageParam.__annotations__)
    assert body["results"]["role"] == "user"
    block = TypeAdapter(ToolResultBlockParam)
    blocks = [block.validate_python(b) for b in body["results"]["content"]]
    assert blocks == body["results"]["content"]
    assert [b["tool_use_id"] for b in blocks] == ["toolu_01", "toolu_02"]
    ok, refused = body["results"]["content"]
    assert ok["type"] == refused["type"] == "tool_result"
    assert ok["is_error"] is False and json.loads(ok["content"])["status"] == "issued"
    assert refused["is_error"] is True
    error = json.loads(refused["content"])["error"]
    assert error["code"] == "precondition_failed" and error["remediation"].startswith(
        "ASK_FOR_MORE"
    )
    assert executed_keys(effects) == ["anthropic:toolu_01"]
    # the content list alone is accepted too, and the same ids replay
    again = await tool_calls(http, "anthropic", payload["content"])
    assert again["results"] == body["results"]
    assert len(executed_keys(effects)) == 1


# -- Gemini -----------------------------------------------------------------------------------------


async def test_gemini_content_answers_function_responses(
    http: httpx.AsyncClient, effects: Path
) -> None:
    content = gemini.Content(
        role="model",
        parts=[
            gemini.Part(text="Checking the order, then crediting it."),
            gemini.Part(
                function_call=gemini.FunctionCall(id="fc-1", name="lookup_order", args=LOOKUP)
            ),
            gemini.Part(
                function_call=gemini.FunctionCall(id="fc-2", name="issue_credit", args=CREDIT)
            ),
            gemini.Part(
                function_call=gemini.FunctionCall(name="issue_credit", args={**CREDIT, "amount": 5})
            ),
        ],
    )
    payload = content.model_dump(mode="json", by_alias=True, exclude_none=True)
    body = await tool_calls(http, "gemini", payload)
    reply = gemini.Content.model_validate(body["results"])
    assert reply.role == "user"
    responses = [part.function_response for part in reply.parts or []]
    assert all(r is not None for r in responses)
    lookup, credit, keyless = (r for r in responses if r is not None)
    assert (lookup.id, lookup.name) == ("fc-1", "lookup_order")
    assert lookup.response == {**lookup.response, "order_id": "O-55291"}
    assert credit.id == "fc-2" and (credit.response or {})["status"] == "issued"
    # no id, no key: a write tool's call is refused in its own response
    assert keyless.id is None
    assert (keyless.response or {})["error"]["code"] == "idempotency_key_missing"
    assert executed_keys(effects) == ["gemini:fc-2"]
    # the SDK's own plain (snake_case) dump of the parts reads the same
    plain = [part.model_dump(mode="json", exclude_none=True) for part in content.parts or []]
    again = await tool_calls(http, "gemini", plain)
    assert again["results"] == body["results"] and len(executed_keys(effects)) == 1
