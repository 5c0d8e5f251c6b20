"""Serving: stock ``uvicorn.run``, with the broker's logging choices and nothing else."""

from __future__ import annotations

from typing import Any

import pytest
import uvicorn

from broker.serving import serve


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, dict[str, Any]]]:
    calls: list[tuple[Any, dict[str, Any]]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: calls.append((app, options)))
    return calls


def test_the_broker_is_served_by_stock_uvicorn(runs: list[tuple[Any, dict[str, Any]]]) -> None:
    app = object()
    serve(app, host="127.0.0.1", port=8080)
    assert runs == [
        (app, {"host": "127.0.0.1", "port": 8080, "log_config": None, "access_log": False})
    ]  # no protocol, loop or parser of the broker's own: uvicorn's defaults


def test_uvicorn_options_pass_through(runs: list[tuple[Any, dict[str, Any]]]) -> None:
    serve("broker.cli:app_from_environment", host="127.0.0.2", port=1, factory=True, workers=2)
    ((target, options),) = runs
    assert target == "broker.cli:app_from_environment"
    assert options["factory"] is True and options["workers"] == 2
    assert options["access_log"] is False and options["log_config"] is None
