"""Config for adapters beyond Python: http/mcp tools, HTTP verifiers, backend tokens, secrets,
entry points, the outbound allowlist. Every problem is reported in one run, with its key path."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from broker.auth import Authenticator, hash_token
from broker.config import parse_config
from broker.taxonomy import ConfigError
from broker.tools.runtime import build_registry, load_backends
from tests.registrations import registration_raw
from tests.unit.test_config import problems_of


def http_tool(**adapter: Any) -> dict[str, Any]:
    return {
        "description": "Refund over HTTP.",
        "risk": "write",
        "input_schema": {"type": "object"},
        "adapter": {
            "kind": "http",
            "url": "http://127.0.0.1:9000/refund",
            "signing_secret": "env:SIGN",
            **adapter,
        },
        "credentials": {"api_key": "env:KEY"},
    }


def test_a_broken_config_names_every_adapter_problem_at_once() -> None:
    raw = registration_raw()
    raw["service"]["http_allowlist"].append("gopher://x")
    raw["tools"]["remote"] = http_tool(
        url="http://10.0.0.1/refund",
        signing_secret="plain-text",
        credential_headers={"Idempotency-Key": "api_key", "X-Token": "missing"},
    )
    raw["tools"]["remote"]["tenant_credentials"] = {
        "initech": {"api_key": "env:K2"},
        "acme": {"api_key": "oops"},
    }
    raw["tools"]["unsigned"] = http_tool(signing_secret=None)
    del raw["tools"]["unsigned"]["adapter"]["signing_secret"]
    raw["tools"]["weird"] = {**http_tool(), "adapter": {"kind": "grpc", "url": "x"}}
    raw["preconditions"]["both"] = {
        "verifier": "demo.order_paid",
        "url": "http://127.0.0.1:1/v",
        "remediation": "x",
    }
    raw["preconditions"]["remote_check"] = {"url": "http://127.0.0.1:1/v", "remediation": "x"}
    raw["preconditions"]["outside"] = {
        "url": "http://192.168.1.1/v",
        "signing_secret": "env:S",
        "remediation": "x",
    }
    raw["backends"]["nothing"] = {}
    raw["backends"]["both"] = {"factory": "a:b", "entry_point": "b"}
    b2 = len(raw["tokens"])  # the demo's own tokens come first
    raw["tokens"].append(
        {
            "name": "b2",
            "sha256": hash_token("b2"),
            "backend_namespace": "ops",
            "backend_routes": ["nowhere"],
            "tenant": "acme",
        }
    )
    raw["tokens"].append(
        {
            "name": "r2",
            "sha256": hash_token("r2"),
            "service_account": "route-scheduling@bots",
            "tenant": "acme",
            "backend_routes": ["scheduling"],
        }
    )
    raw["registered_tools"] = {
        "NoNamespace": {},
        "issue_credit": {},
        "billing.ok": {"credentials": {"k": "bad"}},
    }
    problems = problems_of(raw)
    expected = {
        "service.http_allowlist[1]",
        "tools.remote.adapter.url",
        "tools.remote.adapter.signing_secret",
        "tools.remote.adapter.credential_headers.Idempotency-Key",
        "tools.remote.adapter.credential_headers.X-Token",
        "tools.remote.tenant_credentials.initech",
        "tools.remote.tenant_credentials.acme.api_key",
        "tools.unsigned.adapter.signing_secret",
        "tools.weird.adapter.kind",
        "preconditions.both",
        "preconditions.remote_check.signing_secret",
        "preconditions.outside.url",
        "backends.nothing",
        "backends.both",
        f"tokens[{b2}]",
        f"tokens[{b2}].backend_routes[0]",
        f"tokens[{b2 + 1}].backend_routes",
        "registered_tools.NoNamespace",
        "registered_tools.issue_credit",
        'registered_tools."billing.ok".credentials.k',
    }
    missing = expected - set(problems)
    assert not missing, problems


def test_backend_tokens_become_namespace_principals() -> None:
    config = parse_config(registration_raw())
    auth = Authenticator(config, signing_key=None)
    backend = auth.authenticate("Bearer billing-backend-token")
    assert backend.namespace == "billing" and backend.grants == {"billing_help"}
    assert backend.route is None and not backend.admin and not backend.tools
    route = auth.authenticate("Bearer demo-billing-token")
    assert route.namespace is None and not route.narrowed


def test_http_tools_and_verifiers_bind_their_secrets(tmp_path: Path) -> None:
    raw = registration_raw()
    raw["tools"]["remote"] = http_tool(credential_headers={"X-Api-Key": "api_key"})
    raw["tools"]["remote"]["tenant_credentials"] = {
        "acme": {"api_key": f"file:{tmp_path / 'acme'}"}
    }
    raw["routes"]["billing_help"]["tools"].append("remote")
    raw["preconditions"]["remote_check"] = {
        "url": "http://127.0.0.1:1/v",
        "signing_secret": "env:SIGN",
        "remediation": "x",
    }
    config = parse_config(raw)
    demo = load_backends(config)[0]
    with pytest.raises(ConfigError) as missing:
        build_registry(config, secrets={}, backends=demo)
    assert {path for path, _ in missing.value.problems} == {
        "tools.remote.adapter.signing_secret",
        "tools.remote.credentials.api_key",
        "tools.remote.tenant_credentials.acme.api_key",
        "preconditions.remote_check.signing_secret",
    }
    assert "SIGN" in str(missing.value)
    (tmp_path / "acme").write_text("acme-secret\n")
    registry = build_registry(config, secrets={"SIGN": "s", "KEY": "base"}, backends=demo)
    remote = registry.tools["remote"]
    assert dict(remote.credentials) == {"api_key": "base"}
    assert dict(remote.for_tenant("acme").credentials) == {"api_key": "acme-secret"}
    assert remote.for_tenant("acme") is remote.for_tenant("acme")
    assert remote.for_tenant("globex") is remote
    assert "acme-secret" not in repr(remote.for_tenant("acme")) and "base" not in repr(remote)


def test_a_backend_loads_from_an_entry_point_only_when_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "plugin_pkg"
    package.mkdir()
    (package / "__init__.py").write_text(
        textwrap.dedent(
            """
            from adapters.python import FunctionBackend

            async def ping(args, ctx):
                return {"pong": args.get("n", 0)}

            def create(greeting="hi"):
                return FunctionBackend(adapters={"ping": ping})
            """
        )
    )
    dist = tmp_path / "plugin_pkg-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: plugin-pkg\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[action_broker.adapters]\nplugin = plugin_pkg:create\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    raw = registration_raw()
    raw["backends"]["plugin"] = {"entry_point": "plugin", "options": {"greeting": "hello"}}
    backends, problems = load_backends(parse_config(raw))
    assert not problems and "ping" in backends["plugin"].adapters
    raw["backends"]["plugin"] = {"entry_point": "not-installed"}
    _, problems = load_backends(parse_config(raw))
    assert (
        problems == [("backends.plugin.entry_point", problems[0][1])]
        and "not-installed" in problems[0][1]
    )
    sys.modules.pop("plugin_pkg", None)
