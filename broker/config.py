"""Typed configuration: msgspec structs decoded from TOML, then cross-checked, every problem at once.

Loading happens in two passes, like jsonschema's ``iter_errors``: first each value is converted
field by field so that one bad key does not hide the next, then the semantic cross-checks run
(references between sections, tool schemas, regex safety). Either pass collects problems with
their key paths and :func:`load_config` raises one :class:`~broker.taxonomy.ConfigError`.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
import types
import typing
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple

import jsonschema
import msgspec

from broker.allowlist import Allowlist, RefusedURL, parse_entry
from broker.regex_safety import unsafe_pattern_reason
from broker.taxonomy import ConfigError

__all__ = [
    "POINTER",
    "REGISTERED_NAME",
    "AdapterConfig",
    "BackendConfig",
    "BrokerConfig",
    "BudgetConfig",
    "ClaimsConfig",
    "HttpAdapterConfig",
    "McpAdapterConfig",
    "PreconditionConfig",
    "PythonAdapterConfig",
    "RateLimitConfig",
    "RegisteredToolConfig",
    "RetryConfig",
    "RouteConfig",
    "ServiceAccountConfig",
    "ServiceSettings",
    "TenantConfig",
    "TokenConfig",
    "ToolConfig",
    "check_credential_headers",
    "check_secret_source",
    "check_tool_schema",
    "collect_conversion_problems",
    "config_hash",
    "load_config",
    "parse_config",
]

Scope = Literal["tenant", "route", "tool"]
PositiveFloat = Annotated[float, msgspec.Meta(gt=0)]
PositiveInt = Annotated[int, msgspec.Meta(ge=1)]
Name = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z][A-Za-z0-9_.-]{0,127}$")]
Namespace = Annotated[str, msgspec.Meta(pattern=r"^[a-z][a-z0-9_-]{0,63}$")]
HttpUrl = Annotated[str, msgspec.Meta(pattern=r"^https?://", max_length=2048)]
Credentials = dict[str, str]


class _Section(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Base of every config struct: keyword-only fields, and unknown keys are errors."""


class ServiceSettings(_Section):
    """Process-wide settings: ``[service]``."""

    dry_run: bool = False
    """Run every proposal as a dry run (also ``broker serve --dry-run``)."""
    idempotency_ttl_s: PositiveInt = 86_400
    """How long an idempotency key and its stored response live."""
    max_body_bytes: PositiveInt = 1_048_576
    """Request bodies larger than this are refused with 413."""
    token_signing_key_env: str = "BROKER_TOKEN_SIGNING_KEY"
    """Environment variable holding the HMAC key for minted (short-lived) tokens."""
    token_issuer: str = "action-broker"
    """``iss`` and ``aud`` of minted tokens."""
    lease_margin_s: Annotated[float, msgspec.Meta(ge=0)] = 10.0
    """An idempotency claim is held for the tool's timeout plus this margin before it is
    presumed abandoned (then re-claimable if the tool is idempotent, else outcome_unknown)."""
    store: Literal["sqlite", "memory", "redis"] | None = None
    """Which store keeps keys, budgets and registrations: Redis when a URL is given, else the
    embedded SQLite file. ``memory`` forgets everything on restart (tests only)."""
    store_path: str | None = None
    """The SQLite store's file (default: ``state.sqlite3`` beside ``ledger_path``)."""
    store_synchronous: Literal["normal", "full"] = "normal"
    """SQLite durability: ``normal`` survives a crash of the process, ``full`` a power cut."""
    redis_url: str | None = None
    """Shared state in Redis (``REDIS_URL`` overrides); the embedded SQLite store when unset."""
    key_prefix: str = "broker"
    """Prefix of every Redis key this broker writes."""
    ledger: Literal["file", "redis"] = "file"
    """Where the ledger lives: a JSONL file (``ledger_path``) or Redis (needs ``redis_url``)."""
    ledger_path: str = "var/ledger.jsonl"
    """Where the file ledger appends its hash-chained records."""
    ledger_fsync: Literal["always", "batch", "never"] = "always"
    """When the file ledger fsyncs: every append, about once a second, or never (the OS decides)."""
    ledger_key_path: str = "var/ledger-signing-key.pem"
    """Ed25519 key that signs ledger checkpoints (created on first start, mode 0600)."""
    metrics_tenant_label: bool = False
    """Add a ``tenant`` label to the proposal and execution counters (bounded: config tenants)."""
    tracing: bool = False
    """OpenTelemetry spans (``execute_tool {tool}``) through the global tracer provider; install
    the ``tracing`` extra and configure exporters the usual OpenTelemetry way."""
    checkpoint_interval_s: PositiveFloat = 60.0
    """How often the ledger head is signed, records or not (heartbeats reveal a cut-off tail)."""
    sensitive_fields: list[str] = msgspec.field(
        default_factory=lambda: ["password", "secret", "token", "api_key", "card_number"]
    )
    """Argument and result keys redacted in the ledger for every tool."""
    http_allowlist: list[str] = []
    """URLs ``http`` and ``mcp`` adapters and HTTP verifiers may call (see broker/allowlist.py):
    ``"http://127.0.0.1:*"``, ``"https://*.billing.internal/api"``. Empty: none."""
    http_max_response_bytes: PositiveInt = 1_048_576
    """An HTTP backend's answer larger than this is refused (read as a stream, then cut)."""
    registry_poll_s: PositiveFloat = 1.0
    """How often each process checks the store for registration changes: the bound on how long
    a tool registered through another process stays invisible here (pub/sub is usually faster)."""


class TenantConfig(_Section):
    description: str = ""


class RouteConfig(_Section):
    """A named agent surface with its own tools and the tenants it serves."""

    tools: list[str]
    tenants: list[str]
    description: str = ""
    dry_run: bool = False
    """Run every proposal on this route as a dry run."""
    require_implied_write_check: bool = False
    """Proposals must name a ``session_id``, and one is refused (``policy_blocked``) while the
    session's last executed action has no implied-write check of the message after it."""


class ServiceAccountConfig(_Section):
    route: str
    description: str = ""


class TokenConfig(_Section):
    """A static bearer token, stored only as the SHA-256 hex digest of its value."""

    name: str
    sha256: Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{64}$")]
    service_account: str | None = None
    tenant: str | None = None
    tools: list[str] | None = None
    """Narrow the route's tools for this token; never widens them."""
    expires_at: datetime | None = None
    admin: bool = False
    backend_namespace: Namespace | None = None
    """A backend token: it may register, read and remove tools named ``<namespace>.*`` only."""
    backend_routes: list[str] = []
    """Routes a backend token may grant its tools to (``routes`` of a registration)."""


class PreconditionConfig(_Section):
    """A named check against the data plane, answered by a backend's verifier."""

    remediation: str
    """One line telling the agent what to do next, e.g. ``ASK_FOR_MORE: ...``."""
    verifier: str | None = None
    """``<backend>.<verifier name>`` of a Python backend, or else ``url``."""
    url: HttpUrl | None = None
    """An HTTP verifier: POSTed ``{precondition, args, tenant, route, tool, trace_id}``, signed
    like an http adapter call, answering ``{"ok": bool, "reason"?, "remediation"?}``."""
    signing_secret: str | None = None
    """For ``url``: the HMAC key of its signatures, ``"env:VAR"`` or ``"file:/path"``."""
    description: str = ""


class BudgetConfig(_Section):
    """A sum over an argument, or a count of calls, per scope per fixed (UTC-aligned) window."""

    kind: Literal["sum", "count"]
    limit: Annotated[float, msgspec.Meta(gt=0)]
    window_s: PositiveInt
    field: str | None = None
    """For ``sum``: the top-level numeric argument that is added up."""
    per: tuple[Scope, ...] = ("tenant",)


class RateLimitConfig(_Section):
    """At most ``limit`` calls in any ``window_s`` seconds (a sliding log, exact)."""

    limit: PositiveInt
    window_s: PositiveFloat
    per: tuple[Scope, ...] = ("tenant", "route")


class RetryConfig(_Section):
    """Retries for transport faults, only where a retry is safe."""

    attempts: Annotated[int, msgspec.Meta(ge=1, le=10)] = 3
    initial_backoff_s: Annotated[float, msgspec.Meta(ge=0)] = 0.05
    max_backoff_s: Annotated[float, msgspec.Meta(ge=0)] = 1.0


class PythonAdapterConfig(_Section, tag="python", tag_field="kind"):
    """An operation served by a backend object built in-process from ``[backends]``."""

    backend: str
    operation: str


class HttpAdapterConfig(_Section, tag="http", tag_field="kind"):
    """A backend reached over HTTP: signed ``POST``s to ``url`` (see API.md)."""

    url: HttpUrl
    signing_secret: str | None = None
    """``"env:VAR"`` or ``"file:/path"`` in config; registered tools get a generated one."""
    credential_headers: dict[str, str] = {}
    """Request header -> name of one of the tool's credentials, e.g. ``{"X-Api-Key" = "api_key"}``."""


class McpAdapterConfig(_Section, tag="mcp", tag_field="kind"):
    """A tool of an upstream MCP server (streamable HTTP), called with ``tools/call``."""

    url: HttpUrl
    tool: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
    """The tool's name on the upstream server."""


AdapterConfig = PythonAdapterConfig | HttpAdapterConfig | McpAdapterConfig


class ClaimsConfig(_Section):
    """Words by which prose claims this tool ran (for the implied-write detector)."""

    verbs: list[str] = []
    nouns: list[str] = []


class ToolConfig(_Section):
    description: str
    risk: Literal["read", "write", "irreversible"]
    input_schema: dict[str, Any]
    adapter: AdapterConfig
    idempotent: bool = False
    """True when executing twice has the effect of executing once (safe to retry)."""
    preconditions: list[str] = []
    budgets: list[str] = []
    rate_limits: list[str] = []
    timeout_s: PositiveFloat = 5.0
    retry: RetryConfig = msgspec.field(default_factory=RetryConfig)
    credentials: Credentials = {}
    """Secrets handed only to this tool's adapter: ``name = "env:VAR"`` or ``"file:/path"``."""
    tenant_credentials: dict[str, Credentials] = {}
    """Per-tenant secrets, over ``credentials`` for calls on that tenant's behalf only."""
    sensitive: list[str] = []
    """Argument/result keys redacted in the ledger (beside ``service.sensitive_fields``)."""
    claims: ClaimsConfig | None = None
    version: str = "1"


class BackendConfig(_Section):
    """A Python backend: ``factory`` (``module:callable``) or the ``entry_point`` of that name in
    the ``action_broker.adapters`` group is called with ``options``. Only named ones load."""

    factory: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")] | None = None
    entry_point: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_.-]{1,128}$")] | None = None
    options: dict[str, Any] = {}


class RegisteredToolConfig(_Section):
    """The operator's side of a tool that a backend registers through the API: its secrets."""

    credentials: Credentials = {}
    """As ``tools.X.credentials``: bound to the registered tool of that name only."""
    tenant_credentials: dict[str, Credentials] = {}
    """As ``tools.X.tenant_credentials``."""


class BrokerConfig(_Section):
    tenants: dict[str, TenantConfig]
    routes: dict[str, RouteConfig]
    service_accounts: dict[str, ServiceAccountConfig]
    tools: dict[str, ToolConfig]
    service: ServiceSettings = msgspec.field(default_factory=ServiceSettings)
    tokens: list[TokenConfig] = []
    backends: dict[str, BackendConfig] = {}
    preconditions: dict[str, PreconditionConfig] = {}
    budgets: dict[str, BudgetConfig] = {}
    rate_limits: dict[str, RateLimitConfig] = {}
    registered_tools: dict[str, RegisteredToolConfig] = {}


def load_config(path: str | Path) -> BrokerConfig:
    """Read and check a TOML config file; raise :class:`ConfigError` listing every problem."""
    try:
        raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError([("", f"cannot read {path}: {exc.strerror}")]) from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError([("", f"not valid TOML: {exc}")]) from exc
    return parse_config(raw)


def parse_config(raw: dict[str, Any]) -> BrokerConfig:
    """Convert already-parsed TOML/JSON data into a checked :class:`BrokerConfig`."""
    problems: list[tuple[str, str]] = []
    collect_conversion_problems(raw, BrokerConfig, "", problems)
    if not problems:
        config = msgspec.convert(raw, BrokerConfig)
        problems.extend(_cross_check(config, _Broken()))
    else:
        # Cross-check what did convert too, so one run reports everything; a reference to an
        # entry that exists but is itself broken is not reported a second time as unknown.
        partial, broken = _without_broken_entries(raw, problems)
        try:
            config = msgspec.convert(partial, BrokerConfig)
        except msgspec.ValidationError:
            pass  # a required section is what is broken; its problems are already listed
        else:
            problems.extend(_cross_check(config, broken))
    if problems:
        raise ConfigError(problems)
    return config


class _Broken(dict[str, set[str]]):
    """Names of entries that exist in the file but failed to convert, by section."""

    def __missing__(self, section: str) -> set[str]:
        return set()


_ENTRY_SECTIONS = (
    "tenants",
    "routes",
    "service_accounts",
    "tools",
    "backends",
    "preconditions",
    "budgets",
    "rate_limits",
    "registered_tools",
)


def _without_broken_entries(
    raw: dict[str, Any], problems: list[tuple[str, str]]
) -> tuple[dict[str, Any], _Broken]:
    broken = _Broken()
    top = {
        k: v
        for k, v in raw.items()
        if k in {f.encode_name for f in msgspec.structs.fields(BrokerConfig)}
    }
    for section in _ENTRY_SECTIONS:
        entries = top.get(section)
        if not isinstance(entries, dict):
            continue
        bad = {name for name in entries if _has_problem(problems, f"{section}.{_q(name)}")}
        broken[section] = bad
        top[section] = {k: v for k, v in entries.items() if k not in bad}
    tokens = top.get("tokens")
    if isinstance(tokens, list):
        top["tokens"] = [
            t for i, t in enumerate(tokens) if not _has_problem(problems, f"tokens[{i}]")
        ]
    if _has_problem(problems, "service"):
        top.pop("service", None)
    return top, broken


def _has_problem(problems: list[tuple[str, str]], prefix: str) -> bool:
    return any(
        path == prefix or path.startswith(prefix + ".") or path.startswith(prefix + "[")
        for path, _ in problems
    )


def config_hash(config: BrokerConfig) -> str:
    """The contract hash stamped on every ledger record: SHA-256 of the canonical config."""
    encoded = msgspec.json.encode(msgspec.to_builtins(config), order="sorted")
    return "sha256:" + hashlib.sha256(encoded).hexdigest()


def check_tool_schema(schema: dict[str, Any]) -> list[tuple[str, str]]:
    """Problems with a tool's input schema: Draft 2020-12 validity and unsafe regexes."""
    problems: list[tuple[str, str]] = []
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        problems.append((where, f"not a valid Draft 2020-12 schema: {exc.message}"))
        return problems
    if schema.get("type") != "object":
        problems.append(("type", 'a tool\'s input schema must have "type": "object"'))
    for where, pattern in _patterns(schema, ""):
        reason = unsafe_pattern_reason(pattern)
        if reason:
            problems.append((where, f"pattern {pattern!r} refused: {reason}"))
    for where, ref in _refs(schema, ""):
        if not ref.startswith("#"):
            problems.append((where, f"remote $ref {ref!r} is not allowed"))
    return problems


# -- pass 1: conversion, field by field ---------------------------------------------------------


class PathStyle(NamedTuple):
    """How problem locations are written: config key paths, or JSON Pointers for the API."""

    join: Callable[[str, str], str]
    item: Callable[[str, int], str]
    suffix: Callable[[str], str]
    """msgspec's own location (``.kind``, ``[0]``) appended to a path of this style."""


def _pointer_token(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _pointer_suffix(where: str) -> str:
    parts = re.findall(r"\.([^.\[]+)|\[(\d+)\]", where)
    return "".join("/" + _pointer_token(name or index) for name, index in parts)


POINTER = PathStyle(
    join=lambda path, key: f"{path}/{_pointer_token(key)}",
    item=lambda path, i: f"{path}/{i}",
    suffix=_pointer_suffix,
)


def collect_conversion_problems(
    value: Any,
    typ: Any,
    path: str,
    problems: list[tuple[str, str]],
    style: PathStyle | None = None,
) -> None:
    """Convert ``value`` to ``typ`` field by field so every bad key is reported, not only the first."""
    style = style or _KEY_PATH
    if isinstance(typ, type) and issubclass(typ, msgspec.Struct) and isinstance(value, dict):
        fields = {f.encode_name: f for f in msgspec.structs.fields(typ)}
        tag_field = typ.__struct_config__.tag_field
        for key in value:
            if key not in fields and key != tag_field:
                problems.append((style.join(path, key), "unknown key"))
        for name, field in fields.items():
            if name in value:
                collect_conversion_problems(
                    value[name], field.type, style.join(path, name), problems, style
                )
            elif field.required:
                problems.append((style.join(path, name), "required key is missing"))
        return
    tagged = _tagged_members(typ)
    if tagged and isinstance(value, dict):
        tag_field, by_tag = tagged
        kind = value.get(tag_field)
        member = by_tag.get(kind) if isinstance(kind, str) else None
        if member is None:
            choices = ", ".join(repr(k) for k in by_tag)
            problems.append((style.join(path, tag_field), f"{tag_field} must be one of {choices}"))
            return
        collect_conversion_problems(value, member, path, problems, style)
        return
    origin = getattr(typ, "__origin__", None)
    if origin is dict and isinstance(value, dict):
        _, value_type = typ.__args__
        for key, item in value.items():
            collect_conversion_problems(item, value_type, style.join(path, key), problems, style)
        return
    if origin is list and isinstance(value, list):
        (item_type,) = typ.__args__
        for index, item in enumerate(value):
            collect_conversion_problems(item, item_type, style.item(path, index), problems, style)
        return
    try:
        msgspec.convert(value, typ)
    except msgspec.ValidationError as exc:
        message, _, where = str(exc).partition(" - at `$")
        problems.append((path + style.suffix(where.rstrip("`")), message))


def _tagged_members(typ: Any) -> tuple[str, dict[str, type[msgspec.Struct]]] | None:
    """For a union of tagged structs (the adapter kinds): the tag field and each tag's struct."""
    if not isinstance(typ, types.UnionType):
        return None
    members: list[type[msgspec.Struct]] = [
        m for m in typing.get_args(typ) if isinstance(m, type) and issubclass(m, msgspec.Struct)
    ]
    if not members or len(members) != len(typing.get_args(typ)):
        return None
    configs = [m.__struct_config__ for m in members]
    tag_field = configs[0].tag_field
    if tag_field is None or any(c.tag_field != tag_field for c in configs):
        return None
    return tag_field, {str(c.tag): m for c, m in zip(configs, members, strict=True)}


def _join(path: str, key: str) -> str:
    key = key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else f'"{key}"'
    return f"{path}.{key}" if path else key


_KEY_PATH = PathStyle(join=_join, item=lambda path, i: f"{path}[{i}]", suffix=lambda w: w)


# -- pass 2: cross-checks -----------------------------------------------------------------------


def _cross_check(config: BrokerConfig, broken: _Broken) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    add = problems.append

    for name, route in config.routes.items():
        for i, tool in enumerate(route.tools):
            if tool not in config.tools and tool not in broken["tools"]:
                add((f"routes.{name}.tools[{i}]", f"unknown tool {tool!r}"))
        for i, tenant in enumerate(route.tenants):
            if tenant not in config.tenants and tenant not in broken["tenants"]:
                add((f"routes.{name}.tenants[{i}]", f"unknown tenant {tenant!r}"))

    for name, account in config.service_accounts.items():
        if account.route not in config.routes and account.route not in broken["routes"]:
            add((f"service_accounts.{_q(name)}.route", f"unknown route {account.route!r}"))

    seen_names: set[str] = set()
    seen_hashes: set[str] = set()
    for i, token in enumerate(config.tokens):
        where = f"tokens[{i}]"
        if token.name in seen_names:
            add((f"{where}.name", f"duplicate token name {token.name!r}"))
        if token.sha256 in seen_hashes:
            add((f"{where}.sha256", "the same token is declared twice"))
        seen_names.add(token.name)
        seen_hashes.add(token.sha256)
        problems.extend(_check_token(config, token, where, broken))

    for tool_name, tool_config in config.tools.items():
        problems.extend(_check_tool(config, tool_name, tool_config, broken))

    for name, budget in config.budgets.items():
        if "tenant" not in budget.per:
            add((f"budgets.{name}.per", _PER_TENANT))
        if budget.kind == "sum" and not budget.field:
            add((f"budgets.{name}.field", 'a "sum" budget needs the argument it adds up'))
        if budget.kind == "count" and budget.field:
            add((f"budgets.{name}.field", 'a "count" budget counts calls; remove "field"'))

    for name, limit in config.rate_limits.items():
        if "tenant" not in limit.per:
            add((f"rate_limits.{name}.per", _PER_TENANT))

    allowlist, allowlist_problems = _allowlist(config)
    problems.extend(allowlist_problems)

    for name, pre in config.preconditions.items():
        where = f"preconditions.{_q(name)}"
        if (pre.verifier is None) == (pre.url is None):
            add((where, 'give exactly one of "verifier" (a Python backend) or "url"'))
        elif pre.verifier is not None:
            backend, _, _ = pre.verifier.partition(".")
            if backend not in config.backends and backend not in broken["backends"]:
                add((f"{where}.verifier", f"unknown backend {backend!r}"))
            if pre.signing_secret is not None:
                add((f"{where}.signing_secret", 'only an HTTP verifier ("url") is signed'))
        else:
            problems.extend(_check_url(allowlist, pre.url or "", f"{where}.url"))
            if pre.signing_secret is None:
                add((f"{where}.signing_secret", 'an HTTP verifier needs "env:VAR" or "file:/path"'))
            elif not check_secret_source(pre.signing_secret):
                add((f"{where}.signing_secret", _SOURCE))

    for name, backend_config in config.backends.items():
        if (backend_config.factory is None) == (backend_config.entry_point is None):
            add((f"backends.{_q(name)}", 'give exactly one of "factory" or "entry_point"'))

    for name, registered in config.registered_tools.items():
        where = f"registered_tools.{_q(name)}"
        if not REGISTERED_NAME.fullmatch(name):
            add((where, "a registered tool is named <namespace>.<name>, e.g. billing.refund"))
        elif name in config.tools:
            add((where, f"{name!r} is a config tool; put its credentials under tools.{name}"))
        problems.extend(_check_credentials(config, registered, where, broken))

    return problems


REGISTERED_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,63}\.[A-Za-z_][A-Za-z0-9_.-]{0,127}$")
"""Tools registered through the API carry their namespace: ``<namespace>.<name>``."""

_SOURCE = 'use "env:VARIABLE" or "file:/path"'
_RESERVED_HEADERS = frozenset(
    {
        "content-type",
        "content-length",
        "host",
        "idempotency-key",
        "traceparent",
        "tracestate",
        "transfer-encoding",
        "connection",
    }
)
_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$")


def check_secret_source(source: str) -> bool:
    """Whether ``source`` names a secret the broker can read: ``env:VAR`` or ``file:/path``."""
    return bool(re.fullmatch(r"(env:[A-Za-z_][A-Za-z0-9_]*|file:.+)", source))


def check_credential_headers(
    headers: dict[str, str], credential_names: set[str]
) -> list[tuple[str, str]]:
    """Problems with an http adapter's ``credential_headers``, keyed by header name."""
    problems: list[tuple[str, str]] = []
    for header, credential in headers.items():
        lower = header.lower()
        if not _HEADER_NAME.fullmatch(header):
            problems.append((header, "not a valid HTTP header name"))
        elif lower in _RESERVED_HEADERS or lower.startswith("x-broker-"):
            problems.append((header, "the broker sets this header itself"))
        if credential not in credential_names:
            problems.append((header, f"no credential {credential!r} is bound to this tool"))
    return problems


def _allowlist(config: BrokerConfig) -> tuple[Allowlist, list[tuple[str, str]]]:
    problems: list[tuple[str, str]] = []
    good: list[str] = []
    for i, entry in enumerate(config.service.http_allowlist):
        try:
            parse_entry(entry)
        except ValueError as exc:
            problems.append((f"service.http_allowlist[{i}]", f"{entry!r}: {exc}"))
        else:
            good.append(entry)
    return Allowlist(good), problems


def _check_url(allowlist: Allowlist, url: str, where: str) -> list[tuple[str, str]]:
    try:
        allowlist.match(url)
    except RefusedURL as exc:
        return [(where, str(exc))]
    return []


def _check_credentials(
    config: BrokerConfig,
    holder: ToolConfig | RegisteredToolConfig,
    where: str,
    broken: _Broken,
) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    for key, source in holder.credentials.items():
        if not check_secret_source(source):
            problems.append((f"{where}.credentials.{_q(key)}", _SOURCE))
    for tenant, credentials in holder.tenant_credentials.items():
        here = f"{where}.tenant_credentials.{_q(tenant)}"
        if tenant not in config.tenants and tenant not in broken["tenants"]:
            problems.append((here, f"unknown tenant {tenant!r}"))
        for key, source in credentials.items():
            if not check_secret_source(source):
                problems.append((f"{here}.{_q(key)}", _SOURCE))
    return problems


# Limits are counted per tenant so that one tenant's counters live in one Redis Cluster slot,
# beside its idempotency keys, and a proposal's admission stays one atomic script.
_PER_TENANT = 'must include "tenant": limits are always counted per tenant'


def _check_token(
    config: BrokerConfig, token: TokenConfig, where: str, broken: _Broken
) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    if token.admin or token.backend_namespace:
        if token.service_account or token.tenant or token.tools:
            kind = "an admin" if token.admin else "a backend"
            problems.append((where, f"{kind} token carries no service account, tenant or tools"))
        if token.admin and token.backend_namespace:
            problems.append((f"{where}.backend_namespace", "an admin token has no namespace"))
        for i, granted in enumerate(token.backend_routes):
            if granted not in config.routes and granted not in broken["routes"]:
                problems.append((f"{where}.backend_routes[{i}]", f"unknown route {granted!r}"))
        if token.backend_routes and not token.backend_namespace:
            problems.append((f"{where}.backend_routes", "only a backend token grants routes"))
        return problems
    if token.backend_routes:
        problems.append((f"{where}.backend_routes", "only a backend token grants routes"))
    account = config.service_accounts.get(token.service_account or "")
    if account is None and token.service_account in broken["service_accounts"]:
        return problems
    if account is None:
        problems.append(
            (f"{where}.service_account", f"unknown service account {token.service_account!r}")
        )
        return problems
    route = config.routes.get(account.route)
    if route is None:
        return problems  # reported on the service account
    if token.tenant is None or token.tenant not in route.tenants:
        problems.append(
            (f"{where}.tenant", f"route {account.route!r} does not serve tenant {token.tenant!r}")
        )
    for j, tool in enumerate(token.tools or []):
        if tool not in route.tools:
            problems.append(
                (f"{where}.tools[{j}]", f"{tool!r} is not a tool of route {account.route!r}")
            )
    return problems


def _check_tool(
    config: BrokerConfig, name: str, tool: ToolConfig, broken: _Broken
) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    add = problems.append
    base = f"tools.{name}"
    for where, message in check_tool_schema(tool.input_schema):
        add((f"{base}.input_schema" + (f".{where.replace('/', '.')}" if where else ""), message))
    for i, pre in enumerate(tool.preconditions):
        if pre not in config.preconditions and pre not in broken["preconditions"]:
            add((f"{base}.preconditions[{i}]", f"unknown precondition {pre!r}"))
    properties = tool.input_schema.get("properties", {})
    for i, budget_name in enumerate(tool.budgets):
        budget = config.budgets.get(budget_name)
        if budget is None and budget_name in broken["budgets"]:
            continue
        if budget is None:
            add((f"{base}.budgets[{i}]", f"unknown budget {budget_name!r}"))
        elif budget.kind == "sum" and budget.field:
            field_schema = properties.get(budget.field, {}) if isinstance(properties, dict) else {}
            if field_schema.get("type") not in ("number", "integer"):
                add(
                    (
                        f"{base}.budgets[{i}]",
                        f"budget {budget_name!r} adds up {budget.field!r}, which the input schema "
                        "does not declare as a number",
                    )
                )
            elif budget.field not in tool.input_schema.get("required", []):
                add((f"{base}.budgets[{i}]", f"{budget.field!r} must be a required argument"))
            elif not _bounded_below_by_zero(field_schema):
                # A negative amount would hand budget back to the caller.
                add(
                    (
                        f"{base}.budgets[{i}]",
                        f"{budget.field!r} needs a minimum or exclusiveMinimum of at least 0",
                    )
                )
    for field_name in ("preconditions", "budgets", "rate_limits"):
        names = getattr(tool, field_name)
        if len(set(names)) != len(names):
            add((f"{base}.{field_name}", "lists the same name twice"))
    for i, limit_name in enumerate(tool.rate_limits):
        if limit_name not in config.rate_limits and limit_name not in broken["rate_limits"]:
            add((f"{base}.rate_limits[{i}]", f"unknown rate limit {limit_name!r}"))
    problems.extend(_check_adapter(config, tool, f"{base}.adapter", broken))
    problems.extend(_check_credentials(config, tool, base, broken))
    if tool.risk != "read" and tool.idempotent and tool.risk == "irreversible":
        add((f"{base}.idempotent", "an irreversible tool cannot be declared idempotent"))
    return problems


def _check_adapter(
    config: BrokerConfig, tool: ToolConfig, where: str, broken: _Broken
) -> list[tuple[str, str]]:
    adapter = tool.adapter
    problems: list[tuple[str, str]] = []
    if isinstance(adapter, PythonAdapterConfig):
        if adapter.backend not in config.backends and adapter.backend not in broken["backends"]:
            problems.append((f"{where}.backend", f"unknown backend {adapter.backend!r}"))
        return problems
    allowlist, _ = _allowlist(config)
    problems.extend(_check_url(allowlist, adapter.url, f"{where}.url"))
    if isinstance(adapter, HttpAdapterConfig):
        if adapter.signing_secret is None:
            problems.append((f"{where}.signing_secret", 'an http tool needs "env:VAR" or "file:"'))
        elif not check_secret_source(adapter.signing_secret):
            problems.append((f"{where}.signing_secret", _SOURCE))
        names = set(tool.credentials).union(*map(set, tool.tenant_credentials.values()))
        problems.extend(
            (f"{where}.credential_headers.{_q(header)}", message)
            for header, message in check_credential_headers(adapter.credential_headers, names)
        )
    return problems


def _bounded_below_by_zero(schema: dict[str, Any]) -> bool:
    bounds = [schema.get("minimum"), schema.get("exclusiveMinimum")]
    return any(isinstance(b, int | float) and b >= 0 for b in bounds)


def _q(name: str) -> str:
    return _join("", name)


def _patterns(schema: Any, where: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    if isinstance(schema, dict):
        for key, value in schema.items():
            here = f"{where}/{key}" if where else str(key)
            if key == "pattern" and isinstance(value, str):
                found.append((here, value))
            elif key == "patternProperties" and isinstance(value, dict):
                found.extend((f"{here}/{p}", p) for p in value)
                for p, sub in value.items():
                    found.extend(_patterns(sub, f"{here}/{p}"))
            else:
                found.extend(_patterns(value, here))
    elif isinstance(schema, list):
        for index, item in enumerate(schema):
            found.extend(_patterns(item, f"{where}/{index}"))
    return found


def _refs(schema: Any, where: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    if isinstance(schema, dict):
        for key, value in schema.items():
            here = f"{where}/{key}" if where else str(key)
            if key in ("$ref", "$dynamicRef") and isinstance(value, str):
                found.append((here, value))
            else:
                found.extend(_refs(value, here))
    elif isinstance(schema, list):
        for index, item in enumerate(schema):
            found.extend(_refs(item, f"{where}/{index}"))
    return found
