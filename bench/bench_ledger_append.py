"""What the file ledger costs per proposal: CPU microseconds per appended entry, in process.

``--concurrency`` tasks append proposal entries (as the pipeline builds them for the demo's
create_support_ticket: a result, a mediation receipt, six verdicts) to a ``JsonlLedgerSink``
under uvloop, with ``fsync="batch"`` (the policy the throughput targets are held to). Printed,
as medians over the rounds: the event loop's thread CPU per entry (sealing, writing, the lookup
index, the group commit and the appenders' wake-ups), the whole process's (with the fsync
thread and the kernel's share of the writes), and sealing one entry alone.

    python bench/bench_ledger_append.py [--entries 20000] [--rounds 5] [--concurrency 32]
        [--dir DIR] [--instructions]

``--dir`` puts the ledger on the disk to be priced (default: a temporary directory).
``--instructions`` prints callgrind's count per entry instead (one round, after as many entries
again to warm up): what a busy box cannot move, the kernel's share not counted.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import uvloop  # noqa: E402

from broker.ledger import AuditRef, JsonlLedgerSink, LedgerEntry, ValidatorVerdict  # noqa: E402
from broker.ledger.model import MediationReceipt  # noqa: E402
from broker.ledger.sealing import seal  # noqa: E402

_DECLARATION = "sha256:d088b41ee996670803e334ae6b87eedc4b26bfdf3c43053695ab9c7da20b0615"
_RECEIPT = MediationReceipt(
    declared_by="config",
    executed_by="python",
    fidelity="pass_through",
    original_hash=_DECLARATION,
    policy_state="allowed",
    visible_hash=_DECLARATION,
)
_STEPS = ("mediation", "tool_authz", "schema", "idempotency_key", "preconditions", "admission")


def proposal_entry(n: int) -> LedgerEntry:
    """Entry ``n``: what the broker records for an executed create_support_ticket."""
    ulid = f"01M98JCSJ7{n:016d}"
    return LedgerEntry(
        time="2026-12-07T15:36:40.778Z",
        trace_id=f"trc_{ulid}",
        proposal_id=f"prp_{ulid}",
        route="billing_help",
        tenant="acme",
        service_account="route-billing-help@bots",
        tool="create_support_ticket",
        tool_id="demo:create_support_ticket@1",
        config_hash="sha256:" + "c" * 64,
        args={"customer_id": "C-10429", "subject": "Billing discrepancy", "priority": "high"},
        result={
            "ticket_id": "T-77391",
            "url": "https://support.example.com/T-77391",
            "status": "created",
        },
        sensitive_keys=frozenset({"api_key", "token", "password", "card_number", "secret"}),
        decision="approved",
        decision_us=2271,
        validators=tuple(ValidatorVerdict(step, "pass", 40 + i) for i, step in enumerate(_STEPS)),
        execution_status="succeeded",
        attempts=1,
        execution_us=65,
        idempotency_key_hash="sha256:" + "d" * 64,
        preconditions=("customer_verified", "open_invoice_present"),
        started_at="2026-12-07T15:36:40.777Z",
        ended_at="2026-12-07T15:36:40.777Z",
        attempt_outcomes=("succeeded",),
        receipt=_RECEIPT,
        phase="execution",
    )


async def append_cpu_us(
    directory: Path, entries: list[LedgerEntry], concurrency: int
) -> tuple[float, float]:
    """(loop thread, process) CPU microseconds per entry, appending ``entries`` from
    ``concurrency`` tasks, each awaiting its own appends one after the other."""
    sink = JsonlLedgerSink(directory / "ledger.jsonl", fsync="batch")
    try:

        async def appender(first: int) -> None:
            for n in range(first, len(entries), concurrency):
                await sink.append(entries[n])

        thread, process = time.thread_time(), time.process_time()
        await asyncio.gather(*(appender(i) for i in range(concurrency)))
        thread, process = time.thread_time() - thread, time.process_time() - process
    finally:
        await sink.close()
    return thread / len(entries) * 1e6, process / len(entries) * 1e6


def seal_us(entries: list[LedgerEntry]) -> float:
    head = AuditRef(1, "sha256:" + "a" * 64)
    started = time.thread_time()
    for entry in entries:
        seal(entry, head)
    return (time.thread_time() - started) / len(entries) * 1e6


async def child(entries: int, concurrency: int, directory: Path | None) -> None:
    """Under callgrind: warm up on a ledger of its own, then append ``entries`` more between
    the two lines ``count_instructions`` waits for."""
    with tempfile.TemporaryDirectory(prefix="bench-ledger-", dir=directory) as scratch:
        sink = JsonlLedgerSink(Path(scratch) / "ledger.jsonl", fsync="batch")
        try:

            async def appender(batch: list[LedgerEntry], first: int) -> None:
                for n in range(first, len(batch), concurrency):
                    await sink.append(batch[n])

            warm_up = [proposal_entry(n) for n in range(entries)]
            await asyncio.gather(*(appender(warm_up, i) for i in range(concurrency)))
            measured = [proposal_entry(entries + n) for n in range(entries)]
            print("measure", flush=True)
            sys.stdin.readline()
            await asyncio.gather(*(appender(measured, i) for i in range(concurrency)))
            print(f"done {entries}", flush=True)
            sys.stdin.readline()
        finally:
            await sink.close()


def counted(entries: int, concurrency: int, directory: Path | None) -> None:
    from bench.bench_instructions import count_instructions

    options = ["--entries", str(entries), "--concurrency", str(concurrency)]
    options += ["--dir", str(directory)] if directory is not None else []
    count = count_instructions([__file__, "--child", *options], entries, what="ledger append")
    print(f"{entries} entries, {concurrency} appending")
    print(f"{count / 1000:6.1f}k instructions per entry")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--instructions", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        await child(args.entries, args.concurrency, args.dir)
        return
    if args.instructions:
        counted(args.entries, args.concurrency, args.dir)
        return
    entries = [proposal_entry(n) for n in range(args.entries)]
    loop_us, process_us, sealing_us = [], [], []
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="bench-ledger-", dir=args.dir) as scratch:
            thread, process = await append_cpu_us(Path(scratch), entries, args.concurrency)
        loop_us.append(thread)
        process_us.append(process)
        sealing_us.append(seal_us(entries))
    print(f"{args.entries} entries, {args.concurrency} appending, median of {args.rounds} rounds")
    print(f"event loop thread CPU  {statistics.median(loop_us):6.2f} us per entry")
    print(f"process CPU            {statistics.median(process_us):6.2f} us per entry")
    print(f"seal alone             {statistics.median(sealing_us):6.2f} us per entry")


if __name__ == "__main__":
    uvloop.run(main())
