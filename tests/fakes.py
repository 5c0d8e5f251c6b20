"""A configurable fake backend for fault tests, and configs built around it and around the demo.

``FakeBackend`` serves one operation per behaviour (succeed, fail definitely, fail transiently a
few times, be unavailable, hang, crash, answer garbage) and records every call it receives, which
is the ground truth of "executed" for the tests that use it. ``fake_config`` builds a checked
:class:`BrokerConfig` that exposes each behaviour as a tool on the route ``ops`` for tenant
``acme``; ``demo_raw`` returns the demo config as plain data to tweak and ``parse_config``.
"""

from __future__ import annotations

import asyncio
import copy
import tempfile
import threading
import tomllib
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from adapters.demo import DemoBackend
from broker.app import create_app
from broker.auth import hash_token
from broker.config import BrokerConfig, parse_config
from broker.plugins import Adapter, AdapterContext, Check, PreconditionVerifier, VerifierContext
from broker.taxonomy import ProviderError
from tests.conftest import DEMO_CONFIG, serve, with_fast_path, with_private_ledger

__all__ = [
    "DECISION_FIELDS",
    "FAKE",
    "FAKE_TOKEN",
    "FakeBackend",
    "GatedBackend",
    "SleepRecorder",
    "assert_decision_fields",
    "assert_problem",
    "create_fake",
    "demo_config_with",
    "demo_raw",
    "fake_config",
    "fake_tools",
    "pin_to_midday",
    "retry_after",
    "serve_demo",
]

FAKE_TOKEN = "fake-ops-token"
FAKE = {"Authorization": f"Bearer {FAKE_TOKEN}"}

BEHAVIOURS = ("ok", "definite", "transient", "unavailable", "hang", "crash", "not_a_dict")


class _FakeAdapter:
    def __init__(self, backend: FakeBackend, name: str, behaviour: str) -> None:
        self._backend = backend
        self._name = name
        self._behaviour = behaviour
        self.forwards_idempotency_key = backend.forwards_idempotency_key

    async def invoke(self, args: dict[str, Any], ctx: AdapterContext) -> dict[str, Any]:
        backend = self._backend
        backend.calls[self._name].append((dict(args), ctx))
        count = len(backend.calls[self._name])
        behaviour = self._behaviour
        if behaviour == "transient":
            if backend.transient_failures is None or count <= backend.transient_failures:
                raise ProviderError("the backend had a transient fault", retryable=True)
            behaviour = "ok"
        if behaviour == "ok":
            return {"done": True, "call": count, "args": dict(args)}
        if behaviour == "definite":
            raise ProviderError("the backend refused the request")
        if behaviour == "unavailable":
            raise ProviderError("the backend is unavailable", retryable=True, unavailable=True)
        if behaviour == "hang":
            await asyncio.Event().wait()  # never set: only the broker's deadline ends this
        if behaviour == "crash":
            raise RuntimeError("a bug inside the adapter, with secret internals")
        if behaviour == "not_a_dict":
            return ["not", "an", "object"]  # type: ignore[return-value]
        raise AssertionError(f"unknown behaviour {behaviour!r}")

    async def preview(self, args: dict[str, Any], ctx: AdapterContext) -> dict[str, Any]:
        self._backend.previews[self._name].append(dict(args))
        return {"would_call": self._name}


class FakeBackend:
    """One operation per behaviour; ``calls[operation]`` lists ``(args, ctx)`` of every call.

    Args:
        transient_failures: how many calls of the ``transient`` operation fail before it
            succeeds; ``None`` makes it fail forever.
        forwards_idempotency_key: what the adapters declare (a retry is then safe for the
            broker when the proposal carries a key).
    """

    def __init__(
        self, *, transient_failures: int | None = 1, forwards_idempotency_key: bool = False
    ) -> None:
        self.transient_failures = transient_failures
        self.forwards_idempotency_key = forwards_idempotency_key
        self.gate_open = True
        self.gate_mode = "normal"
        """``normal`` answers ``gate_open``; ``crash`` raises; ``hang`` never answers."""
        self.calls: defaultdict[str, list[tuple[dict[str, Any], AdapterContext]]] = defaultdict(
            list
        )
        self.previews: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
        self._adapters: dict[str, Adapter] = {b: _FakeAdapter(self, b, b) for b in BEHAVIOURS}
        self._verifiers: dict[str, PreconditionVerifier] = {"gate": self._gate}

    @property
    def adapters(self) -> Mapping[str, Adapter]:
        return self._adapters

    @property
    def verifiers(self) -> Mapping[str, PreconditionVerifier]:
        return self._verifiers

    def count(self, operation: str) -> int:
        return len(self.calls[operation])

    async def _gate(self, args: dict[str, Any], ctx: VerifierContext) -> Check:
        if self.gate_mode == "crash":
            raise RuntimeError("the verifier crashed, with secret internals")
        if self.gate_mode == "hang":
            await asyncio.Event().wait()
        if self.gate_open:
            return Check(True)
        return Check(False, "the gate is closed", "ASK_FOR_MORE: open the gate first")


def create_fake(**options: Any) -> FakeBackend:
    """Factory for ``[backends.fake] factory = "tests.fakes:create_fake"``."""
    return FakeBackend(**options)


_ARGS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"n": {"type": "integer"}},
}


def _tool(operation: str, **overrides: Any) -> dict[str, Any]:
    tool: dict[str, Any] = {
        "description": f"fake tool that behaves {operation!r}",
        "risk": "write",
        "idempotent": False,
        "input_schema": copy.deepcopy(_ARGS_SCHEMA),
        "adapter": {"kind": "python", "backend": "fake", "operation": operation},
        "timeout_s": 2.0,
        "retry": {"attempts": 3, "initial_backoff_s": 0.05, "max_backoff_s": 1.0},
    }
    tool.update(overrides)
    return tool


def fake_tools() -> dict[str, dict[str, Any]]:
    """The default fake tools: one per behaviour, plus idempotent and gated variants."""
    return {
        "ok": _tool("ok"),
        "ok_read": _tool("ok", risk="read", idempotent=True),
        "gated": _tool("ok", preconditions=["gate"], timeout_s=0.3),
        "definite": _tool("definite"),
        "transient": _tool("transient"),
        "transient_idem": _tool("transient", idempotent=True),
        "unavailable": _tool("unavailable"),
        "hang": _tool("hang", timeout_s=0.2),
        "hang_idem": _tool("hang", idempotent=True, timeout_s=0.2),
        "crash": _tool("crash"),
        "not_a_dict": _tool("not_a_dict"),
    }


def fake_raw(
    tools: dict[str, dict[str, Any]] | None = None, **sections: dict[str, Any]
) -> dict[str, Any]:
    tools = fake_tools() if tools is None else tools
    raw: dict[str, Any] = {
        "tenants": {"acme": {}},
        "routes": {"ops": {"tools": sorted(tools), "tenants": ["acme"]}},
        "service_accounts": {"ops@bots": {"route": "ops"}},
        "tokens": [
            {
                "name": "fake-ops",
                "sha256": hash_token(FAKE_TOKEN),
                "service_account": "ops@bots",
                "tenant": "acme",
            }
        ],
        "backends": {"fake": {"factory": "tests.fakes:create_fake"}},
        "preconditions": {
            "gate": {"verifier": "fake.gate", "remediation": "ASK_FOR_MORE: open the gate"}
        },
        "tools": tools,
    }
    raw.update(sections)
    return raw


def fake_config(
    tools: dict[str, dict[str, Any]] | None = None, **sections: dict[str, Any]
) -> BrokerConfig:
    """A checked config whose route ``ops`` (tenant ``acme``, token ``FAKE``) has the fake tools.

    ``sections`` add or replace top-level sections, e.g. ``budgets={...}``.
    """
    return parse_config(fake_raw(tools, **sections))


def demo_raw() -> dict[str, Any]:
    """``deploy/demo.toml`` as plain data, a fresh copy each call."""
    with DEMO_CONFIG.open("rb") as handle:
        return tomllib.load(handle)


def demo_config_with(**changes: Any) -> BrokerConfig:
    """The demo config with dotted-path changes, e.g. ``{"rate_limits.credit_calls.limit": 1000}``.

    Keys use ``__`` for dots since they are keyword arguments:
    ``demo_config_with(rate_limits__credit_calls__limit=1000)``.
    """
    raw = demo_raw()
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        node = raw
        for part in parents:
            node = node[part]
        node[leaf] = value
    return parse_config(raw)


# -- helpers shared by the integration tests ------------------------------------------------------

RFC9457 = ("type", "title", "status", "detail")
DECISION_FIELDS = (
    "proposal_id",
    "trace_id",
    "tool",
    "decision",
    "category",
    "code",
    "reason",
    "remediation",
    "errors",
    "dry_run",
    "replayed",
    "execution",
)


class SleepRecorder:
    """An injectable ``sleep`` that returns at once and remembers what it was asked to wait."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def start_demo(
    make_broker: Callable[..., tuple[str, Mapping[str, Any]]],
    config: BrokerConfig | None = None,
    *,
    demo: DemoBackend | None = None,
    **kwargs: Any,
) -> tuple[str, DemoBackend]:
    """Start a broker on the demo backend (a fresh one unless given); ``(url, demo)``."""
    demo = demo if demo is not None else DemoBackend()
    url, _ = make_broker(config, backends={"demo": demo}, **kwargs)
    return url, demo


def assert_problem(response: Any, status: int, code: str, category: str) -> dict[str, Any]:
    """An RFC 9457 problem+json answer with the taxonomy's category and code."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].split(";")[0].strip() == "application/problem+json"
    body: dict[str, Any] = response.json()
    for member in RFC9457:
        assert member in body, (member, body)
    assert body["status"] == status
    assert isinstance(body["type"], str) and body["type"]
    assert isinstance(body["title"], str) and body["title"]
    assert isinstance(body["detail"], str) and body["detail"]
    assert body["code"] == code, body
    assert body["category"] == category, body
    return body


def assert_decision_fields(body: dict[str, Any], *, decision: str = "rejected") -> None:
    """The decision members docs/api.md promises beside the problem members."""
    missing = [name for name in DECISION_FIELDS if name not in body]
    assert not missing, f"missing decision fields {missing} in {body}"
    assert body["decision"] == decision
    assert isinstance(body["proposal_id"], str) and body["proposal_id"].startswith("prp_")
    assert isinstance(body["trace_id"], str) and body["trace_id"]
    assert isinstance(body["errors"], list)
    assert body["replayed"] is False
    assert isinstance(body["dry_run"], bool)


def retry_after(response: Any) -> int:
    """The ``Retry-After`` header as whole seconds (asserting it is there and sensible)."""
    value = response.headers.get("retry-after")
    assert value is not None, f"no Retry-After on {response.status_code}: {response.text}"
    assert value.isdigit(), value
    seconds = int(value)
    assert seconds >= 1
    return seconds


def pin_to_midday(clock: Any) -> None:
    """Move the test clock to 12:00 UTC today, far from any daily budget window's edge."""
    clock.now = (int(clock.now) // 86_400) * 86_400 + 43_200.0


SIGNING_KEY = "test-signing-key-0123456789abcdef"
"""The token signing key ``make_broker`` (and ``serve_demo``) put into the broker's secrets."""


@contextmanager
def serve_demo(
    config: BrokerConfig | None = None, *, ingress: str = "routed", **kwargs: Any
) -> Iterator[tuple[str, DemoBackend]]:
    """A demo broker over HTTP for a module's worth of tests that take no state.

    Starting a server per test costs about 0.2 s; tests that only see rejections (schema,
    authz, preconditions) share one, and assert on its demo backend that nothing ran.
    """
    demo = DemoBackend()
    kwargs.setdefault("secrets", {"BROKER_TOKEN_SIGNING_KEY": SIGNING_KEY})
    with tempfile.TemporaryDirectory(prefix="broker-ledger-") as ledger_dir:
        # Its own ledger, never the demo's var/ledger.jsonl in the working tree.
        config = with_private_ledger(config or parse_config(demo_raw()), Path(ledger_dir))
        if ingress == "fast_path":
            config = with_fast_path(config)
        app = create_app(config, backends={"demo": demo}, **kwargs)
        with serve(app) as url:
            yield url, demo


class _GatedAdapter:
    def __init__(self, gated: GatedBackend, inner: Adapter) -> None:
        self._gated = gated
        self._inner = inner

    async def invoke(self, args: dict[str, Any], ctx: AdapterContext) -> dict[str, Any]:
        self._gated.entered.set()
        await asyncio.to_thread(self._gated.release.wait, 10)
        return await self._inner.invoke(args, ctx)


class GatedBackend:
    """Wraps a backend so that the named operations wait at a gate until the test opens it.

    The broker serves from another thread, so the gate is a pair of ``threading.Event``:
    ``entered`` is set when a call reaches the adapter, ``release`` lets it go on.
    """

    def __init__(self, inner: Any, operations: set[str]) -> None:
        self.inner = inner
        self.entered = threading.Event()
        self.release = threading.Event()
        self._adapters: dict[str, Adapter] = {
            name: _GatedAdapter(self, adapter) if name in operations else adapter
            for name, adapter in inner.adapters.items()
        }

    @property
    def adapters(self) -> Mapping[str, Adapter]:
        return self._adapters

    @property
    def verifiers(self) -> Mapping[str, PreconditionVerifier]:
        verifiers: Mapping[str, PreconditionVerifier] = self.inner.verifiers
        return verifiers
