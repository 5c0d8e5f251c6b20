"""check_line's one-decode path gives exactly the verdict of the step-by-step re-derivation.

``check_line`` first tries ``_check_sound_line`` (one decode, no hash patterns, floats rendered
while decoding) and falls back to ``_rederive`` (the full re-derivation) whenever that cannot
prove the line sound. Here both run on sealed lines and on lines damaged or re-spelled: flipped
bytes, inserted whitespace, reordered keys, floats and characters spelled differently, and hashes
recomputed over such non-canonical bodies, which must be flagged as they always were.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import msgspec
import rfc8785
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from broker.ledger import AuditRef, LedgerEntry, RecordedError, ValidatorVerdict
from broker.ledger.canonical import MAX_SAFE_INT
from broker.ledger.line_check import _check_sound_line, _rederive, check_line
from broker.ledger.sealing import seal
from tests.ledger_entries import make_entry

TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=8)
KEYS = st.one_of(TEXT, st.sampled_from(["a", "é", "\ue000", "\U0001f600", "amount", "\x00"]))
NUMBERS = st.one_of(
    st.integers(min_value=-MAX_SAFE_INT, max_value=MAX_SAFE_INT),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 1.0, 25.0, 25.5, 1e16, 1e21, 1e-7, 0.1, 123456789012345680.0]),
)
JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), NUMBERS, TEXT),
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(KEYS, children, max_size=4)
    ),
    max_leaves=12,
)
ENTRIES = st.builds(
    LedgerEntry,
    time=st.just("2026-11-22T10:00:00.000Z"),
    trace_id=TEXT,
    proposal_id=TEXT,
    route=st.just("billing_help"),
    tenant=st.sampled_from(["acme", "ünïcode"]),
    service_account=st.just("sa"),
    tool=st.just("issue_credit"),
    config_hash=st.just("sha256:" + "c" * 64),
    args=st.dictionaries(KEYS, JSON_VALUES, max_size=5),
    result=st.one_of(st.none(), JSON_VALUES),
    decision=st.sampled_from(["approved", "rejected"]),
    decision_us=st.integers(min_value=0, max_value=MAX_SAFE_INT),
    session_id=st.one_of(st.none(), TEXT),
    reason=st.one_of(st.none(), TEXT),
    errors=st.lists(st.builds(RecordedError, TEXT, TEXT), max_size=2).map(tuple),
    validators=st.lists(
        st.builds(ValidatorVerdict, TEXT, st.just("pass"), st.integers(0, 10**6)), max_size=3
    ).map(tuple),
    execution_us=st.one_of(st.none(), st.integers(min_value=0, max_value=10**9)),
)
ENTRY = make_entry(0, args={})
HEADS = st.one_of(
    st.none(), st.builds(AuditRef, st.integers(1, 10**6), st.just("sha256:" + "e" * 64))
)


def sealed(entry: LedgerEntry, head: AuditRef | None) -> bytes:
    return seal(entry, head)[0].rstrip(b"\n")


def jcs_number(text: str) -> int | float:
    """How JCS reads an integer literal: beyond 2**53 it is a double (JCS writes 1e16 so)."""
    value = int(text)
    return value if abs(value) <= MAX_SAFE_INT else float(value)


def loaded(line: bytes) -> dict[str, Any]:
    stored: dict[str, Any] = json.loads(line, parse_int=jcs_number)
    return stored


def assert_same_verdict(line: bytes) -> None:
    assert check_line(line) == _rederive(line)


def sha256_ref(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def python_json(value: Any) -> bytes:
    """Sorted and compact like JCS, but floats as Python writes them (1.0, 1e+16) and non-ASCII
    as \\u escapes: the same value, spelled differently wherever it has such things."""
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def msgspec_json(value: Any) -> bytes:
    """msgspec's own sorted rendering: floats as 1.0 and 1e16, keys in code point order (JCS
    sorts by UTF-16 units: they differ for keys at or above U+E000)."""
    return msgspec.json.encode(value, order="sorted")


def rehashed(stored: dict[str, Any], args: bytes, result: bytes) -> bytes:
    """A line whose hashes are all recomputed over exactly the bytes it holds."""
    body = {key: value for key, value in stored.items() if key != "hash"}
    body["args_redacted"] = msgspec.Raw(args)
    body["result_redacted"] = msgspec.Raw(result)
    body["args_hash"] = sha256_ref(args)
    if body["result_hash"] is not None:
        body["result_hash"] = sha256_ref(result)
    encoded = msgspec.json.encode(body, order="sorted")
    return encoded[:-1] + b',"hash":"' + sha256_ref(encoded).encode() + b'"}'


@settings(max_examples=300, deadline=None)
@given(ENTRIES, HEADS)
def test_sealed_lines_take_the_fast_path_with_the_same_verdict(
    entry: LedgerEntry, head: AuditRef | None
) -> None:
    line = sealed(entry, head)
    slow = _rederive(line)
    assert slow.problem is None
    fast = _check_sound_line(line)
    assert fast is None or fast == slow
    assert check_line(line) == slow


def test_the_fast_path_is_taken_for_ordinary_records() -> None:
    args = {"amount": 25.5, "note": "«ok» — é", "n": [1, 2.25, None]}
    entry = msgspec.structs.replace(ENTRY, args=args, result={"ok": True})
    line = sealed(entry, None)
    assert _check_sound_line(line) == _rederive(line)
    assert _check_sound_line(line) is not None


@settings(max_examples=400, deadline=None)
@given(ENTRIES, HEADS, st.data())
def test_a_flipped_byte_gets_the_same_verdict(
    entry: LedgerEntry, head: AuditRef | None, data: st.DataObject
) -> None:
    line = bytearray(sealed(entry, head))
    where = data.draw(st.integers(0, len(line) - 1))
    line[where] = data.draw(st.integers(0, 255).filter(lambda byte: byte != line[where]))
    assert_same_verdict(bytes(line))


@settings(max_examples=300, deadline=None)
@given(ENTRIES, HEADS, st.data())
def test_inserted_whitespace_gets_the_same_verdict(
    entry: LedgerEntry, head: AuditRef | None, data: st.DataObject
) -> None:
    line = sealed(entry, head)
    where = data.draw(st.integers(0, len(line)))
    space = data.draw(st.sampled_from([b" ", b"\n", b"\t", b"\r\n  "]))
    assert_same_verdict(line[:where] + space + line[where:])


@settings(max_examples=200, deadline=None)
@given(ENTRIES, HEADS, st.randoms(use_true_random=False))
def test_reordered_keys_get_the_same_verdict(
    entry: LedgerEntry, head: AuditRef | None, random: Any
) -> None:
    stored = loaded(sealed(entry, head))
    keys = list(stored)
    random.shuffle(keys)
    reordered = json.dumps({key: stored[key] for key in keys}, ensure_ascii=False).encode()
    assert_same_verdict(reordered)  # the same record, spelled differently: it still verifies
    assert check_line(reordered).problem is None


@settings(max_examples=300, deadline=None)
@given(ENTRIES, HEADS, st.sampled_from([python_json, msgspec_json]))
def test_hashes_recomputed_over_differently_spelled_values_are_flagged(
    entry: LedgerEntry, head: AuditRef | None, spell: Any
) -> None:
    stored = loaded(sealed(entry, head))
    args = spell(stored["args_redacted"])
    result = spell(stored["result_redacted"])
    canonical_args = rfc8785.dumps(stored["args_redacted"])
    canonical_result = rfc8785.dumps(stored["result_redacted"])
    assume(args != canonical_args or result != canonical_result)
    line = rehashed(stored, args, result)
    assert_same_verdict(line)
    # The hashes are SHA-256 of what the line holds, not of its JCS form: never accepted.
    assert check_line(line).problem is not None


@settings(max_examples=200, deadline=None)
@given(ENTRIES, HEADS)
def test_a_whole_record_hashed_as_python_spells_it_is_flagged(
    entry: LedgerEntry, head: AuditRef | None
) -> None:
    stored = loaded(sealed(entry, head))
    del stored["hash"]
    body = python_json(stored)
    assume(body != rfc8785.dumps(stored))
    line = body[:-1] + b',"hash":"' + sha256_ref(body).encode() + b'"}'
    assert_same_verdict(line)
    assert check_line(line).problem is not None


@settings(max_examples=100, deadline=None)
@given(ENTRIES, HEADS)
def test_hashes_over_the_canonical_form_accept_any_spelling(
    entry: LedgerEntry, head: AuditRef | None
) -> None:
    stored = loaded(sealed(entry, head))
    respelled = json.dumps(stored, ensure_ascii=True, indent=1).encode()
    assert_same_verdict(respelled)
    assert check_line(respelled).problem is None


def test_spellings_jcs_would_not_write_are_told_apart() -> None:
    args = {"amount": 1.0, "big": 1e16, "tiny": 1e-7, "city": "Zürich"}
    entry = msgspec.structs.replace(ENTRY, args=args)
    stored = loaded(sealed(entry, None))
    canonical = rfc8785.dumps(stored["args_redacted"])
    assert canonical == b'{"amount":1,"big":10000000000000000,"city":"Z\xc3\xbcrich","tiny":1e-7}'
    for respelled in (
        canonical.replace(b'"amount":1,', b'"amount":1.0,'),
        canonical.replace(b"10000000000000000", b"1e16"),
        canonical.replace(b"1e-7", b"1E-7"),
        canonical.replace(b"Z\xc3\xbcrich", b"Z\\u00fcrich"),
        canonical.replace(b'{"amount":1,"big":10000000000000000,', b'{"big":1e16,"amount":1,'),
        canonical.replace(b"10000000000000000", b"10000000000000001"),  # JCS reads a double
    ):
        assert respelled != canonical
        line = rehashed(stored, respelled, b"null")
        assert_same_verdict(line)
        assert check_line(line).problem == "args_hash mismatch"
    assert check_line(rehashed(stored, canonical, b"null")).problem is None


def test_keys_jcs_orders_by_utf16_units_are_told_apart() -> None:
    stored = loaded(sealed(ENTRY, None))
    args = {"\U0001f600": 1, "\ue000": 2}
    canonical = rfc8785.dumps(args)
    assert msgspec_json(args) != canonical  # code point order puts U+E000 first
    line = rehashed(stored, msgspec_json(args), b"null")
    assert_same_verdict(line)
    assert check_line(line).problem == "args_hash mismatch"
    assert check_line(rehashed(stored, canonical, b"null")).problem is None


def test_a_prev_hash_the_pattern_accepts_but_the_fast_path_does_not_is_judged_the_same() -> None:
    line, _ = seal(ENTRY, AuditRef(1, "sha256:" + "a" * 64))
    stored = loaded(line)
    # The msgspec pattern's "$" matches before a final newline: such a prev_hash is well-formed
    # to the full re-derivation, so the fast path must defer rather than judge it.
    stored["prev_hash"] += "\n"
    line = rehashed(stored, b"{}", b"null")
    assert _check_sound_line(line) is None
    assert_same_verdict(line)
    assert check_line(line).problem is None


def test_a_result_hash_beside_a_null_result_is_flagged_like_a_missing_one() -> None:
    stored = loaded(sealed(ENTRY, None))
    assert stored["result_redacted"] is None and stored["result_hash"] is None
    # "No result" is spelled null with no hash; a hash of "null" claims a result that is not.
    stored["result_hash"] = sha256_ref(b"null")
    line = rehashed(stored, b"{}", b"null")
    assert_same_verdict(line)
    assert check_line(line).problem == "result_hash mismatch"
    # And the other way round: a result without its hash.
    with_result = loaded(sealed(msgspec.structs.replace(ENTRY, result={"ok": 1}), None))
    with_result["result_hash"] = None
    line = rehashed(with_result, b"{}", b'{"ok":1}')
    assert_same_verdict(line)
    assert check_line(line).problem == "result_hash mismatch"
