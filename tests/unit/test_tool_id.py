"""Tool ids follow seeds/004 §1: the grammar, the name derivation, and the hash input."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from broker.tool_id import (
    MAX_TOOL_ID_LENGTH,
    TOOL_ID_PATTERN,
    ToolIdError,
    ToolIdParts,
    format_tool_id,
    infer_namespace,
    parse_tool_id,
    schema_hash8,
    unparse_tool_id,
)

SCHEMA = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "repo": {"type": "string"}},
    "required": ["repo", "title"],
}


def reference_hash8(upstream_name: str, schema: dict) -> str:
    """The spec's own listing (§1.3), verbatim in behaviour."""
    props = sorted((schema.get("properties") or {}).keys())
    required = sorted(schema.get("required") or [])
    shape = json.dumps(
        {"properties": props, "required": required}, sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256((upstream_name + "\n" + shape).encode("utf-8")).hexdigest()[:8]


@pytest.mark.parametrize(
    ("upstream", "namespace", "name"),
    [
        ("github.create_issue", "github", "create_issue"),
        ("weather.get", "weather", "get"),
        ("github/create_issue", "github", "create_issue"),
        ("slack_send_message", "slack", "slack_send_message"),
        ("read_file", "mcp", "read_file"),
        ("ping", "mcp", "ping"),
    ],
)
def test_namespaces_are_inferred_as_the_spec_shows(
    upstream: str, namespace: str, name: str
) -> None:
    assert infer_namespace(upstream) == (namespace, name)


def test_the_hash_is_over_the_upstream_name_and_the_schema_shape_only() -> None:
    assert schema_hash8("read_file", SCHEMA) == reference_hash8("read_file", SCHEMA)
    described = {
        **SCHEMA,
        "description": "prose",
        "properties": {"title": {"type": "integer", "description": "changed"}, "repo": {}},
    }
    assert schema_hash8("read_file", described) == schema_hash8("read_file", SCHEMA)
    assert schema_hash8("github.create_issue", SCHEMA) != schema_hash8(
        "gitlab.create_issue", SCHEMA
    )
    grown = {**SCHEMA, "properties": {**SCHEMA["properties"], "labels": {}}}
    assert schema_hash8("read_file", grown) != schema_hash8("read_file", SCHEMA)


def test_ids_with_a_version_and_without() -> None:
    assert format_tool_id("github.create_issue", SCHEMA, namespace="", version="1.4.0") == (
        "github:create_issue@1.4.0"
    )
    hashed = format_tool_id(
        "mcp.read_file", SCHEMA, namespace="", version=None, upstream_name="read_file"
    )
    assert hashed == f"mcp:read_file#{reference_hash8('read_file', SCHEMA)}"
    # Config tools carry their backend as the namespace.
    assert (
        format_tool_id("issue_credit", SCHEMA, namespace="demo", version="1")
        == "demo:issue_credit@1"
    )


@pytest.mark.parametrize(
    "tool_id",
    [
        "github:create_issue@1.4.0",
        "slack:slack_send_message#3a91c7d2",
        "weather:get@2024-05",
        "a:b@1#0123abcd",
    ],
)
def test_parse_and_unparse_round_trip(tool_id: str) -> None:
    assert unparse_tool_id(parse_tool_id(tool_id)) == tool_id


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "nocolon",
        "Upper:name",
        "9ns:name",
        "ns:9name",
        "ns:name@",
        "ns:name#123",
        "ns:name#GGGGGGGG",
        "ns:" + "n" * 129,
        "x" * (MAX_TOOL_ID_LENGTH + 1),
    ],
)
def test_malformed_ids_are_refused(bad: str) -> None:
    with pytest.raises(ToolIdError):
        parse_tool_id(bad)
    with pytest.raises(ToolIdError):
        unparse_tool_id(ToolIdParts("Bad", "name"))


@pytest.mark.parametrize("bare", ["ns:name", "github:create_issue", "mcp:read_file"])
def test_an_id_with_neither_version_nor_hash_is_refused(bare: str) -> None:
    """Without a version the hash is required (seeds/004 §1.3): a bare name pins no shape."""
    with pytest.raises(ToolIdError, match="neither @version nor #hash8"):
        parse_tool_id(bare)


@pytest.mark.parametrize("not_text", [None, 12, b"ns:name@1", ["ns:name@1"]])
def test_a_tool_id_that_is_not_a_string_is_a_tool_id_error(not_text: object) -> None:
    with pytest.raises(ToolIdError, match="is a string"):
        parse_tool_id(not_text)


@pytest.mark.parametrize(
    "text",
    [
        "github:create_issue@1.4.0",
        "slack:slack_send_message#3a91c7d2",
        "a:b@1#0123abcd",
        "ns:name",
        "ns:name@",
        "ns:name#123",
        "Upper:name@1",
        "ns:name@1#0123abcd#0123abcd",
    ],
)
def test_the_documented_pattern_accepts_exactly_what_parse_tool_id_does(text: str) -> None:
    try:
        parse_tool_id(text)
        parsed = True
    except ToolIdError:
        parsed = False
    assert (re.fullmatch(TOOL_ID_PATTERN, text) is not None) == parsed
