"""The client installs on its own: its declared dependencies are httpx and msgspec, and its code
imports nothing else (not the broker, not a provider SDK)."""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

CLIENT = Path(__file__).resolve().parents[2] / "client"
ALLOWED = {"httpx", "msgspec", "broker_client"}


def test_the_package_declares_only_httpx_and_msgspec() -> None:
    project = tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]
    names = {
        requirement.split(">")[0].split("=")[0].split("<")[0].strip()
        for requirement in project["dependencies"]
    }
    assert project["name"] == "action-broker-client"
    assert names == {"httpx", "msgspec"}


def test_the_code_imports_only_the_standard_library_httpx_and_msgspec() -> None:
    imported: set[str] = set()
    for source in (CLIENT / "src" / "broker_client").glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Import):
                imported.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])
    outside = imported - ALLOWED - set(sys.stdlib_module_names)
    assert not outside, f"the client imports {sorted(outside)}"
