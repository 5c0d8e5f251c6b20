"""Tests of the implied-write detector: the labelled corpus, each claim category and verdict."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
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
from tests.implied_write_scores import (
    CLASSES,
    CORPUS,
    HOLDOUT2_PREFIX,
    HOLDOUT_PREFIX,
    class_of,
    load_corpus,
    part_of,
    score,
)


@pytest.fixture(scope="module")
def corpus() -> list[dict[str, Any]]:
    return load_corpus()


# --- the corpus -----------------------------------------------------------------------------


def test_corpus_is_large_and_varied(corpus: list[dict[str, Any]]) -> None:
    ids = [r["id"] for r in corpus]
    assert len(ids) == len(set(ids))
    assert len(corpus) >= 420 + 150
    assert sum(1 for r in corpus if not r["claims"]) >= 100
    verdicts = {c["verdict"] for r in corpus for c in r["claims"]}
    assert verdicts == {"supported", "unsupported", "contradicted", "unknown_identifier"}
    for record in corpus:
        for label in record["claims"]:
            assert label["contains"] in record["text"], record["id"]
    classes = {kind: [r for r in corpus if class_of(r) == kind] for kind in CLASSES}
    assert len(classes["generic"]) >= 40 and len(classes["quantity"]) >= 40
    assert len(classes["negative"]) >= 40
    assert all(not r["claims"] for r in classes["negative"])
    # Each class has a held-out part, and contradicted quantities name their field.
    for kind in ("generic", "quantity", "negative"):
        assert sum(r["id"].startswith(HOLDOUT_PREFIX) for r in classes[kind]) >= 10, kind
        assert sum(r["id"].startswith(HOLDOUT2_PREFIX) for r in classes[kind]) >= 15, kind
    fields = {c.get("mismatch") for r in classes["quantity"] for c in r["claims"]}
    assert {"amount", "currency", "start", "seats", "nodes", "percent", "quantity"} <= fields


def test_corpus_file_is_exactly_what_its_sources_generate() -> None:
    """The .jsonl is generated; editing one without the other fails here."""
    source = CORPUS.with_name("make_implied_writes_corpus.py")
    spec = importlib.util.spec_from_file_location("make_implied_writes_corpus", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.build().encode("utf-8") == CORPUS.read_bytes()


def test_claim_detection_precision_and_recall(corpus: list[dict[str, Any]]) -> None:
    scores = score(corpus)
    report = "\n".join([scores.summary("whole corpus"), *scores.errors])
    print(report)
    # Issue 26's bar, on the whole corpus.
    assert scores.precision >= 0.97 and scores.recall >= 0.95, report


@pytest.mark.parametrize("kind", ["vocabulary", "generic", "quantity"])
def test_each_class_meets_the_issue_target_on_development(
    corpus: list[dict[str, Any]], kind: str
) -> None:
    """Issue 26's targets, per class, on the part the rules were written against."""
    records = [r for r in corpus if part_of(r) == "development" and class_of(r) == kind]
    assert len(records) >= 40, kind  # large enough for a per-class rate to mean something
    scores = score(records)
    report = "\n".join([scores.summary(f"development {kind}"), *scores.errors])
    assert scores.precision >= 0.97 and scores.recall >= 0.95, report
    assert scores.accuracy >= 0.97, report


# Held-out parts, written without looking at the rules' behaviour on them, are too small for
# the issue's targets per class; these floors sit a little under what they scored when the
# second pass of rules landed (holdout: precision 0.981, recall 0.953; holdout2: precision
# 0.923, recall 0.947; their generic classes recall 0.933 and 0.909), so a rule that
# generalises worse than today's fails here.  See tests/implied_write_scores.py.
HOLDOUT_FLOORS = {"holdout": (0.95, 0.92, 0.9), "holdout2": (0.9, 0.9, 0.85)}


@pytest.mark.parametrize("part", sorted(HOLDOUT_FLOORS))
def test_held_out_parts_stay_above_their_floor(corpus: list[dict[str, Any]], part: str) -> None:
    precision, recall, generic_recall = HOLDOUT_FLOORS[part]
    records = [r for r in corpus if part_of(r) == part]
    scores = score(records)
    report = "\n".join([scores.summary(part), *scores.errors])
    assert scores.precision >= precision and scores.recall >= recall, report
    assert scores.accuracy >= 0.97, report
    generic = score([r for r in records if class_of(r) == "generic"])
    assert generic.recall >= generic_recall, "\n".join([generic.summary(part), *generic.errors])


@pytest.mark.parametrize("kind", ["generic", "quantity"])
def test_each_new_class_is_detected_and_judged(corpus: list[dict[str, Any]], kind: str) -> None:
    """Every part together: the classes issue 26 added."""
    scores = score([r for r in corpus if class_of(r) == kind])
    report = "\n".join([scores.summary(kind), *scores.errors])
    assert scores.precision >= 0.95 and scores.recall >= 0.93, report
    assert scores.accuracy >= 0.97, report


def test_hard_negatives_make_almost_no_claims(corpus: list[dict[str, Any]]) -> None:
    # 73 hard negatives across the parts; none on development.
    scores = score([r for r in corpus if class_of(r) == "negative"])
    assert scores.false_positives <= 2, "\n".join(scores.errors)
    development = [r for r in corpus if class_of(r) == "negative" and part_of(r) == "development"]
    assert score(development).false_positives == 0


def test_verdict_accuracy_given_labelled_claims(corpus: list[dict[str, Any]]) -> None:
    scores = score(corpus)
    report = scores.summary("whole corpus")
    print(report)
    assert scores.accuracy >= 0.97, report


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
