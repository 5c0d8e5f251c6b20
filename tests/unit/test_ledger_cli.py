"""`ledger verify | export | public-key`: exit codes and output an operator relies on."""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from broker.ledger import (
    Checkpointer,
    JsonlCheckpointStore,
    JsonlLedgerSink,
    RedisCheckpointStore,
    RedisLedgerSink,
    export_public_key,
    load_or_create_signing_key,
)
from broker.ledger.cli import add_ledger_commands, main
from tests.ledger_entries import make_entry
from tests.redis_helpers import REDIS_URL, connected_redis, forget_prefix


@pytest.fixture
def signed_ledger(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A 5-record ledger with a checkpoint, its signing key and the exported public key."""
    path, key_path, public_path = tmp_path / "ledger.jsonl", tmp_path / "k.pem", tmp_path / "k.pub"
    signer = load_or_create_signing_key(key_path)
    public_path.write_bytes(export_public_key(signer))

    async def build() -> None:
        async with JsonlLedgerSink(path) as sink:
            for n in range(1, 6):
                await sink.append(make_entry(n))
            await Checkpointer(sink, signer, JsonlCheckpointStore.for_ledger(path)).checkpoint()

    asyncio.run(build())
    return path, key_path, public_path


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    code = "import sys; from broker.ledger.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=False
    )


def test_verify_says_ok_and_exits_0(
    signed_ledger: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path, _, public = signed_ledger
    assert main(["ledger", "verify", "--path", str(path), "--public-key", str(public)]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("ok: 5 records verified, head sha256:")
    assert out.err == ""


def test_verify_names_the_first_bad_seq_and_exits_1(
    signed_ledger: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path, _, public = signed_ledger
    path.write_bytes(path.read_bytes().replace(b'"order_id":"O-3"', b'"order_id":"O-9"'))
    assert main(["ledger", "verify", "--path", str(path), "--public-key", str(public)]) == 1
    assert capsys.readouterr().out == "FAILED at seq 3: args_hash mismatch\n"
    assert main(["ledger", "verify", "--path", str(path), "--from", "4", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report == {
        "ok": True,
        "records": 2,
        "head": report["head"],
        "first_bad_seq": None,
        "reason": None,
        "unsigned_tail": 2,  # no --public-key: no signature covers anything
    }


def test_verify_catches_truncation_through_the_default_checkpoint_file(
    signed_ledger: tuple[Path, Path, Path],
) -> None:
    path, _, public = signed_ledger
    path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:3]))
    result = run_cli("ledger", "verify", "--path", str(path), "--public-key", str(public))
    assert result.returncode == 1
    assert result.stdout.startswith("FAILED at seq 4: truncated: checkpoint at seq 5")


def test_verify_without_a_public_key_warns(
    signed_ledger: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path, _, _ = signed_ledger
    assert main(["ledger", "verify", "--path", str(path)]) == 0
    assert "signatures not checked" in capsys.readouterr().err


def test_verify_of_a_missing_file_is_an_error_not_a_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ledger", "verify", "--path", str(tmp_path / "nope.jsonl")]) == 2
    assert capsys.readouterr().err.startswith("error: cannot open ledger")


def test_export_streams_the_requested_range(signed_ledger: tuple[Path, Path, Path]) -> None:
    path, _, _ = signed_ledger
    result = run_cli("ledger", "export", "--path", str(path), "--from", "2", "--to", "3")
    assert result.returncode == 0
    assert result.stdout.splitlines() == path.read_text().splitlines()[1:3]
    assert result.stderr.strip() == "exported 2 records"


def test_public_key_prints_the_pem(signed_ledger: tuple[Path, Path, Path]) -> None:
    _, key_path, public = signed_ledger
    result = run_cli("ledger", "public-key", "--key", str(key_path))
    assert (result.returncode, result.stdout) == (0, public.read_text())


def test_public_key_creates_a_key_only_when_asked(tmp_path: Path) -> None:
    key_path = tmp_path / "new.pem"
    assert run_cli("ledger", "public-key", "--key", str(key_path)).returncode == 2
    assert not key_path.exists()
    created = run_cli("ledger", "public-key", "--key", str(key_path), "--create")
    assert created.returncode == 0 and created.stdout.startswith("-----BEGIN PUBLIC KEY-----")
    assert key_path.exists()


def test_the_commands_plug_into_another_cli() -> None:
    parser = argparse.ArgumentParser(prog="broker")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("serve")
    add_ledger_commands(commands)
    args = parser.parse_args(["ledger", "verify", "--redis-url", "redis://x", "--prefix", "p"])
    assert (args.redis_url, args.prefix, args.start, callable(args.func)) == (
        "redis://x",
        "p",
        1,
        True,
    )
    with pytest.raises(SystemExit):
        parser.parse_args(["ledger", "verify", "--path", "a", "--redis-url", "redis://x"])


@pytest.mark.redis
def test_verify_and_export_a_redis_ledger(tmp_path: Path) -> None:
    prefix = f"test:{uuid.uuid4().hex}"
    signer = load_or_create_signing_key(tmp_path / "k.pem")
    (tmp_path / "k.pub").write_bytes(export_public_key(signer))

    async def build() -> None:
        client = await connected_redis()
        sink = RedisLedgerSink(client, prefix=prefix)
        for n in range(1, 4):
            await sink.append(make_entry(n))
        await Checkpointer(sink, signer, RedisCheckpointStore(client, prefix=prefix)).checkpoint()
        await client.aclose()

    async def cleanup() -> None:
        client = await connected_redis()
        await forget_prefix(client, prefix)
        await client.aclose()

    asyncio.run(build())
    try:
        source = ["--redis-url", REDIS_URL, "--prefix", prefix]
        verified = run_cli("ledger", "verify", *source, "--public-key", str(tmp_path / "k.pub"))
        assert (verified.returncode, verified.stdout[:27]) == (0, "ok: 3 records verified, hea")
        exported = run_cli("ledger", "export", *source)
        assert [json.loads(line)["seq"] for line in exported.stdout.splitlines()] == [1, 2, 3]
    finally:
        asyncio.run(cleanup())


def test_verify_checks_in_worker_processes_when_asked(
    signed_ledger: tuple[Path, Path, Path],
) -> None:
    path, _, public = signed_ledger
    verified = run_cli("ledger", "verify", "--path", str(path), "--public-key", str(public),
                       "--jobs", "2")  # fmt: skip
    assert verified.returncode == 0, verified.stderr
    assert verified.stdout.startswith("ok: ")
    refused = run_cli("ledger", "verify", "--path", str(path), "--jobs", "0")
    assert refused.returncode == 2 and "at least 1" in refused.stderr
