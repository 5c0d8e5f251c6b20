"""Scores the implied-write detector on the labelled corpus, per class and per part.

Run ``python tests/implied_write_scores.py`` from the repository root: it prints claim
precision and recall and verdict accuracy for each class of message (``vocabulary``: the
original corpus, claims built from the tools' words; ``generic``: claims in any words;
``quantity``: claims citing amounts, counts, dates and times; ``negative``: hard negatives,
where only false positives can occur), for the development part, the two held-out parts (``holdout-`` and ``holdout2-`` ids) and all.
The unit tests import the same scoring.

A detected claim matches a label when its sentence holds the label's text and the tool the
judge ended with (the detector's, or the one its citations point to) is the label's tool.
A verdict is right when it equals the label's, and, for a label naming the field a wrong
quantity disagrees with, when the judgement's ``mismatch`` names that field.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from broker.implied_write import (  # noqa: E402
    Claim,
    Detector,
    ExecutionFact,
    ToolVocabulary,
    default_vocabulary,
    extract_identifiers,
    judge,
)
from broker.implied_write.text import (  # noqa: E402
    mask_quotes,
    normalise,
    split_sentences,
    tokenize,
)

CORPUS = ROOT / "tests" / "data" / "implied_writes.jsonl"
HOLDOUT_PREFIX = "holdout-"
HOLDOUT2_PREFIX = "holdout2-"
PARTS = ("development", "holdout", "holdout2")
CLASSES = ("vocabulary", "generic", "quantity", "negative")

# The tools registered on the corpus's routes; a message may bring its own list instead.
CORPUS_TOOLS = (
    "issue_credit", "create_support_ticket", "lookup_order", "book_meeting",
    "reschedule_meeting", "cancel_meeting", "cancel_subscription", "pause_subscription",
    "update_subscription", "cancel_order", "place_order", "ops.restart_service",
    "deploy_release", "rollback_deployment", "scale_cluster", "page_oncall", "send_email",
    "send_invoice", "post_slack_message", "reset_password", "update_shipping_address",
    "create_return_label", "approve_leave_request", "invite_user", "update_contact",
    "add_crm_note", "create_lead", "reserve_table", "book_flight", "search_flights",
    "delete_account", "apply_discount", "close_ticket", "escalate_ticket", "freeze_card",
    "transfer_funds", "check_availability", "search_tickets", "get_ticket", "get_events",
    "verify_identity", "get_account", "get_lead",
)  # fmt: skip


@dataclass
class Scores:
    """Detection and verdict counts over some corpus messages."""

    true_positives: int = 0
    false_positives: int = 0
    false_negatives: int = 0
    verdicts_right: int = 0
    verdicts_total: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def precision(self) -> float:
        found = self.true_positives + self.false_positives
        return self.true_positives / found if found else 1.0

    @property
    def recall(self) -> float:
        labelled = self.true_positives + self.false_negatives
        return self.true_positives / labelled if labelled else 1.0

    @property
    def accuracy(self) -> float:
        return self.verdicts_right / self.verdicts_total if self.verdicts_total else 1.0

    def summary(self, name: str) -> str:
        return (
            f"{name}: precision {self.precision:.3f} recall {self.recall:.3f} "
            f"(tp {self.true_positives}, fp {self.false_positives}, fn {self.false_negatives}); "
            f"verdict accuracy {self.accuracy:.3f} ({self.verdicts_right}/{self.verdicts_total})"
        )


def load_corpus() -> list[dict[str, Any]]:
    lines = CORPUS.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def class_of(record: dict[str, Any]) -> str:
    """The original corpus has no ``class``: its messages are built from the tools' words."""
    return str(record.get("class", "vocabulary"))


def part_of(record: dict[str, Any]) -> str:
    """``holdout`` (written after the first rules), ``holdout2`` (written before the rules
    that reached issue 26's targets) or ``development``."""
    if record["id"].startswith(HOLDOUT_PREFIX):
        return "holdout"
    if record["id"].startswith(HOLDOUT2_PREFIX):
        return "holdout2"
    return "development"


def corpus_vocabularies() -> list[ToolVocabulary]:
    return [default_vocabulary(name) for name in CORPUS_TOOLS]


def executions_of(record: dict[str, Any]) -> list[ExecutionFact]:
    return [msgspec.convert(e, ExecutionFact) for e in record["executions"]]


def detector_for(record: dict[str, Any], shared: Detector) -> Detector:
    if "tools" not in record:
        return shared
    return Detector([msgspec.convert(t, ToolVocabulary) for t in record["tools"]])


def sentence_spans(text: str) -> list[tuple[int, int]]:
    masked = mask_quotes(normalise(text))
    tokens = tokenize(masked)
    offsets = tokens[1]
    return [(offsets[a][0], offsets[b - 1][1]) for a, b in split_sentences(tokens, masked)]


def labelled_claim(text: str, contains: str, tool: str | None) -> Claim:
    """The claim a label describes: the detector's sentence around ``contains``."""
    offset = text.index(contains)
    for sentence_start, sentence_end in sentence_spans(text):
        if sentence_start <= offset < sentence_end:
            sentence = text[sentence_start:sentence_end]
            return Claim(
                text=sentence,
                start=sentence_start,
                end=sentence_end,
                tool=tool,
                verb="",
                identifiers=extract_identifiers(sentence),
            )
    raise AssertionError(f"no sentence holds {contains!r}")


def score(records: Sequence[dict[str, Any]], shared: Detector | None = None) -> Scores:
    shared = shared or Detector(corpus_vocabularies())
    scores = Scores()
    for record in records:
        text, executions = record["text"], executions_of(record)
        detector = detector_for(record, shared)
        predicted = [j.claim for j in judge(detector.find_claims(text), executions, detector)]
        unmatched = list(range(len(predicted)))
        for label in record["claims"]:
            match = next(
                (
                    i
                    for i in unmatched
                    if label["contains"] in predicted[i].text and predicted[i].tool == label["tool"]
                ),
                None,
            )
            claim = labelled_claim(text, label["contains"], label["tool"])
            if match is None:
                scores.false_negatives += 1
                scores.errors.append(
                    f"{record['id']}: missed {label['tool']} {label['contains']!r}"
                )
            else:
                unmatched.remove(match)
                scores.true_positives += 1
                # Judge the labelled tool with what the detector tied to the claim.
                found = predicted[match]
                claim = msgspec.structs.replace(
                    claim,
                    text=found.text,  # ``cites`` counts from the detector's sentence
                    start=found.start,
                    end=found.end,
                    verb=predicted[match].verb,
                    identifiers=predicted[match].identifiers,
                    cites=predicted[match].cites,
                )
            [judgement] = judge([claim], executions, detector)
            scores.verdicts_total += 1
            field_named = judgement.mismatch.field if judgement.mismatch else None
            expected_field = label.get("mismatch", field_named)
            if judgement.status == label["verdict"] and field_named == expected_field:
                scores.verdicts_right += 1
            else:
                scores.errors.append(
                    f"{record['id']}: verdict {judgement.status} ({field_named}) != "
                    f"{label['verdict']} ({expected_field}) for {label['contains']!r}"
                )
        for i in unmatched:
            scores.false_positives += 1
            scores.errors.append(
                f"{record['id']}: spurious {predicted[i].tool} {predicted[i].text!r}"
            )
    return scores


def report(records: Sequence[dict[str, Any]]) -> dict[tuple[str, str], Scores]:
    """Scores per (part, class), with ``all`` for either."""
    shared = Detector(corpus_vocabularies())
    parts = {part: [r for r in records if part_of(r) == part] for part in PARTS}
    parts["all"] = list(records)
    table: dict[tuple[str, str], Scores] = {}
    for part, chosen in parts.items():
        for kind in (*CLASSES, "all"):
            subset = [r for r in chosen if kind == "all" or class_of(r) == kind]
            table[part, kind] = score(subset, shared)
    return table


def main() -> None:
    records = load_corpus()
    table = report(records)
    print(f"{len(records)} messages")
    print(f"{'part':<12} {'class':<11} {'msgs':>5} {'prec':>6} {'recall':>6} {'tp':>4} "
          f"{'fp':>3} {'fn':>3} {'verdict acc':>12}")  # fmt: skip
    for (part, kind), scores in table.items():
        count = sum(
            1
            for r in records
            if (part == "all" or part_of(r) == part) and (kind == "all" or class_of(r) == kind)
        )
        # Hard negatives hold no claims: only their false positives mean anything.
        precision = "-" if kind == "negative" else f"{scores.precision:.3f}"
        recall = "-" if kind == "negative" else f"{scores.recall:.3f}"
        print(
            f"{part:<12} {kind:<11} {count:>5} {precision:>6} {recall:>6} "
            f"{scores.true_positives:>4} {scores.false_positives:>3} "
            f"{scores.false_negatives:>3} {scores.accuracy:>6.3f} "
            f"({scores.verdicts_right}/{scores.verdicts_total})"
        )
    if "-v" in sys.argv:
        for line in table["all", "all"].errors:
            print(line)


if __name__ == "__main__":
    main()
