"""Argument repair over real HTTP: each coercion reaches the backend repaired, is answered and is
recorded in a ledger that verifies; near-misses that could change meaning are refused as sent;
routes without ``argument_repair`` repair nothing; idempotency keys hold across repairs."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from typing import Any

import httpx
import pytest

from adapters.demo import DemoBackend
from broker.config import BrokerConfig, parse_config
from broker.plugins import Adapter, AdapterContext, Backend, PreconditionVerifier
from tests.conftest import ADMIN, BILLING, SCHEDULING
from tests.fakes import demo_raw
from tests.integration.test_tool_calls_http import openai_turn

MakeBroker = Callable[..., tuple[str, Mapping[str, Backend]]]

SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "count": {"type": "integer", "minimum": 0},
        "price": {"type": "number"},
        "urgent": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        "priority": {"enum": ["low", "normal", "high"]},
        "code": {"enum": ["ABC", "abc"]},
        "item": {"$ref": "#/$defs/item"},
        "pin": {"type": "integer"},
    },
    "$defs": {
        "item": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"qty": {"type": "integer"}},
        }
    },
}


class _Recording:
    def __init__(self, calls: list[dict[str, Any]]) -> None:
        self._calls = calls

    async def invoke(self, args: dict[str, Any], ctx: AdapterContext) -> dict[str, Any]:
        self._calls.append(copy.deepcopy(args))
        return {"got": args}


class RecordingBackend:
    """One operation that records the arguments it received and answers them back."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    @property
    def adapters(self) -> Mapping[str, Adapter]:
        return {"shape": _Recording(self.calls)}

    @property
    def verifiers(self) -> Mapping[str, PreconditionVerifier]:
        return {}


def repair_config(*, repair_on: str = "billing_help") -> BrokerConfig:
    raw = demo_raw()
    raw["backends"]["rec"] = {"factory": "tests.fakes:create_fake"}
    for name, risk in (("shape_read", "read"), ("shape_write", "write")):
        raw["tools"][name] = {
            "description": "Echo the arguments' shape.",
            "risk": risk,
            "input_schema": SCHEMA,
            "adapter": {"kind": "python", "backend": "rec", "operation": "shape"},
            "sensitive": ["pin"],
        }
    raw["routes"]["billing_help"]["tools"] += ["shape_read", "shape_write"]
    raw["routes"]["scheduling"]["tools"] += ["shape_read"]
    raw["routes"][repair_on]["argument_repair"] = True
    return parse_config(raw)


@pytest.fixture
def served(make_broker: MakeBroker) -> tuple[str, RecordingBackend]:
    backend = RecordingBackend()
    url, _ = make_broker(repair_config(), backends={"demo": DemoBackend(), "rec": backend})
    return url, backend


def propose(
    url: str, args: dict[str, Any], *, token: dict[str, str] = BILLING, **extra: Any
) -> httpx.Response:
    body = {"tool": "shape_read", "args": args, **extra}
    return httpx.post(f"{url}/v1/proposals", json=body, headers=token, timeout=10)


def trace_records(url: str, trace_id: str) -> list[dict[str, Any]]:
    answer = httpx.get(f"{url}/v1/traces/{trace_id}", headers=ADMIN, timeout=10)
    assert answer.status_code == 200, answer.text
    records: list[dict[str, Any]] = answer.json()["records"]
    return records


def test_every_kind_of_repair_reaches_the_backend_repaired_and_is_recorded(
    served: tuple[str, RecordingBackend],
) -> None:
    url, backend = served
    sent = {
        "count": "12.0",
        "price": "19.90",
        "urgent": "false",
        "tags": "vip",
        "priority": "HIGH",
        "item": {"qty": "2"},
    }
    answer = propose(url, sent, trace_id="repair-all")
    assert answer.status_code == 200, answer.text
    executed = {
        "count": 12,
        "price": 19.9,
        "urgent": False,
        "tags": ["vip"],
        "priority": "high",
        "item": {"qty": 2},
    }
    assert backend.calls == [executed]
    assert type(backend.calls[0]["count"]) is int
    body = answer.json()
    assert body["execution"]["result"] == {"got": executed}
    assert body["repairs"] == [
        {"path": "/args/count", "kind": "string_to_integer", "from": "12.0", "to": 12},
        {"path": "/args/price", "kind": "string_to_number", "from": "19.90", "to": 19.9},
        {"path": "/args/urgent", "kind": "string_to_boolean", "from": "false", "to": False},
        {"path": "/args/tags", "kind": "wrap_in_array", "from": "vip", "to": ["vip"]},
        {"path": "/args/priority", "kind": "enum_case", "from": "HIGH", "to": "high"},
        {"path": "/args/item/qty", "kind": "string_to_integer", "from": "2", "to": 2},
    ]
    (record,) = trace_records(url, "repair-all")
    assert record["args_redacted"] == executed
    assert record["repairs"] == [
        {"path": "/args/count", "kind": "string_to_integer", "from": '"12.0"', "to": "12"},
        {"path": "/args/price", "kind": "string_to_number", "from": '"19.90"', "to": "19.9"},
        {"path": "/args/urgent", "kind": "string_to_boolean", "from": '"false"', "to": "false"},
        {"path": "/args/tags", "kind": "wrap_in_array", "from": '"vip"', "to": '["vip"]'},
        {"path": "/args/priority", "kind": "enum_case", "from": '"HIGH"', "to": '"high"'},
        {"path": "/args/item/qty", "kind": "string_to_integer", "from": '"2"', "to": "2"},
    ]
    verified = httpx.get(f"{url}/v1/audit/verify", headers=ADMIN, timeout=10).json()
    assert verified["ok"] is True, verified
    metrics = httpx.get(f"{url}/metrics", timeout=10).text
    for kind, count in (("string_to_integer", 2), ("enum_case", 1), ("wrap_in_array", 1)):
        line = f'broker_argument_repairs_total{{kind="{kind}",route="billing_help"}} {count}.0'
        assert line in metrics


def test_valid_arguments_are_never_repaired(served: tuple[str, RecordingBackend]) -> None:
    url, backend = served
    answer = propose(url, {"count": 3, "tags": ["a"], "priority": "low"}, trace_id="valid")
    assert answer.status_code == 200
    assert backend.calls == [{"count": 3, "tags": ["a"], "priority": "low"}]
    assert "repairs" not in answer.json()
    (record,) = trace_records(url, "valid")
    assert record["repairs"] == []


@pytest.mark.parametrize(
    ("args", "pointer"),
    [
        ({"count": "1e400"}, "/args/count"),
        ({"price": "NaN"}, "/args/price"),
        ({"count": " 12 "}, "/args/count"),
        ({"price": "1,5"}, "/args/price"),
        ({"count": "12.5"}, "/args/count"),
        ({"count": "-1"}, "/args/count"),  # repaired to -1, which the schema still refuses
        ({"urgent": "yes"}, "/args/urgent"),
        ({"code": "Abc"}, "/args/code"),
        ({"tags": None}, "/args/tags"),
        ({"tags": ["a", "b", "c", "d"]}, "/args/tags"),
    ],
)
def test_what_could_change_meaning_is_refused_as_sent(
    served: tuple[str, RecordingBackend], args: dict[str, Any], pointer: str
) -> None:
    url, backend = served
    trace = f"refused-{abs(hash(repr(args)))}"
    answer = propose(url, args, trace_id=trace)
    assert answer.status_code == 422, answer.text
    body = answer.json()
    assert body["code"] == "schema_invalid"
    assert [e["path"] for e in body["errors"]] == [pointer]
    assert "repairs" not in body
    assert backend.calls == []
    (record,) = trace_records(url, trace)
    assert record["args_redacted"] == args  # the arguments as sent
    assert record["repairs"] == []


def test_a_proposal_still_invalid_after_repair_gets_the_errors_of_what_was_sent(
    served: tuple[str, RecordingBackend],
) -> None:
    url, backend = served
    answer = propose(url, {"count": "12", "price": "cheap"})
    assert answer.status_code == 422
    # count alone would have been repaired; the answer points at the input as it came.
    assert [e["path"] for e in answer.json()["errors"]] == ["/args/count", "/args/price"]
    assert backend.calls == []


def test_repair_is_off_unless_the_route_asks(served: tuple[str, RecordingBackend]) -> None:
    url, backend = served
    answer = propose(url, {"count": "12"}, token=SCHEDULING)
    assert answer.status_code == 422
    assert [e["path"] for e in answer.json()["errors"]] == ["/args/count"]
    assert backend.calls == []


def test_a_repaired_sensitive_value_is_redacted_in_the_ledger(
    served: tuple[str, RecordingBackend],
) -> None:
    url, backend = served
    answer = propose(url, {"pin": "4321"}, trace_id="pin")
    assert answer.status_code == 200
    assert backend.calls == [{"pin": 4321}]
    (record,) = trace_records(url, "pin")
    assert record["args_redacted"] == {"pin": "[REDACTED]"}
    redacted = '"[REDACTED]"'
    assert record["repairs"] == [
        {"path": "/args/pin", "kind": "string_to_integer", "from": redacted, "to": redacted}
    ]
    assert httpx.get(f"{url}/v1/audit/verify", headers=ADMIN, timeout=10).json()["ok"] is True


def test_the_same_key_and_arguments_replay_whether_sent_repaired_or_not(
    served: tuple[str, RecordingBackend],
) -> None:
    url, backend = served

    def write(args: dict[str, Any]) -> httpx.Response:
        body = {"tool": "shape_write", "args": args, "idempotency_key": "shape-key-1"}
        return httpx.post(f"{url}/v1/proposals", json=body, headers=BILLING, timeout=10)

    first = write({"count": "7"})
    assert first.status_code == 200 and first.json()["repairs"][0]["to"] == 7
    again = write({"count": "7"})
    assert again.status_code == 200
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert again.json()["replayed"] is True
    assert again.json()["execution"] == first.json()["execution"]
    as_number = write({"count": 7})  # the fingerprint is of what the tool receives
    assert as_number.headers.get("Idempotent-Replayed") == "true"
    other = write({"count": "8"})
    assert other.status_code == 422 and other.json()["code"] == "idempotency_key_reused"
    assert backend.calls == [{"count": 7}]


def test_dry_runs_show_their_repairs_too(served: tuple[str, RecordingBackend]) -> None:
    url, backend = served
    answer = propose(url, {"priority": "Normal"}, dry_run=True)
    assert answer.status_code == 200
    body = answer.json()
    assert body["dry_run"] is True
    assert body["repairs"] == [
        {"path": "/args/priority", "kind": "enum_case", "from": "Normal", "to": "normal"}
    ]
    assert backend.calls == []
    # Read back later, rebuilt from its ledger record: the same repairs.
    read = httpx.get(f"{url}/v1/proposals/{body['proposal_id']}", headers=BILLING, timeout=10)
    assert read.status_code == 200, read.text
    assert read.json()["repairs"] == body["repairs"]


def test_a_native_tool_call_is_repaired_too(served: tuple[str, RecordingBackend]) -> None:
    url, backend = served
    turn = openai_turn(("call_1", "shape_read", json.dumps({"count": "4", "priority": "Low"})))
    answer = httpx.post(
        f"{url}/v1/tool-calls",
        json={"format": "openai", "calls": turn},
        headers=BILLING,
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    (decision,) = answer.json()["decisions"]
    assert [r["kind"] for r in decision["repairs"]] == ["string_to_integer", "enum_case"]
    assert backend.calls == [{"count": 4, "priority": "low"}]
