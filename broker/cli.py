"""The ``broker`` command: serve, check-config, token mint, ledger verify/export/public-key."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from broker.gc_tuning import tune_gc_for_serving
from broker.ledger.cli import add_ledger_commands
from broker.logs import configure_logging
from broker.resolution_cli import add_resolve_command
from broker.taxonomy import ConfigError

if TYPE_CHECKING:
    from litestar import Litestar

    from broker.config import BrokerConfig
    from broker.http_limits import HttpLimits

__all__ = ["main"]

_DURATION = re.compile(r"^(\d+)([smhd]?)$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="broker", description="An action broker for LLM agents.")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="serve the broker over HTTP")
    serve.add_argument("--config", required=True, help="TOML config file")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8080")))
    serve.add_argument("--dry-run", action="store_true", help="run every proposal as a dry run")
    serve.add_argument(
        "--workers", type=int, default=1, help="worker processes (needs Redis for shared state)"
    )
    serve.set_defaults(handler=_serve)

    check = commands.add_parser("check-config", help="report every problem in a config file")
    check.add_argument("file")
    check.set_defaults(handler=_check_config)

    token = commands.add_parser("token", help="short-lived tokens")
    token_commands = token.add_subparsers(dest="token_command", required=True)
    mint = token_commands.add_parser("mint", help="sign a token for one route and tenant")
    mint.add_argument("--config", required=True)
    mint.add_argument("--route", required=True)
    mint.add_argument("--tenant", required=True)
    mint.add_argument("--ttl", default="15m", help="lifetime: 90, 90s, 15m, 2h, 1d")
    mint.add_argument("--tool", action="append", dest="tools", help="narrow to these tools")
    mint.set_defaults(handler=_mint)

    implied = commands.add_parser("implied-writes", help="check prose against executions")
    implied_commands = implied.add_subparsers(dest="implied_command", required=True)
    lint = implied_commands.add_parser(
        "lint", help="judge a JSONL transcript against the ledger; exit 1 on violations"
    )
    lint.add_argument("--config", required=True)
    lint.add_argument("transcript", help='JSONL: {"text", "trace_id" or "session_id", "role"?}')
    lint.set_defaults(handler=_lint)

    openapi = commands.add_parser("openapi", help="the OpenAPI description of the HTTP API")
    openapi_commands = openapi.add_subparsers(dest="openapi_command", required=True)
    export = openapi_commands.add_parser(
        "export", help="write openapi.json and openapi.yaml (deterministic, commit them)"
    )
    export.add_argument("--config", default="deploy/demo.toml", help="TOML config file")
    export.add_argument("--out", default="openapi", help="directory to write into")
    export.set_defaults(handler=_openapi_export)

    add_ledger_commands(commands)
    add_resolve_command(commands)

    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None) or args.func
    code: int = handler(args)
    return code


def _check_config(args: argparse.Namespace) -> int:
    from broker.config import load_config
    from broker.tools.runtime import build_registry

    try:
        config = load_config(args.file)
        build_registry(config, secrets=os.environ)
    except ConfigError as exc:
        print(f"{args.file}: {len(exc.problems)} problem(s)", file=sys.stderr)
        for path, message in exc.problems:
            print(f"  {path or '<file>'}: {message}", file=sys.stderr)
        return 1
    print(f"{args.file}: ok ({len(config.tools)} tools, {len(config.routes)} routes)")
    return 0


def _serve(args: argparse.Namespace) -> int:
    import tempfile

    from broker.config import load_config
    from broker.serving import serve

    try:
        config = load_config(args.config)
        if args.workers > 1 and not (os.environ.get("REDIS_URL") or config.service.redis_url):
            print(
                "refusing to start: several workers need shared state; set REDIS_URL",
                file=sys.stderr,
            )
            return 1
        volatile = _volatile_redis_refusal(config)
        if volatile is not None:
            print(f"refusing to start: {volatile}", file=sys.stderr)
            return 1
        app = None if args.workers > 1 else _build(config, args.dry_run)
    except ConfigError as exc:
        print(f"refusing to start: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # a read-only root, a data directory that is not one: one line
        print(f"refusing to start: {_os_error_line(exc)}", file=sys.stderr)
        return 1
    if app is not None:
        configure_logging()
        tune_gc_for_serving()
        serve(app, host=args.host, port=args.port, limits=_http_limits(config))
        return 0
    # Workers import the app afresh: hand them the config through the environment, and give
    # prometheus-client a directory shared by all of them before any of them starts.
    os.environ["BROKER_CONFIG"] = os.path.abspath(args.config)
    os.environ["BROKER_DRY_RUN"] = "1" if args.dry_run else ""
    os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="broker-metrics-"))
    serve(
        "broker.cli:app_from_environment",
        factory=True,
        workers=args.workers,
        host=args.host,
        port=args.port,
        limits=_http_limits(config),
    )
    return 0


def _volatile_redis_refusal(config: BrokerConfig) -> str | None:
    from broker.redis_durability import refusal_at_start

    return refusal_at_start(config, os.environ)


def _os_error_line(exc: OSError) -> str:
    where = f" {exc.filename}" if exc.filename else ""
    return (
        f"cannot write the data directory:{where}: {exc.strerror or exc} "
        "(give the broker a writable directory for ledger_path, ledger_key_path and the store)"
    )


def _http_limits(config: BrokerConfig) -> HttpLimits:
    from broker.http_limits import HttpLimits

    service = config.service
    return HttpLimits(
        max_header_bytes=service.max_header_bytes,
        max_header_count=service.max_header_count,
        header_timeout_s=service.header_timeout_s,
    )


def _build(config: BrokerConfig, dry_run: bool) -> Litestar:
    from broker.app import create_app

    return create_app(config, dry_run=dry_run)


def app_from_environment() -> Litestar:
    """The app factory each ``--workers`` process calls (uvicorn ``factory=True``)."""
    from broker.config import load_config

    configure_logging()
    app = _build(load_config(os.environ["BROKER_CONFIG"]), bool(os.environ.get("BROKER_DRY_RUN")))
    tune_gc_for_serving()
    return app


def _lint(args: argparse.Namespace) -> int:
    import asyncio
    from pathlib import Path

    from broker.config import load_config

    try:
        config = load_config(args.config)
        lines = Path(args.transcript).read_bytes().splitlines()
    except (ConfigError, OSError) as exc:
        print(exc, file=sys.stderr)
        return 2
    return asyncio.run(_lint_async(config, lines, args.transcript))


async def _lint_async(config: BrokerConfig, lines: list[bytes], name: str) -> int:
    from broker.prose_audit import ImpliedWriteChecker, lint_transcript
    from broker.state import open_ledger_reader

    ledger = await open_ledger_reader(config)
    checker = ImpliedWriteChecker(lambda: (0, config.tools), ledger, config_hash="")
    violations = unreadable = 0
    try:
        async for number, result in lint_transcript(lines, checker):
            if isinstance(result, str):
                unreadable += 1
                print(f"{name}:{number}: {result}")
                continue
            for claim in result.violations:
                violations += 1
                print(f"{name}:{number}: {claim.status}: {claim.text!r} ({claim.reason})")
    finally:
        await ledger.close()
    print(f"{violations} violation(s), {unreadable} unreadable line(s)", file=sys.stderr)
    return 1 if violations or unreadable else 0


def _openapi_export(args: argparse.Namespace) -> int:
    from broker.api.openapi import export
    from broker.app import spec_for_config
    from broker.config import load_config

    try:
        spec = spec_for_config(load_config(args.config))
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 1
    for path in export(spec, args.out):
        print(path)
    return 0


def _mint(args: argparse.Namespace) -> int:
    from broker.auth import mint_token
    from broker.config import load_config

    match = _DURATION.fullmatch(args.ttl)
    if not match:
        print(f"--ttl {args.ttl!r}: use e.g. 90, 90s, 15m, 2h, 1d", file=sys.stderr)
        return 2
    ttl_s = int(match.group(1)) * _UNITS[match.group(2)]
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 1
    key = os.environ.get(config.service.token_signing_key_env)
    if not key:
        print(f"set {config.service.token_signing_key_env} to the signing key", file=sys.stderr)
        return 2
    try:
        token = mint_token(
            config,
            key.encode(),
            route=args.route,
            tenant=args.tenant,
            ttl_s=ttl_s,
            tools=args.tools,
        )
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    print(token)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
