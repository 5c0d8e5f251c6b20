"""``POST /v1/tools`` bodies: the registration struct, and its check, every problem at once.

A registration is checked whole before anything is stored: its shape (field by field, like the
config), its input schema (Draft 2020-12, safe regexes, no remote ``$ref``), that its
preconditions and routes exist and the caller may grant those routes, its adapter (an allowed
URL, a positive timeout, credentials the operator bound), its verifiers and its claim
vocabulary. Problems are JSON Pointers into the body, as in a proposal's ``errors``.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

import msgspec

from broker.allowlist import Allowlist, RefusedURL
from broker.config import (
    POINTER,
    REGISTERED_NAME,
    BrokerConfig,
    ClaimsConfig,
    HttpAdapterConfig,
    McpAdapterConfig,
    ReadCacheConfig,
    RetryConfig,
    ToolConfig,
    check_credential_headers,
    check_tool_schema,
    collect_conversion_problems,
)
from broker.model import FieldError, Principal
from broker.outbound import mcp_available
from broker.tool_id import format_tool_id
from broker.tools.registration_limits import limit_problems

__all__ = [
    "HttpSpec",
    "McpSpec",
    "Registration",
    "VerifierSpec",
    "check_registration",
    "registration_tool_id",
    "to_tool_config",
]

Url = Annotated[str, msgspec.Meta(pattern=r"^https?://", max_length=2048)]
Timeout = Annotated[float, msgspec.Meta(gt=0, le=300)]
MaxConcurrency = Annotated[int, msgspec.Meta(ge=1, le=10_000)]
_CLAIM_WORD = re.compile(r"^[A-Za-z][A-Za-z' -]{0,63}$")
_PRECONDITION_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,127}$")
_MAX_CLAIM_WORDS = 32


class _Spec(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    pass


class HttpSpec(_Spec, tag="http", tag_field="kind"):
    url: Url
    timeout_s: Timeout = 5.0
    """Bounds the whole call, retries included."""
    credential_headers: dict[str, str] = {}
    max_concurrency: MaxConcurrency = 32
    """The most calls in flight to this backend (origin) at once."""


class McpSpec(_Spec, tag="mcp", tag_field="kind"):
    url: Url
    tool: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
    """The tool's name on the upstream MCP server."""
    timeout_s: Timeout = 5.0
    max_concurrency: MaxConcurrency = 32
    credential_headers: dict[str, str] = {}
    """Header -> credential the operator bound to this tool, sent on the tenant's session."""


class VerifierSpec(_Spec):
    """A precondition this registration brings, answered by the backend over HTTP."""

    url: Url
    remediation: Annotated[str, msgspec.Meta(min_length=1, max_length=500)]
    description: str = ""


class Registration(_Spec):
    name: str
    description: Annotated[str, msgspec.Meta(min_length=1, max_length=2000)]
    input_schema: dict[str, Any]
    risk: Literal["read", "write", "irreversible"]
    adapter: HttpSpec | McpSpec
    idempotent: bool = False
    preconditions: list[str] = []
    routes: list[str] = []
    claims: ClaimsConfig | None = None
    version: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9._-]{1,32}$")] | None = None
    verifiers: dict[str, VerifierSpec] = {}
    retry: RetryConfig = msgspec.field(default_factory=RetryConfig)
    sensitive: list[str] = []
    redact_result: list[str] = []
    """Result keys taken out of what the agent receives (as a config tool's)."""
    budgets: list[str] = []
    """Budgets of the config this tool charges (a backend token: those granted to its namespace)."""
    rate_limits: list[str] = []
    """Rate limits of the config this tool counts against (likewise granted)."""
    read_cache: ReadCacheConfig | None = None
    """For ``risk = "read"`` only: answer repeated calls from the store's cache for ``ttl_s``."""


def registration_tool_id(registration: Registration) -> str:
    upstream = registration.adapter.tool if isinstance(registration.adapter, McpSpec) else None
    return format_tool_id(
        registration.name,
        registration.input_schema,
        namespace="",
        version=registration.version,
        upstream_name=upstream,
    )


def to_tool_config(registration: Registration, config: BrokerConfig) -> ToolConfig:
    """The registered tool as the executor sees every tool (its secrets come from config)."""
    spec = registration.adapter
    adapter: HttpAdapterConfig | McpAdapterConfig
    if isinstance(spec, HttpSpec):
        adapter = HttpAdapterConfig(
            url=spec.url,
            credential_headers=spec.credential_headers,
            max_concurrency=spec.max_concurrency,
        )
    else:
        adapter = McpAdapterConfig(
            url=spec.url,
            tool=spec.tool,
            max_concurrency=spec.max_concurrency,
            credential_headers=spec.credential_headers,
        )
    bound = config.registered_tools.get(registration.name)
    return ToolConfig(
        description=registration.description,
        risk=registration.risk,
        input_schema=registration.input_schema,
        adapter=adapter,
        idempotent=registration.idempotent,
        preconditions=list(registration.preconditions),
        budgets=list(registration.budgets),
        rate_limits=list(registration.rate_limits),
        timeout_s=spec.timeout_s,
        retry=registration.retry,
        credentials=dict(bound.credentials) if bound else {},
        tenant_credentials=dict(bound.tenant_credentials) if bound else {},
        sensitive=list(registration.sensitive),
        redact_result=list(registration.redact_result),
        claims=registration.claims,
        version=registration.version or "",
        cost_usd=bound.cost_usd if bound else 0.0,
        read_cache=registration.read_cache,
    )


def check_registration(
    raw: Any,
    *,
    config: BrokerConfig,
    principal: Principal,
    allowlist: Allowlist,
    tool_ids: dict[str, str],
) -> tuple[Registration | None, list[FieldError]]:
    """The registration, or every problem with it (located by JSON Pointer).

    Args:
        raw: the decoded JSON body.
        principal: an admin, or a backend token (which may grant only its ``grants``).
        tool_ids: every tool's id by name, to refuse a registration that would share one.
    """
    if not isinstance(raw, dict):
        return None, [FieldError("", "a registration is a JSON object")]
    problems: list[tuple[str, str]] = []
    collect_conversion_problems(raw, Registration, "", problems, POINTER)
    problems.extend(_semantic_problems(raw, config, principal, allowlist))
    registration = None
    if not problems:
        registration = msgspec.convert(raw, Registration)
        tool_id = registration_tool_id(registration)
        clash = [n for n, i in tool_ids.items() if i == tool_id and n != registration.name]
        if clash:
            problems.append(("/name", f"its tool_id {tool_id!r} is already {clash[0]!r}'s"))
            registration = None
    unique = list(dict.fromkeys(problems))
    return registration, [FieldError(path, message) for path, message in unique]


def _semantic_problems(
    raw: dict[str, Any], config: BrokerConfig, principal: Principal, allowlist: Allowlist
) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    add = problems.append
    name = raw.get("name")
    if isinstance(name, str):
        if not REGISTERED_NAME.fullmatch(name):
            add(("/name", "use <namespace>.<name>: [a-z][a-z0-9_-]* '.' [A-Za-z_][A-Za-z0-9_.-]*"))
        if name in config.tools:
            add(("/name", f"{name!r} is defined in the broker's config"))
    schema = raw.get("input_schema")
    if isinstance(schema, dict):
        for where, message in check_tool_schema(schema):
            add(("/input_schema" + (f"/{where}" if where else ""), message))
    if raw.get("risk") == "irreversible" and raw.get("idempotent") is True:
        add(("/idempotent", "an irreversible tool cannot be declared idempotent"))
    if raw.get("read_cache") is not None and raw.get("risk") != "read":
        # A cached answer to a write would report a change that never happened.
        add(("/read_cache", f'only risk = "read" tools may be cached, not {raw.get("risk")!r}'))
    verifiers = raw.get("verifiers")
    verifiers = verifiers if isinstance(verifiers, dict) else {}
    namespace = name.partition(".")[0] if isinstance(name, str) and "." in name else None
    problems.extend(_verifier_problems(verifiers, config, allowlist, namespace))
    problems.extend(
        _list_problems(raw, "preconditions", set(config.preconditions) | set(verifiers))
    )
    problems.extend(_route_problems(raw, config, principal))
    problems.extend(limit_problems(raw, config, principal))
    adapter = raw.get("adapter")
    if isinstance(adapter, dict):
        problems.extend(_adapter_problems(adapter, config, name, allowlist))
    claims = raw.get("claims")
    if isinstance(claims, dict):
        problems.extend(_claim_problems(claims))
    return problems


def _names(raw: dict[str, Any], key: str) -> list[tuple[int, str]]:
    value = raw.get(key)
    if not isinstance(value, list):
        return []
    return [(i, v) for i, v in enumerate(value) if isinstance(v, str)]


def _list_problems(raw: dict[str, Any], key: str, known: set[str]) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    seen: set[str] = set()
    for i, value in _names(raw, key):
        if value not in known:
            problems.append((f"/{key}/{i}", f"unknown precondition {value!r}"))
        if value in seen:
            problems.append((f"/{key}/{i}", f"{value!r} is listed twice"))
        seen.add(value)
    return problems


def _route_problems(
    raw: dict[str, Any], config: BrokerConfig, principal: Principal
) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    seen: set[str] = set()
    for i, route in _names(raw, "routes"):
        if route not in config.routes:
            problems.append((f"/routes/{i}", f"unknown route {route!r}"))
        elif not principal.admin and route not in principal.grants:
            problems.append((f"/routes/{i}", f"this token may not grant tools to {route!r}"))
        if route in seen:
            problems.append((f"/routes/{i}", f"{route!r} is listed twice"))
        seen.add(route)
    return problems


def _url_problem(allowlist: Allowlist, url: Any, where: str) -> list[tuple[str, str]]:
    if not isinstance(url, str):
        return []
    try:
        allowlist.match(url)
    except RefusedURL as exc:
        return [(where, str(exc))]
    return []


def _adapter_problems(
    adapter: dict[str, Any], config: BrokerConfig, name: Any, allowlist: Allowlist
) -> list[tuple[str, str]]:
    problems = _url_problem(allowlist, adapter.get("url"), "/adapter/url")
    if adapter.get("kind") == "mcp" and not mcp_available():
        problems.append(("/adapter/kind", "the mcp extra is not installed on this broker"))
    headers = adapter.get("credential_headers")
    if isinstance(headers, dict) and all(isinstance(v, str) for v in headers.values()):
        bound = config.registered_tools.get(name) if isinstance(name, str) else None
        names: set[str] = set()
        if bound is not None:
            names = set(bound.credentials).union(*map(set, bound.tenant_credentials.values()))
        for header, message in check_credential_headers(headers, names):
            problems.append((f"/adapter/credential_headers/{header}", message))
    return problems


def _verifier_problems(
    verifiers: dict[str, Any], config: BrokerConfig, allowlist: Allowlist, namespace: str | None
) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    for key, spec in verifiers.items():
        where = f"/verifiers/{key.replace('~', '~0').replace('/', '~1')}"
        if not _PRECONDITION_NAME.fullmatch(key):
            problems.append((where, "a precondition name is [A-Za-z][A-Za-z0-9_.-]*"))
        elif namespace is not None and not key.startswith(namespace + "."):
            problems.append((where, f"a registration's own preconditions are named {namespace}.*"))
        if key in config.preconditions:
            problems.append((where, f"{key!r} is a precondition of the broker's config"))
        if isinstance(spec, dict):
            problems.extend(_url_problem(allowlist, spec.get("url"), f"{where}/url"))
    return problems


def _claim_problems(claims: dict[str, Any]) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    for key in ("verbs", "nouns"):
        words = claims.get(key)
        if not isinstance(words, list):
            continue
        if len(words) > _MAX_CLAIM_WORDS:
            problems.append((f"/claims/{key}", f"at most {_MAX_CLAIM_WORDS} words"))
        seen: set[str] = set()
        for i, word in enumerate(words):
            if not isinstance(word, str):
                continue
            if not _CLAIM_WORD.fullmatch(word):
                problems.append(
                    (f"/claims/{key}/{i}", "a claim word is letters, spaces, ' or - (1-64 chars)")
                )
            elif word.lower() in seen:
                problems.append((f"/claims/{key}/{i}", f"{word!r} is listed twice"))
            seen.add(word.lower())
    return problems
