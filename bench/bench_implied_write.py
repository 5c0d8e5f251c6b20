"""Throughput of the implied-write detector on ~300-character agent messages, one core.

Run ``python bench/bench_implied_write.py``.  Messages are built from the labelled corpus
(tests/data/implied_writes.jsonl): each corpus text is padded with the texts that follow it
and trimmed at a word boundary to about 300 characters.  The detector is built once, as the
service does, and ``find_claims`` runs single-threaded for a few seconds per repeat.
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

from broker.implied_write import Detector, check, default_vocabulary  # noqa: E402

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


def messages(length: int) -> list[str]:
    texts = [json.loads(line)["text"] for line in CORPUS.read_text("utf-8").splitlines() if line]
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
    mean_length = sum(map(len, batch)) / len(batch)
    print(f"detector: {len(TOOLS)} tools, built in {build_ms:.1f} ms")
    print(f"messages: {len(batch)} distinct, mean {mean_length:.0f} chars, {claims} claims/pass")
    print("repeats (msg/s): " + ", ".join(f"{rate:,.0f}" for rate in rates))
    print(f"median: {median:,.0f} messages/s, {1e6 / median:.1f} \u00b5s/message")


if __name__ == "__main__":
    main()
