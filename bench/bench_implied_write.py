"""Throughput of the implied-write detector on ~300-character agent messages, one core.

Run ``python bench/bench_implied_write.py``.  Messages are built from the labelled corpus
(tests/data/implied_writes.jsonl): each corpus text is padded with the texts that follow it
and trimmed at a word boundary to about 300 characters.  The detector is built once, as the
service does, and ``find_claims`` runs single-threaded for a few seconds per repeat.
The detector leaves the cited quantities to the judge, so a second figure times the whole
check the service runs per message (``check``: find, attribute, compare with each corpus
message's own executions).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import msgspec  # noqa: E402

from broker.implied_write import (  # noqa: E402
    Detector,
    ExecutionFact,
    check,
    default_vocabulary,
)

CORPUS = ROOT / "tests" / "data" / "implied_writes.jsonl"
TOOLS = (
    "issue_credit", "create_support_ticket", "lookup_order", "book_meeting",
    "reschedule_meeting", "cancel_meeting", "cancel_subscription", "cancel_order",
    "place_order", "ops.restart_service", "deploy_release", "rollback_deployment",
    "send_email", "send_invoice", "post_slack_message", "reset_password",
    "update_shipping_address", "create_return_label", "approve_leave_request", "invite_user",
    "add_crm_note", "create_lead", "reserve_table", "book_flight", "delete_account",
    "apply_discount", "close_ticket", "escalate_ticket", "freeze_card", "transfer_funds",
)  # fmt: skip


def records() -> list[dict[str, object]]:
    return [json.loads(line) for line in CORPUS.read_text("utf-8").splitlines() if line]


def executions() -> list[list[ExecutionFact]]:
    """Each corpus message's recorded executions, in corpus order (as ``messages``)."""
    return [msgspec.convert(r["executions"], list[ExecutionFact]) for r in records()]


def messages(length: int) -> list[str]:
    texts = [str(record["text"]) for record in records()]
    built = []
    for index in range(len(texts)):
        message, offset = texts[index], index + 1
        while len(message) < length:
            message += " " + texts[offset % len(texts)]
            offset += 1
        cut = message.rfind(" ", 0, length)
        built.append(message[: cut if cut > length // 2 else length])
    return built


def run(detector: Detector, batch: list[str], seconds: float) -> float:
    """Messages per second over at least ``seconds`` of whole passes."""
    done, started = 0, time.perf_counter()
    while True:
        for text in batch:
            detector.find_claims(text)
        done += len(batch)
        elapsed = time.perf_counter() - started
        if elapsed >= seconds:
            return done / elapsed


def run_checks(
    detector: Detector, batch: list[str], facts: list[list[ExecutionFact]], seconds: float
) -> float:
    """Messages per second of the whole check (find and judge) over ``seconds``."""
    done, started = 0, time.perf_counter()
    while True:
        for text, executed in zip(batch, facts, strict=True):
            check(text, detector, executed)
        done += len(batch)
        elapsed = time.perf_counter() - started
        if elapsed >= seconds:
            return done / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=300, help="characters per message")
    parser.add_argument("--seconds", type=float, default=3.0, help="duration of one repeat")
    parser.add_argument("--repeats", type=int, default=5)
    options = parser.parse_args()

    started = time.perf_counter()
    detector = Detector([default_vocabulary(name) for name in TOOLS])
    build_ms = (time.perf_counter() - started) * 1000
    batch = messages(options.length)
    claims = sum(len(detector.find_claims(text)) for text in batch)
    check(batch[0], detector, [])  # the judge path works on the same detector

    rates = [run(detector, batch, options.seconds) for _ in range(options.repeats)]
    median = statistics.median(rates)
    facts = executions()
    checks = [run_checks(detector, batch, facts, options.seconds) for _ in range(options.repeats)]
    mean_length = sum(map(len, batch)) / len(batch)
    print(f"detector: {len(TOOLS)} tools, built in {build_ms:.1f} ms")
    print(f"messages: {len(batch)} distinct, mean {mean_length:.0f} chars, {claims} claims/pass")
    print("repeats (msg/s): " + ", ".join(f"{rate:,.0f}" for rate in rates))
    print(f"median: {median:,.0f} messages/s, {1e6 / median:.1f} \u00b5s/message")
    checked = statistics.median(checks)
    print(
        f"with judging (check): median {checked:,.0f} messages/s, {1e6 / checked:.1f} \u00b5s/message"
    )


if __name__ == "__main__":
    main()
