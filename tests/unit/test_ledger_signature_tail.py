"""``broker_ledger_unsigned_records``: the records no signed checkpoint covers yet, as the
checkpointer sees them at each heartbeat. 0 after a checkpoint; while checkpoints fail it grows
with every record appended (what the BrokerLedgerSignatureTailGrowing alert watches)."""

from __future__ import annotations

from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from prometheus_client.parser import text_string_to_metric_families

from broker.ledger import (
    Checkpoint,
    Checkpointer,
    JsonlCheckpointStore,
    JsonlLedgerSink,
    LedgerUnavailableError,
)
from broker.metrics import BrokerMetrics
from tests.ledger_entries import make_entry
from tests.unit.test_ledger_checkpoints import Ticks

GAUGE = "broker_ledger_unsigned_records"


class BrokenStore(JsonlCheckpointStore):
    """A checkpoint store whose disk is gone while ``broken`` is set."""

    broken = False

    async def append(self, checkpoint: Checkpoint) -> None:
        if self.broken:
            raise LedgerUnavailableError("checkpoint disk gone")
        await super().append(checkpoint)


def exposed(metrics: BrokerMetrics) -> float:
    text = metrics.exposition().decode()
    (family,) = (f for f in text_string_to_metric_families(text) if f.name == GAUGE)
    (sample,) = family.samples
    return sample.value


async def test_the_tail_grows_while_checkpoints_fail_and_drops_to_zero_when_one_succeeds(
    tmp_path: Path,
) -> None:
    metrics = BrokerMetrics(())
    sink = JsonlLedgerSink(tmp_path / "ledger.jsonl")
    store = BrokenStore(tmp_path / "cp.jsonl")
    ticks = Ticks()
    checkpointer = Checkpointer(
        sink,
        Ed25519PrivateKey.generate(),
        store,
        wait=ticks,
        on_tail=metrics.ledger_unsigned_records.set,
    )
    checkpointer.start()
    await ticks.waiting.get()
    for n in (1, 2):
        await sink.append(make_entry(n))
    await ticks.tick()  # signed: seq 2
    assert exposed(metrics) == 0

    store.broken = True
    for n in (3, 4, 5):
        await sink.append(make_entry(n))
    await ticks.tick()
    assert exposed(metrics) == 3
    await sink.append(make_entry(6))
    await ticks.tick()
    assert exposed(metrics) == 4  # growing: nothing signs records 3..6

    store.broken = False
    await ticks.tick()
    assert exposed(metrics) == 0
    assert checkpointer.failures == 2
    await checkpointer.close()
    await sink.close()


async def test_a_process_that_signed_nothing_yet_counts_from_the_stored_checkpoints(
    tmp_path: Path,
) -> None:
    """After a restart the tail starts at the latest stored checkpoint, not at record 1."""
    sink = JsonlLedgerSink(tmp_path / "ledger.jsonl")
    store = BrokenStore(tmp_path / "cp.jsonl")
    for n in (1, 2, 3):
        await sink.append(make_entry(n))
    await Checkpointer(sink, Ed25519PrivateKey.generate(), store).checkpoint()  # seq 3
    await sink.append(make_entry(4))

    tails: list[int] = []
    store.broken = True
    ticks = Ticks()
    restarted = Checkpointer(
        sink, Ed25519PrivateKey.generate(), store, wait=ticks, on_tail=tails.append
    )
    restarted.start()
    await ticks.waiting.get()  # the checkpoint at start has been tried (and failed) by now
    assert tails == [1]
    store.broken = False
    await restarted.close()
    await sink.close()


async def test_an_unreadable_checkpoint_store_proves_nothing_so_every_record_counts(
    tmp_path: Path,
) -> None:
    sink = JsonlLedgerSink(tmp_path / "ledger.jsonl")
    for n in (1, 2):
        await sink.append(make_entry(n))
    (tmp_path / "cp.jsonl").mkdir()  # neither readable nor writable
    tails: list[int] = []
    ticks = Ticks()
    checkpointer = Checkpointer(
        sink,
        Ed25519PrivateKey.generate(),
        JsonlCheckpointStore(tmp_path / "cp.jsonl"),
        wait=ticks,
        on_tail=tails.append,
    )
    checkpointer.start()
    await ticks.waiting.get()  # the checkpoint at start has been tried (and failed) by now
    assert tails == [2]
    (tmp_path / "cp.jsonl").rmdir()
    await checkpointer.close()
    await sink.close()


def test_the_gauge_starts_at_zero() -> None:
    assert exposed(BrokerMetrics(())) == 0
