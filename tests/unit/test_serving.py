"""Serving: stock ``uvicorn.run``, with the broker's logging choices and nothing else."""

from __future__ import annotations

import os
from typing import Any

import pytest
import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from broker.http_limits import LIMITS_ENV, HttpLimits, LimitedHttpToolsProtocol
from broker.serving import serve


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, dict[str, Any]]]:
    calls: list[tuple[Any, dict[str, Any]]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: calls.append((app, options)))
    return calls


def test_the_broker_is_served_by_stock_uvicorn(runs: list[tuple[Any, dict[str, Any]]]) -> None:
    app = object()
    serve(app, host="127.0.0.1", port=8080)
    ((target, options),) = runs
    http = options.pop("http")
    assert target is app
    assert options == {
        "host": "127.0.0.1",
        "port": 8080,
        "log_config": None,
        "access_log": False,
    }  # no loop of the broker's own: uvicorn's default
    # The protocol is uvicorn's httptools one, with limits on request heads.
    assert issubclass(http, HttpToolsProtocol) and http.limits == HttpLimits()


def test_uvicorn_options_pass_through(
    runs: list[tuple[Any, dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LIMITS_ENV, "{}")  # restored after the test
    serve("broker.cli:app_from_environment", host="127.0.0.2", port=1, factory=True, workers=2)
    ((target, options),) = runs
    assert target == "broker.cli:app_from_environment"
    assert options["factory"] is True and options["workers"] == 2
    assert options["access_log"] is False and options["log_config"] is None
    # Workers import the protocol class afresh: its limits travel through the environment.
    assert options["http"] is LimitedHttpToolsProtocol
    assert LIMITS_ENV in os.environ
