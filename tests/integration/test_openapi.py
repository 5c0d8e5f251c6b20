"""The OpenAPI document: committed files current, structurally valid 3.1, every route described."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import msgspec
import pytest
import yaml
from litestar.routes import HTTPRoute

from broker.api.openapi import (
    SPEC_FILES,
    UndocumentedOperationError,
    render_json,
    render_yaml,
)
from broker.app import create_app, spec_for_config
from broker.config import BrokerConfig
from broker.plugins import Backend
from broker.taxonomy import CODE_STATUS, Code
from tests.conftest import ROOT, with_private_ledger

OPENAPI_DIR = ROOT / "openapi"
METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
PUBLIC = {"/livez", "/readyz", "/metrics"}


@pytest.fixture(scope="module")
def spec(demo_config: BrokerConfig) -> dict[str, Any]:
    # Not strict, so that one undocumented route fails one test (below), not all of them.
    return spec_for_config(demo_config, strict=False)


def operations(spec: Mapping[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            if method in METHODS:
                yield path, method, operation


def walk(node: Any, where: str = "#") -> Iterator[tuple[str, Any]]:
    yield where, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from walk(value, f"{where}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from walk(value, f"{where}/{index}")


def resolve(spec: Mapping[str, Any], ref: str) -> Any:
    assert ref.startswith("#/"), f"only local references are used, not {ref!r}"
    node: Any = spec
    for token in ref[2:].split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        node = node[int(token)] if isinstance(node, list) else node[token]
    return node


def validator(spec: Mapping[str, Any], schema: Mapping[str, Any]) -> jsonschema.Validator:
    # The document's components ride along, so "#/components/..." resolves inside the schema.
    root = {**schema, "components": spec["components"]}
    return jsonschema.Draft202012Validator(root)


# -- the committed files -------------------------------------------------------------------------


@pytest.mark.parametrize("name", SPEC_FILES)
def test_committed_file_is_current(spec: dict[str, Any], name: str) -> None:
    path = OPENAPI_DIR / name
    expected = render_json(spec) if name.endswith(".json") else render_yaml(spec)
    if not path.exists():
        pytest.fail(f"openapi/{name} is missing: run `broker openapi export`")
    actual = path.read_text(encoding="utf-8")
    if actual != expected:
        diff = "".join(
            list(
                difflib.unified_diff(
                    actual.splitlines(keepends=True),
                    expected.splitlines(keepends=True),
                    f"openapi/{name} (committed)",
                    f"openapi/{name} (generated)",
                    n=2,
                )
            )[:60]
        )
        pytest.fail(
            f"openapi/{name} differs from the spec the app generates: run "
            f"`broker openapi export` and commit the result.\n{diff}"
        )


def test_yaml_and_json_are_one_document() -> None:
    json_doc = msgspec.json.decode((OPENAPI_DIR / "openapi.json").read_bytes())
    yaml_doc = yaml.safe_load((OPENAPI_DIR / "openapi.yaml").read_text(encoding="utf-8"))
    assert json_doc == yaml_doc


def test_export_is_deterministic(tmp_path: Path, demo_config: BrokerConfig) -> None:
    from broker.cli import main

    argv = ["openapi", "export", "--config", str(ROOT / "deploy/demo.toml"), "--out", str(tmp_path)]
    assert main(argv) == 0
    first = {name: (tmp_path / name).read_bytes() for name in SPEC_FILES}
    assert first["openapi.json"].endswith(b"}\n")
    assert render_json(spec_for_config(demo_config)).encode() == first["openapi.json"]
    assert render_yaml(spec_for_config(demo_config)).encode() == first["openapi.yaml"]


# -- structure -----------------------------------------------------------------------------------


def test_top_level_is_openapi_3_1(spec: dict[str, Any]) -> None:
    assert re.fullmatch(r"3\.1\.\d+", spec["openapi"])
    assert {"openapi", "info", "paths", "components"} <= spec.keys()
    assert spec["info"]["title"] and spec["info"]["version"]
    assert spec["paths"]
    assert spec["security"] == [{"bearer": []}]
    assert spec["components"]["securitySchemes"]["bearer"] == {
        **spec["components"]["securitySchemes"]["bearer"],
        "type": "http",
        "scheme": "bearer",
    }


def test_document_is_valid_against_the_openapi_3_1_schema(spec: dict[str, Any]) -> None:
    # The official OAS 3.1 meta-schema, as bundled by schemathesis (a dev dependency).
    from schemathesis.specs.openapi.definitions import OPENAPI_31

    problems = sorted(jsonschema.Draft202012Validator(OPENAPI_31).iter_errors(spec), key=str)
    assert not problems, "\n".join(f"{e.json_path}: {e.message[:200]}" for e in problems[:10])


def test_every_ref_resolves(spec: dict[str, Any]) -> None:
    refs = [
        (where, node["$ref"])
        for where, node in walk(spec)
        if isinstance(node, dict) and "$ref" in node
    ]
    assert refs
    for where, ref in refs:
        try:
            resolve(spec, ref)
        except (KeyError, IndexError, ValueError) as exc:
            pytest.fail(f"{where}: $ref {ref!r} does not resolve ({exc!r})")
    # Every component is used by something.
    used = {ref for _, ref in refs}
    for kind in ("schemas", "headers"):
        for name in spec["components"][kind]:
            assert f"#/components/{kind}/{name}" in used, f"components.{kind}.{name} is unused"


def test_operations_are_complete(spec: dict[str, Any]) -> None:
    declared_tags = {tag["name"] for tag in spec["tags"]}
    ids = []
    for path, method, operation in operations(spec):
        label = f"{method.upper()} {path}"
        ids.append(operation["operationId"])
        assert operation.get("summary"), label
        assert operation.get("description"), label
        assert set(operation.get("tags", [])) <= declared_tags, label
        assert operation["tags"], label
        responses = operation["responses"]
        assert responses, label
        for status, response in responses.items():
            assert re.fullmatch(r"[1-5]\d\d", status), (label, status)
            assert response.get("description"), (label, status)
            for media, content in response.get("content", {}).items():
                assert "schema" in content, (label, status, media)
            for header in response.get("headers", {}).values():
                assert set(header) <= {"$ref", "summary", "description"} or "schema" in header
        # Path templates and path parameters agree.
        templated = set(re.findall(r"{([^}]+)}", path))
        in_path = {p["name"] for p in operation.get("parameters", []) if p["in"] == "path"}
        assert templated == in_path, label
        for parameter in operation.get("parameters", []):
            assert parameter["in"] in {"path", "query", "header", "cookie"}, label
            assert "schema" in parameter, label
            assert parameter["name"].lower() != "authorization", (
                f"{label}: Authorization is the bearer security scheme, not a parameter"
            )
        if path in PUBLIC:
            assert operation["security"] == [], label
        else:
            assert "security" not in operation, f"{label} should use the global bearer scheme"
            assert "401" in responses, label
    assert len(ids) == len(set(ids)), "operationIds must be unique"


def test_every_schema_is_valid_json_schema(spec: dict[str, Any]) -> None:
    for name, schema in spec["components"]["schemas"].items():
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError as exc:
            pytest.fail(f"components.schemas.{name}: {exc.message}")
    for where, node in walk(spec["paths"]):
        if where.endswith("/schema") and isinstance(node, dict):
            jsonschema.Draft202012Validator.check_schema(node)


def test_examples_match_their_schemas(spec: dict[str, Any]) -> None:
    checked = 0
    for where, node in walk(spec["paths"]):
        if isinstance(node, dict) and "schema" in node and "examples" in node:
            check = validator(spec, node["schema"])
            for name, example in node["examples"].items():
                errors_ = sorted(check.iter_errors(example["value"]), key=str)
                assert not errors_, f"{where}/examples/{name}: {errors_[0].message}"
                checked += 1
    assert checked >= 4


def test_problem_codes_follow_the_taxonomy(spec: dict[str, Any]) -> None:
    for path, method, operation in operations(spec):
        for status, response in operation["responses"].items():
            content = response.get("content", {}).get("application/problem+json")
            if content is None:
                continue
            constraint = content["schema"]["allOf"][1]["properties"]
            assert constraint["status"] == {"const": int(status)}
            for code in constraint["code"]["enum"]:
                assert CODE_STATUS[Code(code)][1] == int(status), (method, path, status, code)


def test_proposal_operation_documents_the_contract(spec: dict[str, Any]) -> None:
    operation = spec["paths"]["/v1/proposals"]["post"]
    body = operation["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/ProposalRequest"}
    proposal = spec["components"]["schemas"]["ProposalRequest"]
    assert proposal["required"] == ["args"]
    # The tool is named by exactly one of its name and its stable id.
    assert proposal["oneOf"] == [{"required": ["tool"]}, {"required": ["tool_id"]}]
    assert proposal["additionalProperties"] is False
    headers = {p["name"] for p in operation["parameters"] if p["in"] == "header"}
    assert headers == {"Idempotency-Key", "traceparent"}
    responses = operation["responses"]
    assert set(responses) == {
        "200", "202", "400", "401", "403", "409", "413", "415", "422", "429", "500", "502", "503", "504"
    }  # fmt: skip
    assert responses["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Decision"
    }
    assert "Idempotent-Replayed" in responses["200"]["headers"]
    for status in ("409", "429", "503"):
        assert "Retry-After" in responses[status]["headers"], status
    assert responses["202"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/PendingDecision"
    }
    for status, response in responses.items():
        if status not in ("200", "202"):
            assert set(response["content"]) == {"application/problem+json"}, status
    tools = spec["components"]["schemas"]["ToolDescription"]
    assert set(tools["required"]) == {
        "name", "tool_id", "description", "input_schema", "risk", "preconditions", "idempotent"
    }  # fmt: skip
    verify = spec["components"]["schemas"]["VerifyReport"]
    assert set(verify["required"]) == {
        "ok",
        "records",
        "head",
        "first_bad_seq",
        "reason",
        "unsigned_tail",
    }
    metrics = spec["paths"]["/metrics"]["get"]["responses"]["200"]["content"]
    assert set(metrics) == {"text/plain"}


# -- the app and the document agree ----------------------------------------------------------------


def test_every_route_is_documented(
    spec: dict[str, Any], demo_config: BrokerConfig, tmp_path: Path
) -> None:
    try:
        spec_for_config(demo_config, strict=True)
    except UndocumentedOperationError as exc:
        pytest.fail(f"{exc}. Describe it in _contract(), then run `broker openapi export`.")
    app = create_app(with_private_ledger(demo_config, tmp_path), secrets={})
    routed = {
        (method.lower(), route.path_format)
        for route in app.routes
        if isinstance(route, HTTPRoute) and not route.path.startswith("/schema")
        for method in route.route_handler_map
        if method not in ("OPTIONS", "HEAD")
    }
    # The approver inbox's HTML pages are for people, not API clients: never in the document.
    inbox = {(method, path) for method, path in routed if path.startswith("/ui")}
    assert ("get", "/ui/approvals") in inbox
    assert not any(path.startswith("/ui") for path in spec["paths"])
    routed -= inbox
    # The one plain ASGI route is the MCP front door: JSON-RPC, described by the MCP spec.
    assert [route.path for route in app.routes if not isinstance(route, HTTPRoute)] == ["/mcp"]
    documented = {(method, path) for path, method, _ in operations(spec)}
    assert routed == documented


async def test_the_served_document_is_the_exported_one(
    spec: dict[str, Any], make_broker: Callable[..., tuple[str, Mapping[str, Backend]]]
) -> None:
    url, _ = make_broker()
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        served = await http.get("/schema/openapi.json")
        assert served.status_code == 200
        assert served.text == render_json(spec)
        as_yaml = await http.get("/schema/openapi.yaml")
        assert as_yaml.status_code == 200
        assert yaml.safe_load(as_yaml.text) == spec
