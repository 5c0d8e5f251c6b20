"""The repeated-key check: exact whichever path it takes (the cheap screen, given a count of
keys or counting them itself, the scan, the locating pass)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.api.json_body import REPEATED_KEYS, duplicate_key_pointers
from broker.api.proposal_body import Malformed, decode_proposal
from broker.model import ProposalRequest


@pytest.mark.parametrize(
    ("body", "pointers"),
    [
        (b'{"dry_run": true, "dry_run": false}', ["/dry_run"]),
        (b'{"a": 1, "\\u0061": 2}', ["/a"]),  # the same key, escaped
        (b'{"a": "x:y", "a": 1}', ["/a"]),  # a colon in a string: past the screen, still exact
        (b'{"a": "x:y", "b": 1}', []),
        (b'[{"a": 1}, {"a": 1}]', []),  # siblings may share keys
        (b'{"o": {"k": 1}, "p": {"k": 1}}', []),
        (b'{"a/b~": 1, "a/b~": 2}', ["/a~1b~0"]),
        (b'{"x": [{"k": 1, "k": 2}]}', ["/x/0/k"]),
        (b'{"a": 1, "a": 2', []),  # not JSON: the caller's decoder says why
        (b"\xff\xfe", []),
        (b'{"a": "\xff", "b": 1}', []),  # not UTF-8: the caller's decoder says so, not a 500
        (b'{"a": "\xff", "a": 1}', ["/a"]),
    ],
)
def test_repeated_keys_are_located(body: bytes, pointers: list[str]) -> None:
    assert duplicate_key_pointers(body) == pointers


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet=' :{}[]",ab\\'),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(alphabet=':ab"\\', max_size=3), children, max_size=4)
    ),
    max_leaves=20,
)


@given(json_values)
def test_no_json_encoder_output_is_ever_refused(value: Any) -> None:
    assert duplicate_key_pointers(json.dumps(value).encode()) == []


@given(st.dictionaries(st.text(alphabet=":ab", max_size=3), json_values, min_size=1, max_size=4))
def test_any_object_with_a_member_repeated_is_refused(value: dict[str, Any]) -> None:
    key = next(iter(value))
    text = json.dumps(value)
    repeated = text[:-1] + ", " + json.dumps(key) + ": null}"
    assert "/" + key.replace("~", "~0").replace("/", "~1") in duplicate_key_pointers(
        repeated.encode()
    )


@pytest.mark.parametrize(
    ("body", "pointers"),
    [
        (b'{"tool":"t","tool":"t","args":{}}', ["/tool"]),
        (b'{"tool":"t","args":{},"args":{}}', ["/args"]),
        (b'{"tool":"t","args":{"a":{"b":1,"b":1}}}', ["/args/a/b"]),
        (b'{"tool":"t","args":{"a":[{"k":1},{"k":1,"k":2}]}}', ["/args/a/1/k"]),
        (b'{"tool":"t","args":{"a":1,"a":2},"reason":"x:y"}', ["/args/a"]),
        (b'{"tool":1,"tool":2,"args":{}}', ["/tool"]),  # not a proposal either: the repeat first
        (b'{"tool":"t","tool":"t","args":{},"extra":1}', ["/tool"]),
    ],
)
def test_a_proposal_repeating_a_key_is_refused_however_it_decodes(
    body: bytes, pointers: list[str]
) -> None:
    refused = decode_proposal(body)
    assert isinstance(refused, Malformed)
    assert refused.detail == REPEATED_KEYS
    assert [error.path for error in refused.errors] == pointers


@pytest.mark.parametrize(
    "body",
    [
        b'{"tool":"t","args":{"a":{"b":1},"c":[{"b":2}]}}',
        b'{"tool":"t","args":{"url":"https://x"},"reason":"a: b"}',  # colons in strings
        b'{"tool":"t","args":{}}',
    ],
)
def test_a_proposal_repeating_no_key_decodes(body: bytes) -> None:
    assert isinstance(decode_proposal(body), ProposalRequest)
