"""docs/api.md is the project's own contract: it must name every failure code (with the category
and status the code answers), every category and every endpoint the app serves, and no endpoint
the app does not serve."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from litestar import Litestar
from litestar.routes import ASGIRoute, HTTPRoute

from broker.app import create_app
from broker.config import BrokerConfig
from broker.responses import problem_fields
from broker.taxonomy import CODE_STATUS, Category, Code
from tests.conftest import ROOT, with_private_ledger

API_DOC = ROOT / "docs" / "api.md"
README = ROOT / "README.md"


def section(text: str, heading: str) -> str:
    """The body of the ``## heading`` section of ``text`` (up to the next ``## ``)."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"docs/api.md has no '## {heading}' section"
    return match.group(1)


def documented_codes(text: str) -> dict[str, tuple[str, int]]:
    """The taxonomy's code table: ``| `code` | `CATEGORY` | status | when |``."""
    rows = re.findall(r"^\| `([a-z_]+)` \| `([A-Z]+)` \| (\d{3}) \|", text, re.M)
    return {code: (category, int(status)) for code, category, status in rows}


def documented_categories(text: str) -> set[str]:
    """The taxonomy's category table: ``| `CATEGORY` | meaning |``."""
    return set(re.findall(r"^\| `([A-Z]+)` \| [^`]", text, re.M))


def documented_endpoints(text: str) -> set[tuple[str, str]]:
    """The endpoint table: ``| `METHOD /path` | token | answers |``."""
    return set(re.findall(r"^\| `([A-Z]+) (/[^` ]*)` \|", text, re.M))


def served_endpoints(app: Litestar) -> set[tuple[str, str]]:
    """Every (method, path) the app routes, as the OpenAPI document spells paths; ``/schema*``
    (the document itself) aside."""
    routes = app.routes
    served = {
        (method, route.path_format)
        for route in routes
        if isinstance(route, HTTPRoute)
        for method in route.route_handler_map
        if method not in ("OPTIONS", "HEAD")
    } | {  # plain ASGI routes that belong in the document name their methods (/mcp is JSON-RPC)
        (method.upper(), route.path_format)
        for route in routes
        if isinstance(route, ASGIRoute)
        for method in route.route_handler.opt.get("openapi", ())
    }
    return {(m, p) for m, p in served if not p.startswith("/schema")}


INBOX = "/ui"
"""The approver inbox's HTML pages: documented in their own section, not in the API's table."""


def documented_pages(text: str) -> set[tuple[str, str]]:
    """The inbox's page table: ``| `/path`, `/path` | `GET`, `POST` | what |``."""
    pages = set()
    for paths, methods in re.findall(
        r"^\| ((?:`/[^`]*`(?:, )?)+) \| ((?:`[A-Z]+`(?:, )?)+) \|", text, re.M
    ):
        for path in re.findall(r"`([^`]+)`", paths):
            pages |= {(method, path) for method in re.findall(r"`([A-Z]+)`", methods)}
    return pages


@pytest.fixture(scope="module")
def doc() -> str:
    return API_DOC.read_text(encoding="utf-8")


def test_every_code_is_documented_with_its_category_and_status(doc: str) -> None:
    table = documented_codes(section(doc, "Failure taxonomy"))
    expected = {
        code.value: (category.value, status) for code, (category, status) in CODE_STATUS.items()
    }
    assert set(CODE_STATUS) == set(Code), "every code needs a CODE_STATUS entry"
    missing = sorted(set(expected) - set(table))
    assert not missing, f"docs/api.md's taxonomy lacks {missing}"
    wrong = {c: table[c] for c in expected if table[c] != expected[c]}
    assert not wrong, f"docs/api.md gives these codes another category or status: {wrong}"
    unknown = sorted(set(table) - set(expected))
    assert not unknown, f"docs/api.md documents codes the broker never answers: {unknown}"


def test_every_category_is_documented(doc: str) -> None:
    listed = documented_categories(section(doc, "Failure taxonomy"))
    missing = sorted(c.value for c in Category if c.value not in listed)
    assert not missing, f"docs/api.md's category table lacks {missing}"


def test_the_problem_type_uri_is_documented(doc: str) -> None:
    type_uri, title, _ = problem_fields(Code.PRECONDITION_FAILED)
    assert type_uri in doc
    assert f"`{title}`" in doc
    assert type_uri.removesuffix(Code.PRECONDITION_FAILED.value) + "<code>" in doc


def test_every_served_endpoint_and_no_other_is_documented(
    doc: str, demo_config: BrokerConfig, tmp_path: Path
) -> None:
    app = create_app(with_private_ledger(demo_config, tmp_path), secrets={})
    served = {(m, p) for m, p in served_endpoints(app) if not p.startswith(INBOX)}
    assert ("POST", "/v1/proposals") in served  # the enumeration sees the plain ASGI route
    documented = documented_endpoints(section(doc, "Endpoints"))
    missing = sorted(served - documented)
    assert not missing, f"docs/api.md's endpoint table lacks {missing}"
    extra = sorted(documented - served)
    assert not extra, f"docs/api.md's endpoint table lists what the app does not serve: {extra}"


def test_the_committed_openapi_document_has_the_same_endpoints(doc: str) -> None:
    spec = json.loads((ROOT / "openapi" / "openapi.json").read_text(encoding="utf-8"))
    published = {(method.upper(), path) for path, item in spec["paths"].items() for method in item}
    assert documented_endpoints(section(doc, "Endpoints")) == published


def test_the_readme_links_the_api_doc_and_cites_no_other_contract() -> None:
    readme = README.read_text(encoding="utf-8")
    head = readme.split("\n## ", 1)[0]
    assert "(docs/api.md)" in head, "README's opening should link docs/api.md"
    assert "API.md" not in readme.replace("docs/api.md", "")


def test_every_inbox_page_and_no_other_is_documented(
    doc: str, demo_config: BrokerConfig, tmp_path: Path
) -> None:
    app = create_app(with_private_ledger(demo_config, tmp_path), secrets={})
    served = {(m, p) for m, p in served_endpoints(app) if p.startswith(INBOX)}
    assert ("POST", "/ui/approvals/{approval_id}/approve") in served
    assert documented_pages(section(doc, "The approver inbox")) == served
