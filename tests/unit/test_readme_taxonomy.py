"""The README's taxonomy table is what users read: it must list every category and code the broker
can answer (``CODE_STATUS``, which the OpenAPI document's enums are built from) or record in its
ledger (``LEDGER_ONLY``), each in the row of its category and HTTP status, and nothing else."""

from __future__ import annotations

import json
import re

import pytest

from broker.auth import TOKEN_LEEWAY_S
from broker.taxonomy import CODE_STATUS, LEDGER_ONLY, Category
from tests.conftest import ROOT

README = ROOT / "README.md"
LEDGER_ONLY_STATUS = "ledger only"

_ROW = re.compile(r"^\| `([A-Z]+)` \| (\d{3}|ledger only) \| (.+) \|$", re.M)
# A codes cell starts with its codes: `code` [(a note)], `code` ...; prose follows a ':' or ends it.
_CODE = re.compile(r"`([a-z_]+)`(?: \([^()]*\))?(?:, |:|$)")


def codes_of(cell: str) -> list[str]:
    """The codes a cell lists before its prose (backticked words in the prose are not codes)."""
    codes, at = [], 0
    while (match := _CODE.match(cell, at)) is not None:
        codes.append(match.group(1))
        at = match.end()
        if not match.group(0).endswith(", "):
            break
    return codes


def readme_table() -> dict[str, tuple[str, str]]:
    """``code -> (category, status)`` as the README's taxonomy table lists it."""
    text = README.read_text(encoding="utf-8")
    match = re.search(r"^## Failure taxonomy\n(.*?)(?=^## )", text, re.M | re.S)
    assert match, "README has no '## Failure taxonomy' section"
    table: dict[str, tuple[str, str]] = {}
    for category, status, cell in _ROW.findall(match.group(1)):
        codes = codes_of(cell)
        assert codes, f"the README's {category} {status} row lists no code: {cell!r}"
        for code in codes:
            assert code not in table, f"the README lists {code} twice"
            table[code] = (category, status)
    return table


def emitted() -> dict[str, tuple[str, str]]:
    """Every code the broker can put on the wire or in its ledger, with category and status."""
    codes = {code.value: (cat.value, str(status)) for code, (cat, status) in CODE_STATUS.items()}
    codes.update({code: (cat, LEDGER_ONLY_STATUS) for code, cat in LEDGER_ONLY.items()})
    return codes


def test_the_cell_parser_stops_at_prose() -> None:
    cell = "`schema_invalid` (every error in `errors`), `unknown_tool`: see `timeout` below"
    assert codes_of(cell) == ["schema_invalid", "unknown_tool"]
    assert codes_of("`timeout` (the key becomes `outcome_unknown`)") == ["timeout"]


def test_the_readme_lists_every_code_with_its_category_and_status() -> None:
    table, expected = readme_table(), emitted()
    missing = sorted(set(expected) - set(table))
    assert not missing, f"README's taxonomy table lacks {missing}"
    wrong = {code: table[code] for code in expected if table[code] != expected[code]}
    assert not wrong, f"README gives these codes another category or status: {wrong}"
    unknown = sorted(set(table) - set(expected))
    assert not unknown, f"README lists codes the broker never emits: {unknown}"


def test_the_readme_lists_every_category() -> None:
    listed = {category for category, _ in readme_table().values()}
    expected = {c.value for c in Category} | set(LEDGER_ONLY.values())
    assert listed == expected


@pytest.mark.parametrize("field", ["category", "code"])
def test_the_openapi_enums_are_the_readme_s(field: str) -> None:
    """The committed OpenAPI document's problem enums name nothing the README leaves out."""
    spec = json.loads((ROOT / "openapi" / "openapi.json").read_text(encoding="utf-8"))
    enum = set(spec["components"]["schemas"]["Problem"]["properties"][field]["enum"])
    table = readme_table()
    listed = set(table) if field == "code" else {category for category, _ in table.values()}
    assert enum <= listed, f"OpenAPI's Problem.{field} has {sorted(enum - listed)}, README not"


def test_retry_after_and_token_leeway_are_documented() -> None:
    text = README.read_text(encoding="utf-8")
    assert re.search(r"For `budget_exceeded` it is the\s+time left in the budget's", text)
    leeway = f"{TOKEN_LEEWAY_S:g} s"
    assert re.search(rf"accepted up to {leeway}\s+after its `exp`", text), leeway


def test_the_api_doc_names_the_ledger_only_codes() -> None:
    """docs/api.md's tables hold what answers carry; the ledger-only codes are named beside them."""
    words = " ".join((ROOT / "docs" / "api.md").read_text(encoding="utf-8").split())
    for code, category in LEDGER_ONLY.items():
        assert f"`{category}`, code `{code}`" in words
