"""A sealed record's hashes are exactly the documented RFC 8785 digests, recomputed independently."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import msgspec
import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.ledger import (
    GENESIS_HASH,
    AuditRef,
    LedgerEntry,
    LedgerRecord,
    RecordedError,
    ValidatorVerdict,
)
from broker.ledger.line_check import LineCheck, check_line
from broker.ledger.model import MediationReceipt, RecordedCheck, RecordedRepair
from broker.ledger.redaction import redact, sensitive_key_set
from broker.ledger.sealing import seal


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
    """The message names the field, so the caller's bug is found from the log line alone."""
    with pytest.raises(ValueError, match=rf"cannot be sealed: .* at `\$\.{field}`"):
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


@pytest.mark.parametrize(
    "overrides",
    [
        {"validators": (ValidatorVerdict("schema", "pass", 2**60),)},
        {"validators": (ValidatorVerdict(1, "pass", 3),)},  # type: ignore[arg-type]
        {"errors": (RecordedError(1, "/a"),)},  # type: ignore[arg-type]
    ],
)
def test_wrongly_typed_verdicts_and_errors_are_refused_too(overrides: dict[str, Any]) -> None:
    """Nested structs are checked field by field, not passed through for being the right type."""
    field = next(iter(overrides))
    with pytest.raises(ValueError, match=rf"cannot be sealed: .* at `\$\.{field}\[0\]\."):
        seal(make_entry(**overrides), None)


_OMITTED_WHEN_EMPTY = (
    "remediation",
    "failed_check",
    "preconditions",
    "proposal_reason",
    "started_at",
    "ended_at",
    "attempt_outcomes",
    "receipt",
    "repairs",
    "cache",
    "phase",
)


def _reference_repair(repair: RecordedRepair, sensitive: frozenset[str]) -> dict[str, str]:
    keys = {part.casefold() for part in repair.path.split("/")[2:]}
    hidden = bool(keys & sensitive)
    return {
        "from": '"[REDACTED]"' if hidden else repair.from_,
        "kind": repair.kind,
        "path": repair.path,
        "to": '"[REDACTED]"' if hidden else repair.to,
    }


def reference_line(entry: LedgerEntry, head: AuditRef | None) -> bytes:
    """The stored line as documented, built from rfc8785 alone: JCS of the record without
    "hash", then "hash" appended last."""
    sensitive = sensitive_key_set(entry.sensitive_keys)
    args = redact(entry.args, sensitive)
    result = None if entry.result is None else redact(entry.result, sensitive)
    record: dict[str, Any] = {
        field: getattr(entry, field)
        for field in LedgerEntry.__struct_fields__
        if field not in ("args", "result", "sensitive_keys", "errors", *_OMITTED_WHEN_EMPTY)
    }
    for field in _OMITTED_WHEN_EMPTY:  # left out when None or empty, as older records lack them
        value = getattr(entry, field)
        if field == "repairs":  # values under a sensitive key are redacted, as in args
            if value:
                record[field] = [_reference_repair(r, sensitive) for r in value]
        elif isinstance(value, MediationReceipt):  # its own empty fields are left out too
            fields = msgspec.structs.asdict(value).items()
            record[field] = {
                k: list(v) if isinstance(v, tuple) else v
                for k, v in fields
                if v is not False and v not in ((), None)
            }
        elif isinstance(value, msgspec.Struct):
            record[field] = msgspec.structs.asdict(value)
        elif isinstance(value, tuple):
            if value:
                record[field] = list(value)
        elif value is not None:
            record[field] = value
    record["validators"] = [msgspec.structs.asdict(v) for v in entry.validators]
    if entry.errors:
        record["errors"] = [msgspec.structs.asdict(e) for e in entry.errors]
    record |= {
        "seq": 1 if head is None else head.seq + 1,
        "prev_hash": GENESIS_HASH if head is None else head.hash,
        "args_redacted": args,
        "args_hash": independent_digest(args),
        "result_redacted": result,
        "result_hash": None if result is None else independent_digest(result),
    }
    body = rfc8785.dumps(record)
    return body[:-1] + b',"hash":"' + independent_digest(record).encode() + b'"}\n'


_TEXT = st.text(max_size=8)  # lone surrogates, high-plane characters, controls
_KEYS = st.one_of(st.sampled_from(["token", "TOKEN", "amount", "\ue000", "é", "a"]), _TEXT)
_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**60), 2**60), st.floats(), _TEXT),
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(_KEYS, children, max_size=4)
    ),
    max_leaves=12,
)
_OPTIONAL_TEXT = st.none() | _TEXT.filter(
    lambda text: text.encode("utf-8", "ignore") == text.encode("utf-8", "surrogatepass")
)
_SAFE_INTS = st.integers(-(2**53) + 1, 2**53 - 1)


@given(
    args=_VALUES,
    result=_VALUES,
    reason=_OPTIONAL_TEXT,
    remediation=_OPTIONAL_TEXT,
    errors=st.lists(
        st.builds(RecordedError, _TEXT.filter(str.isprintable), st.just("/a")), max_size=2
    ),
    elapsed=st.lists(_SAFE_INTS, max_size=3),
    decision_us=_SAFE_INTS,
    head=st.none() | st.builds(AuditRef, st.integers(1, 2**40), st.just("sha256:" + "1" * 64)),
    failed_check=st.none() | st.builds(RecordedCheck, _TEXT, _OPTIONAL_TEXT),
    listed=st.lists(_TEXT, max_size=2),
    proposal_reason=_OPTIONAL_TEXT,
    outcomes=st.lists(st.sampled_from(["succeeded", "timeout", "provider_error"]), max_size=3),
    receipt=st.none()
    | st.builds(
        MediationReceipt,
        declared_by=_TEXT,
        dry_run_argument=st.booleans(),
        executed_by=st.sampled_from(["python", "http", "mcp"]),
        fidelity=st.sampled_from(["pass_through", "normalized"]),
        original_hash=st.just("sha256:" + "2" * 64),
        policy_state=_TEXT,
        redacted=st.lists(_TEXT, max_size=2).map(tuple),
        rules=st.lists(_TEXT, max_size=2).map(tuple),
        visible_hash=st.just("sha256:" + "3" * 64),
        visible_name=_OPTIONAL_TEXT,
    ),
    repairs=st.lists(
        st.builds(
            RecordedRepair,
            _OPTIONAL_TEXT.map(json.dumps),
            st.sampled_from(["string_to_integer", "wrap_in_array"]),
            st.sampled_from(["/args/amount", "/args/token", "/args/a/0/TOKEN", "/args/x~1y"]),
            _VALUES.map(lambda v: msgspec.json.encode(redact(v, frozenset())).decode()),
        ),
        max_size=2,
    ),
    cache=st.none() | st.sampled_from(["hit", "miss", "stored"]),
    phase=st.none() | st.sampled_from(["planning", "execution", "result_interpretation"]),
)
@settings(max_examples=300)
def test_seal_writes_exactly_the_documented_line(
    args: Any,
    result: Any,
    reason: str | None,
    remediation: str | None,
    errors: list[RecordedError],
    elapsed: list[int],
    decision_us: int,
    head: AuditRef | None,
    failed_check: RecordedCheck | None,
    listed: list[str],
    proposal_reason: str | None,
    outcomes: list[str],
    receipt: MediationReceipt | None,
    repairs: list[RecordedRepair],
    cache: str | None,
    phase: str | None,
) -> None:
    """Differential: whatever the values (floats, unicode, high-plane keys, big integers,
    sensitive keys at any depth), the sealed line is byte for byte the rfc8785 reference, and
    the verifier accepts it."""
    entry = make_entry(
        args=args,
        result=result,
        reason=reason,
        remediation=remediation,
        errors=tuple(errors),
        validators=tuple(ValidatorVerdict(f"v{n}", "pass", us) for n, us in enumerate(elapsed)),
        decision_us=decision_us,
        execution_status=None if result is None else "succeeded",
        failed_check=failed_check,
        preconditions=tuple(listed),
        proposal_reason=proposal_reason,
        started_at=None if result is None else "2026-11-22T10:00:00.001Z",
        ended_at=None if result is None else "2026-11-22T10:00:00.002Z",
        attempt_outcomes=tuple(outcomes),
        receipt=receipt,
        repairs=tuple(repairs),
        cache=cache,
        phase=phase,
    )
    line, ref = seal(entry, head)
    assert line == reference_line(entry, head)
    assert check_line(line.rstrip(b"\n")) == LineCheck(
        ref.seq, json.loads(line)["prev_hash"], ref.hash, None
    )
