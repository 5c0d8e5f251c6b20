"""The package's seams, held by its imports: what may depend on what."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def imported(path: Path, package: str) -> set[str]:
    """Every module of ``package`` that a file imports, at the top or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found.update(n for n in names if n == package or n.startswith(package + "."))
    return found


def test_adapters_take_only_the_plugin_seam_from_the_broker() -> None:
    reaching = {
        str(path.relative_to(ROOT)): sorted(imported(path, "broker") - {"broker.plugins"})
        for path in sorted((ROOT / "adapters").rglob("*.py"))
    }
    assert {path: names for path, names in reaching.items() if names} == {}


def test_only_the_outbound_side_loads_adapter_kinds() -> None:
    # The HTTP and MCP clients are imported lazily, where the first tool needing one is built;
    # the rest of the broker knows adapters only through broker.plugins.
    knowing = {
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "broker").rglob("*.py"))
        if imported(path, "adapters")
    }
    assert knowing == {"broker/outbound.py"}


_EACH_FIRST = """
import importlib, pkgutil, sys
import broker
names = [m.name for m in pkgutil.walk_packages(broker.__path__, "broker.")]
for name in sorted(set(names) - {"broker.__main__"}):
    for loaded in [n for n in sys.modules if n == "broker" or n.startswith("broker.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except ImportError as exc:
        print(name, exc)
"""


def test_every_module_imports_on_its_own() -> None:
    """No import circle that only the usual order of imports hides: each module is imported
    first, in a process whose broker modules are all forgotten before each."""
    done = subprocess.run(
        [sys.executable, "-c", _EACH_FIRST],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    assert done.stdout.splitlines() == []
