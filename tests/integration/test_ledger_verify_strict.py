"""``broker ledger verify`` no longer passes what it should not, run as an operator runs it:

- a public key given means at least one valid signed checkpoint (deleting them does not pass a
  recomputed history);
- an empty ledger where one was expected (a wrong ``--prefix``, the config's ``key_prefix``
  instead of ``<key_prefix>:ledger``) is an error, with a hint;
- the records after the last signed checkpoint are reported apart;
- checkpoints shipped to a second place (``[service] checkpoint_copies``: a directory, a Redis
  key) catch a tail cut together with the checkpoints beside it.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest

from broker.app import create_app
from broker.ledger import (
    Checkpointer,
    JsonlCheckpointStore,
    JsonlLedgerSink,
    RedisLedgerSink,
    export_public_key,
    load_or_create_signing_key,
)
from broker.ledger.checkpoints import checkpoint_path_for
from broker.ledger.model import GENESIS_HASH
from broker.stores import MemoryStore
from broker.taxonomy import ConfigError
from tests.conftest import BILLING, serve, with_private_ledger
from tests.fakes import demo_config_with
from tests.ledger_entries import make_entry
from tests.redis_helpers import REDIS_URL, connected_redis, forget_prefix


def verify_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "broker", "ledger", "verify", "--jobs", "1", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def rehashed(lines: list[bytes]) -> list[bytes]:
    """The attacker's rewrite: change a record, recompute every hash after it (as the
    contract tests' helper does)."""
    from tests.contract.test_ledger_sinks import rewrite_and_rehash

    return rewrite_and_rehash(lines)


@pytest.fixture
def signed(tmp_path: Path) -> tuple[Path, Path]:
    """A 5-record file ledger checkpointed at seq 3, then 2 more records; its public key."""
    path = tmp_path / "ledger.jsonl"
    signer = load_or_create_signing_key(tmp_path / "k.pem")
    (tmp_path / "k.pub").write_bytes(export_public_key(signer))

    async def build() -> None:
        async with JsonlLedgerSink(path) as sink:
            for n in range(1, 4):
                await sink.append(make_entry(n))
            await Checkpointer(sink, signer, JsonlCheckpointStore.for_ledger(path)).checkpoint()
            for n in range(4, 6):
                await sink.append(make_entry(n))

    asyncio.run(build())
    return path, tmp_path / "k.pub"


def test_the_tail_after_the_last_signed_checkpoint_is_reported_apart(
    signed: tuple[Path, Path],
) -> None:
    path, public = signed
    done = verify_cli("--path", str(path), "--public-key", str(public))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        done.stdout.splitlines()[0],
        "2 records not yet covered by a signature",
    ]
    assert done.stdout.startswith("ok: 5 records verified")
    as_json = verify_cli("--path", str(path), "--public-key", str(public), "--json")
    assert json.loads(as_json.stdout)["unsigned_tail"] == 2


def test_a_recomputed_history_with_its_checkpoints_deleted_fails_when_a_key_is_given(
    signed: tuple[Path, Path],
) -> None:
    path, public = signed
    lines = path.read_bytes().splitlines()
    path.write_bytes(b"\n".join(rehashed(lines)) + b"\n")
    checkpoint_path_for(path).unlink()
    done = verify_cli("--path", str(path), "--public-key", str(public))
    assert done.returncode == 1, done.stdout
    assert "no signed checkpoint" in done.stdout


@pytest.mark.redis
def test_an_empty_redis_ledger_is_an_error_with_a_hint_at_the_right_prefix(
    tmp_path: Path,
) -> None:
    key_prefix = f"test-verify-{uuid.uuid4().hex[:10]}"

    async def build() -> None:
        client = await connected_redis()
        sink = RedisLedgerSink(client, prefix=f"{key_prefix}:ledger")  # where a broker writes
        for n in range(1, 3):
            await sink.append(make_entry(n))
        await client.aclose()

    async def cleanup() -> None:
        client = await connected_redis()
        await forget_prefix(client, key_prefix)
        await client.aclose()

    asyncio.run(build())
    try:
        configured = verify_cli("--redis-url", REDIS_URL, "--prefix", key_prefix)
        assert configured.returncode == 1, configured.stdout
        assert "empty ledger" in configured.stdout
        assert f"--prefix {key_prefix}:ledger" in configured.stderr
        typo = verify_cli("--redis-url", REDIS_URL, "--prefix", key_prefix + "x")
        assert typo.returncode == 1
        assert "empty ledger" in typo.stdout
        right = verify_cli("--redis-url", REDIS_URL, "--prefix", f"{key_prefix}:ledger")
        assert right.returncode == 0, right.stdout + right.stderr
        assert right.stdout.startswith("ok: 2 records verified")
    finally:
        asyncio.run(cleanup())


def test_an_empty_file_ledger_is_an_error(tmp_path: Path) -> None:
    missing = verify_cli("--path", str(tmp_path / "no-such-ledger.jsonl"))
    assert missing.returncode == 2, missing.stdout
    (tmp_path / "empty.jsonl").write_bytes(b"")
    empty = verify_cli("--path", str(tmp_path / "empty.jsonl"))
    assert empty.returncode == 1, empty.stdout
    assert "empty ledger" in empty.stdout


def _cut_tail(path: Path, keep: int) -> None:
    """The attacker who can write the ledger's directory: cut records after ``keep`` and every
    checkpoint beside them that names a later seq."""
    path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:keep]))
    beside = checkpoint_path_for(path)
    kept = [
        line
        for line in beside.read_bytes().splitlines(keepends=True)
        if json.loads(line)["seq"] <= keep
    ]
    beside.write_bytes(b"".join(kept))


@pytest.mark.redis
async def test_shipped_checkpoints_catch_a_tail_cut_with_the_checkpoints_beside_it(
    tmp_path: Path,
) -> None:
    copy_dir = tmp_path / "elsewhere"
    redis_key = f"test-verify-copy-{uuid.uuid4().hex[:10]}"
    config = with_private_ledger(
        demo_config_with(service__checkpoint_copies=[str(copy_dir), f"{REDIS_URL}#{redis_key}"]),
        tmp_path,
    )
    public = tmp_path / "k.pub"
    app = create_app(config, store=MemoryStore())
    client = await connected_redis()
    try:
        with serve(app) as url:
            async with httpx.AsyncClient(base_url=url, timeout=10) as http:
                for _ in range(4):
                    body = {"tool": "lookup_order", "args": {"order_id": "O-55291"}}
                    answer = await http.post("/v1/proposals", json=body, headers=BILLING)
                    assert answer.status_code == 200, answer.text
        # stopped: the shutdown checkpoint signed seq 4, here and in both copies
        signer = load_or_create_signing_key(config.service.ledger_key_path)
        public.write_bytes(export_public_key(signer))
        ledger = Path(config.service.ledger_path)
        copied = copy_dir / checkpoint_path_for(ledger).name
        shipped = [json.loads(line) for line in copied.read_bytes().splitlines()]
        assert shipped[-1]["seq"] == 4
        assert shipped[0]["hash"] == GENESIS_HASH  # the one signed at start
        in_redis = [json.loads(v) for v in await client.lrange(redis_key, 0, -1)]
        assert in_redis == shipped

        _cut_tail(ledger, keep=2)
        alone = verify_cli("--path", str(ledger), "--public-key", str(public))
        assert alone.returncode == 0, alone.stdout  # what the copies are for
        for target in (str(copy_dir), str(copied), f"{REDIS_URL}#{redis_key}"):
            held = verify_cli(
                "--path", str(ledger), "--public-key", str(public), "--checkpoints-copy", target
            )
            assert held.returncode == 1, (target, held.stdout, held.stderr)
            assert held.stdout.startswith("FAILED at seq 3: truncated: checkpoint at seq 4")
    finally:
        await client.delete(redis_key)
        await client.aclose()


def test_a_checkpoint_copy_that_is_neither_a_directory_nor_a_redis_key_stops_startup(
    tmp_path: Path,
) -> None:
    for bad in ("redis://127.0.0.1:6379/0", "https://witness.example/cp"):
        config = with_private_ledger(demo_config_with(service__checkpoint_copies=[bad]), tmp_path)
        with pytest.raises(ConfigError) as raised:
            create_app(config, store=MemoryStore())
        assert "service.checkpoint_copies[0]" in str(raised.value)
