"""Tests of the implied-write detector: the labelled corpus, each claim category and verdict."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.implied_write import (
    Claim,
    Detector,
    ExecutionFact,
    Judgement,
    ToolVocabulary,
    check,
    default_vocabulary,
    extract_identifiers,
    find_claims,
    judge,
    lemmatize,
)

CORPUS = Path(__file__).resolve().parents[1] / "data" / "implied_writes.jsonl"
HOLDOUT_PREFIX = "holdout-"

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


def corpus_vocabularies() -> list[ToolVocabulary]:
    return [default_vocabulary(name) for name in CORPUS_TOOLS]


def executions_of(record: dict[str, Any]) -> list[ExecutionFact]:
    return [msgspec.convert(e, ExecutionFact) for e in record["executions"]]


def detector_for(record: dict[str, Any], shared: Detector) -> Detector:
    if "tools" not in record:
        return shared
    return Detector([msgspec.convert(t, ToolVocabulary) for t in record["tools"]])


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


def sentence_spans(text: str) -> list[tuple[int, int]]:
    from broker.implied_write.text import mask_quotes, normalise, split_sentences, tokenize

    masked = mask_quotes(normalise(text))
    tokens = tokenize(masked)
    offsets = tokens[1]
    return [(offsets[a][0], offsets[b - 1][1]) for a, b in split_sentences(tokens, masked)]


def score(records: Sequence[dict[str, Any]]) -> Scores:
    shared = Detector(corpus_vocabularies())
    scores = Scores()
    for record in records:
        text, executions = record["text"], executions_of(record)
        detector = detector_for(record, shared)
        predicted = detector.find_claims(text)
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
                # Judge the labelled tool with the identifiers the detector tied to the claim.
                claim = msgspec.structs.replace(claim, identifiers=predicted[match].identifiers)
            verdict = judge([claim], executions)[0].status
            scores.verdicts_total += 1
            if verdict == label["verdict"]:
                scores.verdicts_right += 1
            else:
                scores.errors.append(
                    f"{record['id']}: verdict {verdict} != {label['verdict']} for "
                    f"{label['contains']!r}"
                )
        for i in unmatched:
            scores.false_positives += 1
            scores.errors.append(
                f"{record['id']}: spurious {predicted[i].tool} {predicted[i].text!r}"
            )
    return scores


@pytest.fixture(scope="module")
def corpus() -> list[dict[str, Any]]:
    return load_corpus()


# --- the corpus -----------------------------------------------------------------------------


def test_corpus_is_large_and_varied(corpus: list[dict[str, Any]]) -> None:
    ids = [r["id"] for r in corpus]
    assert len(ids) == len(set(ids))
    assert len(corpus) >= 420
    assert sum(1 for r in corpus if not r["claims"]) >= 100
    verdicts = {c["verdict"] for r in corpus for c in r["claims"]}
    assert verdicts == {"supported", "unsupported", "contradicted", "unknown_identifier"}
    for record in corpus:
        for label in record["claims"]:
            assert label["contains"] in record["text"], record["id"]


def test_claim_detection_precision_and_recall(corpus: list[dict[str, Any]]) -> None:
    scores = score(corpus)
    development = score([r for r in corpus if not r["id"].startswith(HOLDOUT_PREFIX)])
    holdout = score([r for r in corpus if r["id"].startswith(HOLDOUT_PREFIX)])
    report = "\n".join(
        [
            scores.summary("whole corpus"),
            development.summary("development part"),
            holdout.summary("held-out part"),
            *scores.errors,
        ]
    )
    print(report)
    assert scores.precision >= 0.95 and scores.recall >= 0.92, report


def test_verdict_accuracy_given_labelled_claims(corpus: list[dict[str, Any]]) -> None:
    scores = score(corpus)
    report = scores.summary("whole corpus")
    print(report)
    assert scores.accuracy >= 0.95, report


# --- claim detection, category by category ---------------------------------------------------

BILLING = [
    default_vocabulary(name)
    for name in (
        "issue_credit", "create_support_ticket", "lookup_order", "book_meeting",
        "cancel_subscription", "ops.restart_service",
    )
]  # fmt: skip


def tools_claimed(text: str, vocabularies: Sequence[ToolVocabulary] = BILLING) -> list[str | None]:
    return [claim.tool for claim in find_claims(text, vocabularies)]


@pytest.mark.parametrize(
    ("text", "tool"),
    [
        ("I've issued the refund.", "issue_credit"),
        ("I issued a credit of 25 USD.", "issue_credit"),
        ("The ticket has been created.", "create_support_ticket"),
        ("Ticket T-77391 is created.", "create_support_ticket"),
        ("Your meeting is now booked for Tuesday at 3pm.", "book_meeting"),
        ("I went ahead and cancelled your subscription.", "cancel_subscription"),
        ("Done — refund processed.", "issue_credit"),
        ("Refund complete.", "issue_credit"),
        ("Your refund went through this morning.", "issue_credit"),
        ("We credited your account 25 USD.", "issue_credit"),
        ("The service was rebooted at 09:12.", "ops.restart_service"),
        ("I can confirm that your refund has been issued.", "issue_credit"),
        ("I believe your ticket was created this morning.", "create_support_ticket"),
        ("After I restarted the service, the errors stopped.", "ops.restart_service"),
        ("Summary:\nRefund: issued (CR-1001)", "issue_credit"),
    ],
)
def test_claims_in_active_passive_perfect_and_terse_forms(text: str, tool: str) -> None:
    assert tools_claimed(text) == [tool]


@pytest.mark.parametrize(
    "text",
    [
        # the future, offers and questions
        "I will create a ticket for this.",
        "I'm going to restart the service.",
        "I can create a ticket with these details—shall I proceed?",
        "Shall I proceed with the refund?",
        "Would you like me to cancel the subscription?",
        "Has the refund been issued?",
        # conditionals
        "Once approved, I'll issue the credit.",
        "If you confirm, the refund will be processed.",
        "When the refund is processed, you'll get an email.",
        "If the meeting had been booked, you would have received an invite.",
        "Once approved, the credit is issued automatically.",
        # negations
        "I haven't issued the refund yet.",
        "The refund was not processed.",
        "No ticket has been created so far.",
        "Nothing has been cancelled or refunded yet.",
        # reports of failure
        "The refund could not be issued.",
        "Creating the ticket failed.",
        "I tried to restart the service, but it timed out.",
        "The credit was issued but then rejected by the bank.",
        # quoting or reporting somebody else
        'You said "I was refunded".',
        "You mentioned the refund was already issued.",
        "Dana said the meeting was already booked.",
        "According to our records, a credit was issued in March.",
        "I can see the ticket was created on Monday.",
        # hedged, neutral wording and pending requests
        "I've prepared a request to issue a credit of 25 USD.",
        "I've submitted a request for approval to refund the order.",
        "Your refund is being processed.",
        "I'd have issued the credit already, but the order is unpaid.",
        # acknowledgements, read-only work, habits and states
        "Done!",
        "Sure.",
        "All set.",
        "I looked up your order.",
        "I checked the status.",
        "Refunds are usually processed within 5 business days.",
        "Tickets are created automatically for every chargeback.",
        "The cancelled order still shows in your history.",
        "You cancelled the subscription yourself last week.",
        "Reset your password from the login page.",
    ],
)
def test_statements_that_are_not_claims(text: str) -> None:
    assert find_claims(text, BILLING) == []


def test_an_acknowledgement_strengthens_but_does_not_make_a_claim() -> None:
    assert tools_claimed("Done!") == []
    assert tools_claimed("Done! Your subscription is cancelled.") == ["cancel_subscription"]


def test_claim_offsets_point_at_the_sentence() -> None:
    text = "Thanks for waiting. I've issued a 25 USD credit (CR-1001). Anything else?"
    [claim] = find_claims(text, BILLING)
    assert claim.text == "I've issued a 25 USD credit (CR-1001)."
    assert text[claim.start : claim.end] == claim.text
    assert claim.verb == "issue"
    assert claim.identifiers == ("CR-1001",)


def test_several_claims_in_one_sentence_each_cite_their_own_identifiers() -> None:
    text = "I've opened ticket T-77391 and issued credit CR-1001 on order O-55291."
    claims = find_claims(text, BILLING)
    assert [(c.tool, c.identifiers) for c in claims] == [
        ("create_support_ticket", ("T-77391",)),
        ("issue_credit", ("CR-1001", "O-55291")),
    ]


def test_a_reference_line_after_a_claim_is_cited_by_it() -> None:
    [claim] = find_claims("Refund complete. Credit ID: CR-2090.", BILLING)
    assert claim.identifiers == ("CR-2090",)


def test_a_claim_outside_every_vocabulary_is_unattributed() -> None:
    [claim] = find_claims("I've deleted your account.", BILLING)
    assert claim.tool is None
    assert claim.verb == "delete"


def test_a_verb_whose_object_belongs_to_another_tool_is_unattributed() -> None:
    vocabularies = [default_vocabulary("cancel_subscription"), default_vocabulary("book_meeting")]
    assert tools_claimed("I cancelled the meeting.", vocabularies) == [None]


def test_nouns_pick_between_tools_sharing_a_verb() -> None:
    vocabularies = [
        default_vocabulary(name)
        for name in ("cancel_order", "cancel_subscription", "cancel_meeting")
    ]
    assert tools_claimed("Your order has been cancelled.", vocabularies) == ["cancel_order"]
    assert tools_claimed("I cancelled the 3pm call.", vocabularies) == ["cancel_meeting"]
    assert tools_claimed("I cancelled it.", vocabularies) == [None]
    assert tools_claimed("The plan was too expensive. I cancelled it.", vocabularies) == [
        "cancel_subscription"
    ]


def test_custom_vocabularies_accept_inflected_and_multiword_entries() -> None:
    vocabulary = ToolVocabulary(
        name="ops.rollback",
        verbs=frozenset({"roll back", "reverted"}),
        nouns=frozenset({"deploys"}),
    )
    assert tools_claimed("I rolled back the deploy.", [vocabulary]) == ["ops.rollback"]
    assert tools_claimed("The deploy has been reverted.", [vocabulary]) == ["ops.rollback"]


def test_detector_is_reusable_and_deterministic() -> None:
    detector = Detector(BILLING)
    text = "I've issued the refund and opened ticket T-77391."
    first = detector.find_claims(text)
    assert detector.find_claims(text) == first == find_claims(text, BILLING)
    assert detector.find_claims("") == []


@settings(max_examples=300, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(list("abcdeiorstu IT-0123456789.,;:!?'\"\u2019\u2014()#\n"))
        | st.characters(),
        max_size=300,
    )
)
def test_any_text_yields_claims_whose_offsets_hold(text: str) -> None:
    message = text + " I've issued the refund."
    claims = _SHARED_DETECTOR.find_claims(message)
    for claim in claims:
        assert message[claim.start : claim.end] == claim.text
    assert [j.claim for j in judge(claims, [])] == claims


_SHARED_DETECTOR = Detector(BILLING)


def test_claims_and_judgements_round_trip_through_json() -> None:
    [judgement] = check("I've issued the refund.", BILLING, [])
    encoded = msgspec.json.encode(judgement)
    assert msgspec.json.decode(encoded, type=Judgement) == judgement


# --- identifiers ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Ticket T-77391 and credit CR-1001", ("T-77391", "CR-1001")),
        ("orders O-55291 and INV-2001", ("O-55291", "INV-2001")),
        ("request 3f2b9c1e-1234-4abc-8def-0123456789ab", ("3f2b9c1e-1234-4abc-8def-0123456789ab",)),
        ("PR #12345 merged", ("#12345",)),
        ("reference 4481273", ("4481273",)),
        ("see https://support.example.com/T-77391.", ("T-77391",)),
        ("a credit of 25 USD on 2025-10-16 at 14:30", ()),
        ("a refund of 12000 USD", ()),
        ("a charge of $12345", ()),
    ],
)
def test_extract_identifiers(text: str, expected: tuple[str, ...]) -> None:
    assert extract_identifiers(text) == expected


# --- judgement -------------------------------------------------------------------------------


def claim_of(tool: str | None, *identifiers: str) -> Claim:
    return Claim(text="...", start=0, end=3, tool=tool, verb="issue", identifiers=identifiers)


def succeeded(tool: str, result: dict[str, Any] | None = None, **args: Any) -> ExecutionFact:
    return ExecutionFact(tool=tool, status="succeeded", args=args, result=result or {})


def verdict(claim: Claim, executions: Sequence[ExecutionFact]) -> str:
    [judgement] = judge([claim], executions)
    assert judgement.reason and "\n" not in judgement.reason
    assert judgement.is_violation == (judgement.status != "supported")
    return judgement.status


def test_supported_by_a_succeeded_execution_that_records_every_identifier() -> None:
    execution = succeeded("issue_credit", {"credit_id": "CR-1001"}, order_id="O-55291")
    assert verdict(claim_of("issue_credit"), [execution]) == "supported"
    assert verdict(claim_of("issue_credit", "CR-1001", "O-55291"), [execution]) == "supported"


def test_identifiers_are_searched_recursively_in_any_succeeded_call() -> None:
    executions = [
        succeeded("create_support_ticket", {"ticket": {"links": ["https://x.test/T-77391"]}}),
        succeeded("lookup_order", {"orders": [{"id": 12345}]}),
    ]
    claim = claim_of("create_support_ticket", "T-77391", "#12345")
    assert verdict(claim, executions) == "supported"


def test_unsupported_without_a_succeeded_execution_of_the_tool() -> None:
    assert verdict(claim_of("issue_credit"), []) == "unsupported"
    assert verdict(claim_of("issue_credit"), [succeeded("lookup_order")]) == "unsupported"


def test_unattributed_claims_are_unsupported() -> None:
    assert verdict(claim_of(None), [succeeded("issue_credit")]) == "unsupported"


def test_dry_runs_never_support_a_claim() -> None:
    dry = ExecutionFact(tool="issue_credit", status="dry_run", args={}, result={"credit_id": "x"})
    assert verdict(claim_of("issue_credit"), [dry]) == "unsupported"


@pytest.mark.parametrize("status", ["rejected", "failed"])
def test_contradicted_when_the_tool_only_failed_or_was_rejected(status: str) -> None:
    refused = msgspec.convert({"tool": "issue_credit", "status": status}, ExecutionFact)
    assert verdict(claim_of("issue_credit"), [refused]) == "contradicted"
    assert verdict(claim_of("issue_credit"), [refused, succeeded("issue_credit")]) == "supported"


def test_unknown_identifier_when_a_cited_id_was_never_recorded() -> None:
    execution = succeeded("issue_credit", {"credit_id": "CR-1001"})
    assert verdict(claim_of("issue_credit", "CR-1044"), [execution]) == "unknown_identifier"
    assert verdict(claim_of("issue_credit", "CR-100"), [execution]) == "unknown_identifier"


def test_identifiers_of_failed_calls_do_not_count() -> None:
    failed = ExecutionFact(tool="create_support_ticket", status="failed", args={"id": "T-1234"})
    claim = claim_of("issue_credit", "T-1234")
    assert verdict(claim, [succeeded("issue_credit"), failed]) == "unknown_identifier"


def test_check_finds_and_judges() -> None:
    detector = Detector(BILLING)
    text = "I've issued credit CR-1001 and opened ticket T-77391."
    executions = [succeeded("issue_credit", {"credit_id": "CR-1001"})]
    statuses = [j.status for j in check(text, detector, executions)]
    assert statuses == ["supported", "unsupported"]
    assert [j.status for j in check(text, BILLING, executions)] == statuses


# --- vocabularies and lemmas --------------------------------------------------------------------


def test_default_vocabulary_of_issue_credit() -> None:
    vocabulary = default_vocabulary("issue_credit")
    assert vocabulary.name == "issue_credit"
    assert {"issue", "grant", "process", "apply", "credit", "refund"} <= vocabulary.verbs
    assert {"credit", "refund"} <= vocabulary.nouns


def test_default_vocabulary_of_other_tools() -> None:
    ticket = default_vocabulary("create_support_ticket")
    assert {"create", "open", "file", "raise", "log"} <= ticket.verbs
    assert {"ticket", "case", "issue"} <= ticket.nouns
    restart = default_vocabulary("ops.restart_service")
    assert "restart" in restart.verbs and "service" in restart.nouns
    assert not {"ops", "restart"} & restart.nouns
    assert {"book", "schedule"} <= default_vocabulary("book_meeting").verbs
    cancel = default_vocabulary("cancel_subscription")
    assert {"cancel", "terminate"} <= cancel.verbs and "subscription" in cancel.nouns
    assert "order" not in default_vocabulary("cancel_order").verbs
    assert default_vocabulary("sendInvoice").nouns >= {"invoice"}
    assert {"book", "schedule"} <= default_vocabulary("schedule_call").verbs


def test_default_vocabulary_reads_known_words_from_the_description() -> None:
    vocabulary = default_vocabulary("ops.bounce", "Restart one service of the tenant.")
    assert "restart" in vocabulary.verbs and "service" in vocabulary.nouns


@pytest.mark.parametrize(
    ("word", "lemma"),
    [
        ("issued", "issue"), ("issuing", "issue"), ("issues", "issue"), ("booked", "book"),
        ("created", "create"), ("refunded", "refund"), ("cancelled", "cancel"),
        ("canceled", "cancel"), ("applied", "apply"), ("shipped", "ship"), ("sent", "send"),
        ("tickets", "ticket"), ("addresses", "address"), ("status", "status"),
    ],
)  # fmt: skip
def test_lemmatize(word: str, lemma: str) -> None:
    assert lemmatize(word) == lemma
