"""Pass 2 of loading: the sections checked against each other, every problem with its key path.

Runs on whatever converted, so one run reports everything; an entry that exists in the file but
failed to convert (``BrokenEntries``) is not reported a second time as unknown where it is named.
"""

from __future__ import annotations

from broker.allowlist import Allowlist, RefusedURL, parse_entry
from broker.approvals.config_checks import check_approval_config, check_approver_token
from broker.config.budget_checks import budget_fit_problems
from broker.config.conversion import quote_key
from broker.config.mediation_checks import check_mediation
from broker.config.model import REGISTERED_NAME, BrokerConfig, RouteConfig, TokenConfig
from broker.config.tool_checks import (
    SECRET_SOURCE_HINT,
    check_credential_headers,
    check_secret_source,
    check_tool_schema,
)
from broker.config.tool_model import (
    HttpAdapterConfig,
    PythonAdapterConfig,
    RegisteredToolConfig,
    ToolConfig,
)
from broker.policy.checks import check_policy

__all__ = ["BrokenEntries", "cross_check"]

# Limits are counted per tenant so that one tenant's counters live in one Redis Cluster slot,
# beside its idempotency keys, and a proposal's admission stays one atomic script.
_PER_TENANT = 'must include "tenant": limits are always counted per tenant'


class BrokenEntries(dict[str, set[str]]):
    """Names of entries that exist in the file but failed to convert, by section."""

    def __missing__(self, section: str) -> set[str]:
        return set()


def cross_check(config: BrokerConfig, broken: BrokenEntries) -> list[tuple[str, str]]:
    """Every ``(key path, problem)`` in how the sections of ``config`` refer to each other."""
    problems: list[tuple[str, str]] = []
    add = problems.append

    for name, route in config.routes.items():
        for i, tool in enumerate(route.tools):
            if tool not in config.tools and tool not in broken["tools"]:
                add((f"routes.{name}.tools[{i}]", f"unknown tool {tool!r}"))
        for i, tenant in enumerate(route.tenants):
            if tenant not in config.tenants and tenant not in broken["tenants"]:
                add((f"routes.{name}.tenants[{i}]", f"unknown tenant {tenant!r}"))
        if route.dry_runs is not None:
            problems.extend(_check_dry_runs(config, route, f"routes.{quote_key(name)}.dry_runs"))

    for name, account in config.service_accounts.items():
        if account.route not in config.routes and account.route not in broken["routes"]:
            add((f"service_accounts.{quote_key(name)}.route", f"unknown route {account.route!r}"))

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
    problems.extend(check_approval_config(config))

    problems.extend(check_mediation(config))

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

    problems.extend(check_policy(config))  # [[policy.rules]]: broker/policy/checks.py

    allowlist, allowlist_problems = _allowlist(config)
    problems.extend(allowlist_problems)

    for name, pre in config.preconditions.items():
        where = f"preconditions.{quote_key(name)}"
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
                add((f"{where}.signing_secret", SECRET_SOURCE_HINT))

    webhook = config.approvals.webhook
    if webhook is not None:  # sent like an http tool's call: the same allowlist
        where = "approvals.webhook"
        problems.extend(_check_url(allowlist, webhook.url, f"{where}.url"))
        if not check_secret_source(webhook.signing_secret):
            add((f"{where}.signing_secret", SECRET_SOURCE_HINT))
        for i, tenant in enumerate(webhook.tenants):
            if tenant not in config.tenants and tenant not in broken["tenants"]:
                add((f"{where}.tenants[{i}]", f"unknown tenant {tenant!r}"))

    for name, backend_config in config.backends.items():
        if (backend_config.factory is None) == (backend_config.entry_point is None):
            add((f"backends.{quote_key(name)}", 'give exactly one of "factory" or "entry_point"'))

    for name, registered in config.registered_tools.items():
        where = f"registered_tools.{quote_key(name)}"
        if not REGISTERED_NAME.fullmatch(name):
            add((where, "a registered tool is named <namespace>.<name>, e.g. billing.refund"))
        elif name in config.tools:
            add((where, f"{name!r} is a config tool; put its credentials under tools.{name}"))
        problems.extend(_check_credentials(config, registered, where, broken))

    return problems


def _check_dry_runs(config: BrokerConfig, route: RouteConfig, where: str) -> list[tuple[str, str]]:
    scope = route.dry_runs
    if scope is None:
        return []
    problems: list[tuple[str, str]] = []
    if (scope.only is None) == (scope.except_ is None):
        problems.append((where, 'give exactly one of "only" or "except"'))
    if route.dry_run:
        # Every proposal of such a route is a dry run: a limit would refuse the other tools.
        problems.append((where, "the route runs every proposal dry (dry_run = true)"))
    known = set(route.tools) | set(config.registered_tools)
    for key, tools in (("only", scope.only), ("except", scope.except_)):
        for i, tool in enumerate(tools or ()):
            if tool not in known:
                problems.append((f"{where}.{key}[{i}]", f"{tool!r} is not a tool of this route"))
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
    broken: BrokenEntries,
) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    for key, source in holder.credentials.items():
        if not check_secret_source(source):
            problems.append((f"{where}.credentials.{quote_key(key)}", SECRET_SOURCE_HINT))
    for tenant, credentials in holder.tenant_credentials.items():
        here = f"{where}.tenant_credentials.{quote_key(tenant)}"
        if tenant not in config.tenants and tenant not in broken["tenants"]:
            problems.append((here, f"unknown tenant {tenant!r}"))
        for key, source in credentials.items():
            if not check_secret_source(source):
                problems.append((f"{here}.{quote_key(key)}", SECRET_SOURCE_HINT))
    return problems


def _check_token(
    config: BrokerConfig, token: TokenConfig, where: str, broken: BrokenEntries
) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    if token.approver_tenants and token.admin:
        problems.append((f"{where}.approver_tenants", "an admin token approves for every tenant"))
    if token.approver_tenants and token.backend_namespace:
        problems.append((f"{where}.approver_tenants", "a backend token never approves"))
    if token.approver_tenants and not (token.admin or token.backend_namespace):
        return check_approver_token(config, token, where, broken["tenants"])
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
    config: BrokerConfig, name: str, tool: ToolConfig, broken: BrokenEntries
) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    add = problems.append
    base = f"tools.{name}"
    for where, message in check_tool_schema(tool.input_schema):
        add((f"{base}.input_schema" + (f".{where.replace('/', '.')}" if where else ""), message))
    for i, pre in enumerate(tool.preconditions):
        if pre not in config.preconditions and pre not in broken["preconditions"]:
            add((f"{base}.preconditions[{i}]", f"unknown precondition {pre!r}"))
    for i, budget_name in enumerate(tool.budgets):
        budget = config.budgets.get(budget_name)
        if budget is None and budget_name in broken["budgets"]:
            continue
        if budget is None:
            add((f"{base}.budgets[{i}]", f"unknown budget {budget_name!r}"))
            continue
        for message in budget_fit_problems(budget_name, budget, tool.input_schema):
            add((f"{base}.budgets[{i}]", message))
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
    if tool.read_cache is not None and tool.risk != "read":
        # A cached answer to a write would report a change that never happened.
        add((f"{base}.read_cache", f'only risk = "read" tools may be cached, not {tool.risk!r}'))
    return problems


def _check_adapter(
    config: BrokerConfig, tool: ToolConfig, where: str, broken: BrokenEntries
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
            problems.append((f"{where}.signing_secret", SECRET_SOURCE_HINT))
    names = set(tool.credentials).union(*map(set, tool.tenant_credentials.values()))
    problems.extend(
        (f"{where}.credential_headers.{quote_key(header)}", message)
        for header, message in check_credential_headers(adapter.credential_headers, names)
    )
    return problems
