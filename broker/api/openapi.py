"""The OpenAPI 3.1 description of the HTTP API: Litestar's skeleton, the wire contract filled in.

Why not Litestar's generator alone: the handlers take the raw ``Request`` and decode and encode
with msgspec themselves (to own the error shapes and the speed), so Litestar sees no request body
and a ``Response[bytes]`` return: it documents every answer as ``{"type": "string"}`` and adds a
400 "Validation Exception" shape the broker never sends. ``ResponseSpec`` on the decorators does
not close the gap: it cannot describe response headers (``Retry-After``, ``Idempotent-Replayed``,
``WWW-Authenticate``), it generates random examples by default, its struct schemas are not what
msgspec decodes (no ``additionalProperties: false`` for ``forbid_unknown_fields``), and Litestar
overwrites ``components.schemas`` from its own registry, so exact schemas cannot be injected there.

So the document is built in two layers:

1. Litestar produces the skeleton from the typed handlers: paths, path and query parameters
   (typed in their signatures, with their ``Parameter`` descriptions), and the human parts the
   route decorators carry (``operation_id``, ``summary``, ``description``, ``tags``). A new
   route therefore shows up by itself.
2. :func:`build_spec` post-processes ``app.openapi_schema.to_schema()``: each operation's
   responses, header parameters, request body and security come from
   ``broker.api.openapi_contract`` (keyed by method and path, built from the blocks in
   ``openapi_responses``), and ``components.schemas`` from ``broker.api.openapi_schemas``
   (msgspec's schemas of the very structs the handlers encode and decode).

The same document is served at ``/schema/openapi.json`` and ``/schema/openapi.yaml`` (through
render plugins that call :func:`build_spec`, so what is served is what is committed), and written
to ``openapi/`` by ``broker openapi export`` (:func:`export`): sorted keys, no timestamps.
``tests/integration/test_openapi.py`` fails when the committed files are stale, when a route has
no contract (``build_spec(strict=True)``), or when the document is not valid OpenAPI 3.1;
``test_schemathesis.py`` checks the running app against it. A new route needs an entry in
``openapi_contract.contract`` and a ``broker openapi export``.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import msgspec
from litestar.enums import OpenAPIMediaType
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import OpenAPIRenderPlugin

from broker.api.openapi_contract import Operation, contract
from broker.api.openapi_responses import HEADERS, header_ref
from broker.api.openapi_schemas import schemas
from broker.taxonomy import Category

if TYPE_CHECKING:
    from litestar import Litestar, Request

__all__ = [
    "SPEC_FILES",
    "UndocumentedOperationError",
    "build_spec",
    "export",
    "openapi_config",
    "render_json",
    "render_yaml",
]

TITLE = "Action broker"
API_VERSION = "1.0.0"
"""The version of this HTTP contract (``/v1``); bump it when the document changes meaning."""
SCHEMA_PATH = "/schema"
SPEC_FILES = ("openapi.json", "openapi.yaml")

_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")

_CATEGORY_MEANING: dict[Category, str] = {
    Category.SCHEMA: "args missing or invalid, unknown tool, malformed proposal",
    Category.AUTHZ: "the caller may not do this",
    Category.PRECONDITION: "a check against the data plane, a budget, a rate limit or a policy failed",
    Category.IDEMPOTENCY: "the duplicate-request machinery answered",
    Category.PROVIDER: "the adapter or the backend behind it failed",
    Category.TIMEOUT: "the adapter did not answer within its deadline",
    Category.UNAVAILABLE: "the broker cannot reach its own state (store or ledger); nothing was executed",
    Category.INTERNAL: "an unexpected fault (a bug); no internals are leaked",
}

_INFO_DESCRIPTION = "\n".join(
    [
        "Every rejection and failed execution carries one `category` and one finer `code` and is "
        "answered as RFC 9457 `application/problem+json`. Categories:",
        "",
        *(f"- `{category.value}`: {meaning}." for category, meaning in _CATEGORY_MEANING.items()),
        "",
        "Every endpoint but the probes and /metrics needs `Authorization: Bearer <token>`. "
        f"This document is served at {SCHEMA_PATH}/openapi.json and {SCHEMA_PATH}/openapi.yaml.",
    ]
)

_PATH_PARAM_DOCS = {
    "name": "A tool's name, e.g. billing.refund (registered tools are <namespace>.<name>).",
    "proposal_id": "The proposal_id of a decision (prp_…).",
    "trace_id": "The trace_id of a decision.",
}


# -- assembling the document ----------------------------------------------------------------------


class UndocumentedOperationError(RuntimeError):
    """A route has no entry in the contract (or the contract names a route that is gone)."""


def build_spec(app: Litestar, *, strict: bool = True) -> dict[str, Any]:
    """The finished OpenAPI document for ``app`` as plain JSON data.

    Args:
        app: an app built by :func:`broker.app.create_app` (its ``openapi_config`` set).
        strict: raise :class:`UndocumentedOperationError` when an operation has no contract
            here; otherwise leave such an operation as Litestar describes it.
    """
    spec: dict[str, Any] = json.loads(
        json.dumps(msgspec.to_builtins(app.openapi_schema.to_schema()))
    )
    operations = contract()
    seen: set[tuple[str, str]] = set()
    undocumented: list[str] = []
    for path, item in spec.get("paths", {}).items():
        for method, operation in item.items():
            if method not in _METHODS:
                continue
            entry = operations.get((method, path))
            if entry is None:
                undocumented.append(f"{method.upper()} {path}")
                continue
            seen.add((method, path))
            _apply(operation, entry)
    stale = [
        f"{method.upper()} {path}" for method, path in operations if (method, path) not in seen
    ]
    if strict and (undocumented or stale):
        raise UndocumentedOperationError(
            "the OpenAPI contract in broker/api/openapi_contract.py does not match the routes: "
            f"undocumented {undocumented or 'none'}, no longer routed {stale or 'none'}"
        )
    spec["security"] = [{"bearer": []}]
    components = spec.setdefault("components", {})
    components["schemas"] = schemas()
    used = json.dumps(spec["paths"])
    components["headers"] = {
        name: copy.deepcopy(header)
        for name, header in HEADERS.items()
        if json.dumps(header_ref(name)) in used
    }
    components["securitySchemes"] = {
        "bearer": {
            "type": "http",
            "scheme": "bearer",
            "description": (
                "A route token (the principal: service account, route, tenant, allowed tools) "
                "or an admin token; short-lived signed tokens come from `broker token mint`. "
                "Nothing in a request body can widen it."
            ),
        }
    }
    spec["tags"] = [
        {"name": "proposals", "description": "Propose tool calls and read decisions."},
        {"name": "tools", "description": "The tools a route may call."},
        {"name": "audit", "description": "The hash-chained ledger."},
        {
            "name": "implied-writes",
            "description": "Claims in an agent's prose that no execution backs.",
        },
        {"name": "resolutions", "description": "Resolve calls whose outcome is unknown."},
        {"name": "approvals", "description": "Approvers decide proposals that wait for a person."},
        {"name": "operations", "description": "Probes and metrics; no token needed."},
    ]
    # Plain JSON values only (msgspec schemas carry Python defaults such as ``()``), so the
    # document is the same whether it is built, served or read back from openapi/.
    normalized: dict[str, Any] = json.loads(json.dumps(spec))
    return normalized


def _apply(operation: dict[str, Any], entry: Operation) -> None:
    if operation.get("deprecated") is False:
        del operation["deprecated"]
    parameters: list[dict[str, Any]] = []
    for parameter in operation.get("parameters", []):
        if parameter.get("deprecated") is False:
            del parameter["deprecated"]
        if parameter.get("in") == "path":
            parameter["schema"] = {**parameter.get("schema", {}), "minLength": 1}
            doc = _PATH_PARAM_DOCS.get(parameter["name"])
            if doc:
                parameter["description"] = doc
        parameters.append(parameter)
    parameters.extend(copy.deepcopy(list(entry.headers)))
    if parameters:
        operation["parameters"] = parameters
    if entry.request_body is not None:
        operation["requestBody"] = copy.deepcopy(entry.request_body)
    operation["responses"] = copy.deepcopy(entry.responses)
    if entry.public:
        operation["security"] = []


# -- rendering, serving, exporting ----------------------------------------------------------------


def render_json(spec: Mapping[str, Any]) -> str:
    """Indent 2, sorted keys, trailing newline: the committed form."""
    return json.dumps(spec, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def render_yaml(spec: Mapping[str, Any]) -> str:
    import yaml

    text: str = yaml.safe_dump(
        dict(spec), sort_keys=True, allow_unicode=True, default_flow_style=False, width=100
    )
    return text


class _SpecPlugin(OpenAPIRenderPlugin):
    """Serves the finished document (not Litestar's skeleton) in one format."""

    def __init__(self, fmt: Literal["json", "yaml"]) -> None:
        if fmt == "json":
            super().__init__(path="/openapi.json", media_type=OpenAPIMediaType.OPENAPI_JSON)
        else:
            super().__init__(
                path=["/openapi.yaml", "/openapi.yml"], media_type=OpenAPIMediaType.OPENAPI_YAML
            )
        self._format = fmt
        self._rendered: bytes | None = None

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        if self._rendered is None:
            spec = build_spec(request.app, strict=False)
            text = render_json(spec) if self._format == "json" else render_yaml(spec)
            self._rendered = text.encode()
        return self._rendered


def openapi_config() -> OpenAPIConfig:
    """What :func:`broker.app.create_app` passes as ``openapi_config`` (a fresh one per app)."""
    return OpenAPIConfig(
        title=TITLE,
        version=API_VERSION,
        summary="Models propose, the broker validates, executes with least privilege and records.",
        description=_INFO_DESCRIPTION,
        path=SCHEMA_PATH,
        render_plugins=[_SpecPlugin("json"), _SpecPlugin("yaml")],
    )


def export(spec: Mapping[str, Any], out: str | os.PathLike[str]) -> list[Path]:
    """Write ``openapi.json`` and ``openapi.yaml`` under ``out``; return their paths."""
    directory = Path(out)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in zip(SPEC_FILES, (render_json(spec), render_yaml(spec)), strict=True):
        path = directory / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
