"""A sealed record's hashes are exactly the documented RFC 8785 digests, recomputed independently."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import msgspec
import pytest
import rfc8785

from broker.ledger import GENESIS_HASH, AuditRef, LedgerEntry, LedgerRecord, ValidatorVerdict
from broker.ledger.sealing import check_line, seal


def make_entry(**overrides: Any) -> LedgerEntry:
    fields: dict[str, Any] = {
        "time": "2026-11-22T10:00:00.000Z",
        "trace_id": "x-9af3",
        "session_id": "chat-881",
        "proposal_id": "prp_1",
        "route": "billing_help",
        "tenant": "acme",
        "service_account": "sa-billing",
        "tool": "issue_credit",
        "tool_id": "tool_abc",
        "config_hash": "sha256:" + "c" * 64,
        "args": {"order_id": "O-55291", "amount": 25.5, "currency": "USD", "Token": "t0p"},
        "result": {"credit_id": "CR-1001", "amount": 25.0, "status": "issued"},
        "sensitive_keys": frozenset({"token"}),
        "decision": "approved",
        "category": None,
        "code": None,
        "reason": "customer asked — «partial» refund 🙂",
        "validators": (
            ValidatorVerdict("schema", "pass", 41),
            ValidatorVerdict("authz", "pass", 3),
        ),
        "execution_status": "succeeded",
        "attempts": 1,
        "dry_run": False,
        "replayed": False,
        "decision_us": 812,
        "execution_us": 12_000,
        "idempotency_key_hash": "sha256:" + "d" * 64,
    }
    fields.update(overrides)
    return LedgerEntry(**fields)


def independent_digest(value: Any) -> str:
    return "sha256:" + hashlib.sha256(rfc8785.dumps(value)).hexdigest()


def test_record_hash_is_rfc8785_digest_of_the_record_without_hash() -> None:
    line, ref = seal(make_entry(), None)
    stored = json.loads(line)
    claimed = stored.pop("hash")
    assert claimed == ref.hash == independent_digest(stored)
    assert stored["seq"] == 1 and stored["prev_hash"] == GENESIS_HASH
    assert stored["args_hash"] == independent_digest(stored["args_redacted"])
    assert stored["result_hash"] == independent_digest(stored["result_redacted"])
    assert stored["args_redacted"]["Token"] == "[REDACTED]"


def test_hash_covers_seq_and_prev_hash() -> None:
    entry = make_entry()
    _, first = seal(entry, None)
    _, after_other = seal(entry, AuditRef(1, "sha256:" + "1" * 64))
    _, same_prev_other_seq = seal(entry, AuditRef(2, "sha256:" + "1" * 64))
    assert len({first.hash, after_other.hash, same_prev_other_seq.hash}) == 3
    assert (after_other.seq, same_prev_other_seq.seq) == (2, 3)


def test_record_carries_every_entry_field_but_args_result_and_sensitive_keys() -> None:
    entry = make_entry()
    line, _ = seal(entry, None)
    record = msgspec.json.decode(line, type=LedgerRecord)
    for field in msgspec.structs.fields(LedgerEntry):
        if field.name in ("args", "result", "sensitive_keys"):
            continue
        assert getattr(record, field.name) == getattr(entry, field.name), field.name
    assert record.result_redacted == {"credit_id": "CR-1001", "amount": 25, "status": "issued"}
    assert check_line(line.rstrip(b"\n")).problem is None


def test_no_result_means_no_result_hash() -> None:
    line, _ = seal(make_entry(result=None, execution_status=None), None)
    record = msgspec.json.decode(line, type=LedgerRecord)
    assert record.result_redacted is None and record.result_hash is None
    assert check_line(line.rstrip(b"\n")).problem is None


@pytest.mark.parametrize(
    ("field", "value"),
    [("tool", 42), ("decision_us", 2**60), ("dry_run", "no"), ("session_id", 1.5)],
)
def test_wrongly_typed_entry_is_refused_before_anything_is_written(field: str, value: Any) -> None:
    with pytest.raises(ValueError, match="cannot be sealed"):
        seal(make_entry(**{field: value}), None)


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        (b'"tool":"issue_credit"', b'"tool":"issue_creditX"', "hash mismatch"),
        (b'"order_id":"O-55291"', b'"order_id":"O-55292"', "args_hash mismatch"),
        (b'"credit_id":"CR-1001"', b'"credit_id":"CR-1002"', "result_hash mismatch"),
        (b'"seq":1', b'"seq":"1"', "malformed record"),
        (b'"tool":"issue_credit"', b'"tool":"issue_credit","extra":1', "malformed record"),
    ],
)
def test_check_line_names_what_changed(old: bytes, new: bytes, problem: str) -> None:
    line, _ = seal(make_entry(), None)
    assert old in line
    assert check_line(line.rstrip(b"\n").replace(old, new)).problem == problem


def test_reformatting_a_record_without_changing_it_still_verifies() -> None:
    line, _ = seal(make_entry(), None)
    pretty = json.dumps(json.loads(line), indent=2, ensure_ascii=True).encode()
    assert check_line(pretty).problem is None
