"""CLI glue: ``ledger verify``, ``ledger export`` and ``ledger public-key`` for the broker CLI.

The project's ``broker`` command calls ``add_ledger_commands(subparsers)``; every command stores
its handler as ``func`` (``args.func(args) -> int``, the exit code). ``main`` runs them alone:
``python -m broker.ledger.cli ledger verify --path var/ledger.jsonl --public-key ledger.pub``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import msgspec

from broker.ledger.checkpoint_copies import (
    AllCheckpoints,
    RedisKeyCheckpointStore,
    checkpoint_target,
    parse_target,
)
from broker.ledger.checkpoints import CheckpointStore, JsonlCheckpointStore, RedisCheckpointStore
from broker.ledger.errors import LedgerUnavailableError
from broker.ledger.export import export_jsonl
from broker.ledger.jsonl import JsonlLedgerSink
from broker.ledger.keys import (
    export_public_key,
    load_or_create_signing_key,
    load_public_key,
    load_signing_key,
)
from broker.ledger.redis_sink import RedisLedgerSink
from broker.ledger.sink import LedgerSink
from broker.ledger.verify import verify

__all__ = ["add_ledger_commands", "main"]

EXIT_OK, EXIT_BAD, EXIT_ERROR = 0, 1, 2

_Action = Callable[[LedgerSink, CheckpointStore], Awaitable[int]]


def add_ledger_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``ledger {verify,export,public-key}`` to a CLI's subparsers."""
    ledger = subparsers.add_parser("ledger", help="verify, export and manage the audit ledger")
    commands = ledger.add_subparsers(dest="ledger_command", required=True, metavar="COMMAND")

    check = commands.add_parser("verify", help="verify the hash chain and its checkpoints")
    _add_source(check)
    check.add_argument("--from", dest="start", type=int, default=1, metavar="N",
                       help="start at seq N, trusting record N-1 as the anchor")  # fmt: skip
    check.add_argument("--public-key", type=Path, metavar="PEM",
                       help="Ed25519 public key that signed the checkpoints")  # fmt: skip
    check.add_argument("--checkpoints", type=Path, metavar="FILE",
                       help="checkpoint file (default: beside --path)")  # fmt: skip
    check.add_argument("--checkpoints-copy", action="append", default=[], metavar="TARGET",
                       help="also hold the chain to the checkpoints shipped here ([service] "
                       "checkpoint_copies: a directory or file, or redis://host/0#key)")  # fmt: skip
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    check.add_argument("--jobs", type=_positive, default=os.cpu_count() or 1, metavar="N",
                       help="worker processes checking records (default: one per CPU)")  # fmt: skip
    check.set_defaults(func=_run_verify)

    dump = commands.add_parser("export", help="write records as JSONL to stdout")
    _add_source(dump)
    dump.add_argument("--from", dest="start", type=int, default=1, metavar="N")
    dump.add_argument("--to", dest="end", type=int, default=None, metavar="M")
    dump.set_defaults(func=_run_export)

    public = commands.add_parser("public-key", help="print the checkpoint key's public half")
    public.add_argument("--key", type=Path, required=True, metavar="PATH")
    public.add_argument("--create", action="store_true", help="create the key if it is missing")
    public.set_defaults(func=_run_public_key)


def _add_source(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--path", type=Path, metavar="FILE", help="JSONL ledger file")
    source.add_argument("--redis-url", metavar="URL", help="Redis holding the ledger")
    parser.add_argument("--prefix", default="broker", help="Redis key prefix (with --redis-url)")


async def _with_sink(args: argparse.Namespace, action: _Action) -> int:
    if args.path is not None:
        sink = JsonlLedgerSink(args.path, read_only=True)
        store: CheckpointStore = JsonlCheckpointStore(
            getattr(args, "checkpoints", None) or JsonlCheckpointStore.for_ledger(args.path).path
        )
        try:
            return await action(sink, store)
        finally:
            await sink.close()
    import redis.asyncio as redis_asyncio

    client = redis_asyncio.Redis.from_url(args.redis_url)
    try:
        redis_sink = RedisLedgerSink(client, prefix=args.prefix)
        return await action(redis_sink, RedisCheckpointStore(client, prefix=args.prefix))
    finally:
        await client.aclose()


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _run_verify(args: argparse.Namespace) -> int:
    try:
        public_key = load_public_key(args.public_key.read_bytes()) if args.public_key else None
    except (OSError, ValueError) as exc:
        print(f"error: cannot load public key: {exc}", file=sys.stderr)
        return EXIT_ERROR

    try:
        copies = [_copy_store(target, args.path) for target in args.checkpoints_copy]
    except ValueError as exc:
        print(f"error: --checkpoints-copy {exc}", file=sys.stderr)
        return EXIT_ERROR

    async def action(sink: LedgerSink, store: CheckpointStore) -> int:
        try:
            report = await verify(
                sink,
                checkpoints=AllCheckpoints([store, *copies]),
                public_key=public_key,
                start_seq=args.start,
                jobs=args.jobs,
                expect_records=True,
            )
        finally:
            for copy in copies:
                if isinstance(copy, RedisKeyCheckpointStore):
                    await copy.aclose()
        if args.json:
            print(msgspec.json.encode(report).decode())
        elif report.ok:
            print(f"ok: {report.records} records verified, head {report.head}")
            if report.unsigned_tail:
                print(f"{report.unsigned_tail} records not yet covered by a signature")
        else:
            print(f"FAILED at seq {report.first_bad_seq}: {report.reason}")
            if args.redis_url is not None and report.records == 0:
                await _hint_prefix(sink, args.prefix)
        if public_key is None:
            print("warning: no --public-key, checkpoint signatures not checked", file=sys.stderr)
        return EXIT_OK if report.ok else EXIT_BAD

    return _guarded(args, action)


def _copy_store(target: str, ledger_path: Path | None) -> CheckpointStore:
    """A copy to read: a checkpoint file, a directory of them (named after the ledger's), or a
    ``redis://...#key`` LIST."""
    kind, where = parse_target(target)
    if kind == "dir" and not Path(where).is_dir():
        return JsonlCheckpointStore(where)
    return checkpoint_target(target, ledger_path or "ledger.jsonl")


async def _hint_prefix(sink: LedgerSink, prefix: str) -> None:
    """A broker with ``key_prefix = P`` keeps its ledger under ``P:ledger``: say so when that
    is where the records are."""
    if not isinstance(sink, RedisLedgerSink) or prefix.endswith(":ledger"):
        return
    other = RedisLedgerSink(sink.client, prefix=f"{prefix}:ledger")
    with contextlib.suppress(LedgerUnavailableError):
        if await other.head() is not None:
            print(
                f"hint: a ledger exists under --prefix {prefix}:ledger (a broker whose "
                f"key_prefix is {prefix!r} writes its ledger there)",
                file=sys.stderr,
            )


def _run_export(args: argparse.Namespace) -> int:
    async def action(sink: LedgerSink, store: CheckpointStore) -> int:
        written = await export_jsonl(sink, args.start, args.end, sys.stdout.buffer)
        sys.stdout.buffer.flush()
        print(f"exported {written} records", file=sys.stderr)
        return EXIT_OK

    return _guarded(args, action)


def _guarded(args: argparse.Namespace, action: _Action) -> int:
    try:
        return asyncio.run(_with_sink(args, action))
    except LedgerUnavailableError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR


def _run_public_key(args: argparse.Namespace) -> int:
    try:
        key = load_or_create_signing_key(args.key) if args.create else load_signing_key(args.key)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    sys.stdout.buffer.write(export_public_key(key))
    sys.stdout.buffer.flush()
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Run a ``ledger`` command on its own (the broker CLI embeds the same parsers)."""
    parser = argparse.ArgumentParser(prog="broker")
    add_ledger_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
