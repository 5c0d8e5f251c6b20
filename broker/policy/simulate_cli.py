"""``broker policy simulate``: print what candidate rules would have decided differently.

    broker policy simulate --config candidate.toml [--ledger-config recorded.toml]
        [--from-seq N] [--to-seq M] [--since 2026-11-25T10:00:00Z] [--until ...]

The ledger is the one ``--ledger-config`` (default: the candidate config) names in ``[service]``:
the file or Redis ledger. Exit 0 with no differences, 1 with some, 2 on a bad config or ledger.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from broker.policy.simulate import Simulation, simulate
from broker.taxonomy import ConfigError

__all__ = ["add_policy_command"]

EXIT_SAME, EXIT_DIFFERENT, EXIT_ERROR = 0, 1, 2


def add_policy_command(commands: Any) -> None:
    policy = commands.add_parser("policy", help="policy rules: simulate a candidate on a ledger")
    policy_commands = policy.add_subparsers(dest="policy_command", required=True)
    sim = policy_commands.add_parser(
        "simulate",
        help="replay a ledger's proposals against candidate rules; print what would differ",
    )
    sim.add_argument("--config", required=True, help="the candidate config (TOML)")
    sim.add_argument("--ledger-config", help="the config whose ledger to read (default: --config)")
    sim.add_argument("--from-seq", type=int, default=1, metavar="N")
    sim.add_argument("--to-seq", type=int, default=None, metavar="M")
    sim.add_argument("--since", help="only records at or after this RFC 3339 UTC time")
    sim.add_argument("--until", help="only records before this RFC 3339 UTC time")
    sim.set_defaults(handler=_simulate)


def _simulate(args: argparse.Namespace) -> int:
    from broker.config import load_config
    from broker.policy.chain_hook import compiled_policy

    try:
        candidate = load_config(args.config)
        recorded = load_config(args.ledger_config) if args.ledger_config else candidate
    except ConfigError as exc:
        print(f"cannot simulate: {exc}", file=sys.stderr)
        return EXIT_ERROR
    try:
        result = asyncio.run(_replay(recorded, candidate, compiled_policy(candidate), args))
    except OSError as exc:
        print(f"cannot read the ledger: {exc}", file=sys.stderr)
        return EXIT_ERROR
    _print(result)
    return EXIT_DIFFERENT if result.differences else EXIT_SAME


async def _replay(
    recorded: Any, candidate: Any, policy: Any, args: argparse.Namespace
) -> Simulation:
    from broker.state import open_ledger_reader

    sink = await open_ledger_reader(recorded)
    try:
        since = _stamp(args.since)
        until = _stamp(args.until)
        records = [
            record
            async for record in sink.read(args.from_seq, args.to_seq)
            if (since is None or record.time >= since) and (until is None or record.time < until)
        ]
    finally:
        await sink.close()
    required = frozenset(name for name, r in candidate.routes.items() if r.require_session_id)
    risks = {name: tool.risk for name, tool in candidate.tools.items()}
    return simulate(records, policy, sessions_required=required, risks=risks)


def _stamp(text: str | None) -> str | None:
    """An RFC 3339 UTC time as the ledger writes it, so records compare as text."""
    if text is None:
        return None
    from datetime import UTC, datetime

    when = datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def _print(result: Simulation) -> None:
    print(f"{result.replayed} proposal(s) replayed, {len(result.differences)} decided differently")
    for rule, (blocked, released) in sorted(result.by_rule().items()):
        if blocked:
            print(f"rule {rule}: would now block {len(blocked)}")
            for diff in blocked:
                print(
                    f"  {diff.proposal_id} seq={diff.seq} tool={diff.tool} session={diff.session_id}"
                )
        if released:
            print(f"rule {rule}: would no longer block {len(released)}")
            for diff in released:
                print(
                    f"  {diff.proposal_id} seq={diff.seq} tool={diff.tool} session={diff.session_id}"
                )
