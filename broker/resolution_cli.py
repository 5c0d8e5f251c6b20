"""``broker resolve``: resolve a key of unknown outcome through a running broker.

Over HTTP (``POST /v1/resolutions``), as an operator reaches a deployed broker: the embedded store
is one process's file (locked while it serves) and Redis is shared by several, so the broker that
owns the state makes the change and writes the ledger record. The token comes from an environment
variable, never the command line (where ``ps`` shows it to everyone).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import httpx

__all__ = ["add_resolve_command"]


def add_resolve_command(commands: Any) -> None:
    resolve = commands.add_parser(
        "resolve",
        help="say what happened to a call answered outcome_unknown (POST /v1/resolutions)",
        description=(
            "succeeded (--result) and failed (--error-message) make the key replay that "
            "outcome; not_executed releases it so the agent's retry executes. Name the key as the "
            "agent used it, with the tool and args it proposed. Prints the broker's answer; exit "
            "0 when resolved, 1 when the broker refused, 2 on bad usage."
        ),
    )
    resolve.add_argument("--url", default="http://127.0.0.1:8080", help="the broker's base URL")
    resolve.add_argument(
        "--token-env",
        default="BROKER_TOKEN",
        help="environment variable holding an admin or the tool's backend token",
    )
    resolve.add_argument("--tenant", required=True)
    resolve.add_argument("--route", required=True)
    resolve.add_argument("--key", required=True, help="the idempotency key")
    resolve.add_argument("--tool", required=True)
    resolve.add_argument("--args", required=True, help="the proposal's args, as JSON")
    resolve.add_argument(
        "--outcome", required=True, choices=("succeeded", "failed", "not_executed")
    )
    resolve.add_argument("--result", help="succeeded: the call's result, a JSON object")
    resolve.add_argument("--error-message", help="failed: what the backend reported")
    resolve.add_argument("--error-code", help="failed: the backend's code for it")
    resolve.add_argument("--timeout", type=float, default=10.0, help="seconds")
    resolve.set_defaults(handler=_resolve)


def _json_option(parser_name: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SystemExit(f"broker resolve: {parser_name} is not valid JSON: {exc}") from exc


def _resolve(args: argparse.Namespace) -> int:
    token = os.environ.get(args.token_env)
    if not token:
        print(f"broker resolve: set {args.token_env} to an admin or backend token", file=sys.stderr)
        return 2
    body: dict[str, Any] = {
        "tenant": args.tenant,
        "route": args.route,
        "idempotency_key": args.key,
        "tool": args.tool,
        "args": _json_option("--args", args.args),
        "outcome": args.outcome,
    }
    if args.result is not None:
        body["result"] = _json_option("--result", args.result)
    if args.error_message is not None or args.error_code is not None:
        body["error"] = {"message": args.error_message or ""}
        if args.error_code is not None:
            body["error"]["code"] = args.error_code
    try:
        answer = httpx.post(
            args.url.rstrip("/") + "/v1/resolutions",
            json=body,
            headers={"Authorization": f"Bearer {token}"},
            timeout=args.timeout,
        )
    except httpx.HTTPError as exc:
        print(f"broker resolve: cannot reach {args.url}: {exc}", file=sys.stderr)
        return 1
    if answer.status_code == 200:
        print(answer.text)
        return 0
    print(answer.text, file=sys.stderr)  # problem+json: code, detail and JSON pointers
    return 1
