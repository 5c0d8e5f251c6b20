"""Loading a config: read the TOML, convert it (pass 1), cross-check it (pass 2), report all.

Like jsonschema's ``iter_errors``, both passes collect problems with their key paths, and
:func:`load_config` raises one :class:`~broker.taxonomy.ConfigError` naming every one of them.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import msgspec

from broker.config.conversion import collect_conversion_problems, quote_key
from broker.config.cross_checks import BrokenEntries, cross_check
from broker.config.model import BrokerConfig
from broker.taxonomy import ConfigError

__all__ = ["load_config", "parse_config"]


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
        problems.extend(cross_check(config, BrokenEntries()))
    else:
        # Cross-check what did convert too, so one run reports everything; a reference to an
        # entry that exists but is itself broken is not reported a second time as unknown.
        partial, broken = _without_broken_entries(raw, problems)
        try:
            config = msgspec.convert(partial, BrokerConfig)
        except msgspec.ValidationError:
            pass  # a required section is what is broken; its problems are already listed
        else:
            problems.extend(cross_check(config, broken))
    if problems:
        raise ConfigError(problems)
    return config


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
) -> tuple[dict[str, Any], BrokenEntries]:
    broken = BrokenEntries()
    top = {
        k: v
        for k, v in raw.items()
        if k in {f.encode_name for f in msgspec.structs.fields(BrokerConfig)}
    }
    for section in _ENTRY_SECTIONS:
        entries = top.get(section)
        if not isinstance(entries, dict):
            continue
        bad = {name for name in entries if _has_problem(problems, f"{section}.{quote_key(name)}")}
        broken[section] = bad
        top[section] = {k: v for k, v in entries.items() if k not in bad}
    tokens = top.get("tokens")
    if isinstance(tokens, list):
        top["tokens"] = [
            t for i, t in enumerate(tokens) if not _has_problem(problems, f"tokens[{i}]")
        ]
    if _has_problem(problems, "service"):
        top.pop("service", None)
    if _has_problem(problems, "policy"):  # the rest of the config is still cross-checked
        top.pop("policy", None)
    return top, broken


def _has_problem(problems: list[tuple[str, str]], prefix: str) -> bool:
    return any(
        path == prefix or path.startswith(prefix + ".") or path.startswith(prefix + "[")
        for path, _ in problems
    )
