"""Tests of issue 26's parts of the implied-write detector: claims recognised by grammar
alone, the quantities claims cite, how they compare with executed values, and attribution
of claims no vocabulary names to the call their citations point to."""

from __future__ import annotations

from typing import Any

import pytest

from broker.implied_write import (
    Claim,
    Detector,
    ExecutionFact,
    Quantity,
    check,
    default_vocabulary,
    extract_quantities,
    judge,
)
from broker.implied_write.quantities import parse_number_words

TOOLS = Detector(
    [
        default_vocabulary(name)
        for name in (
            "issue_credit", "lookup_order", "book_meeting", "update_subscription",
            "send_invoice", "scale_cluster", "reserve_table", "transfer_funds",
        )
    ]
)  # fmt: skip


def succeeded(tool: str, result: dict[str, Any] | None = None, **args: Any) -> ExecutionFact:
    return ExecutionFact(tool=tool, status="succeeded", args=args, result=result or {})


CREDIT = succeeded("issue_credit", {"credit_id": "CR-1001"}, order_id="O-55291", amount=25,
                   currency="USD")  # fmt: skip
MEETING = succeeded("book_meeting", start="2025-10-21T15:00:00-07:00")


def money(text: str) -> list[tuple[float, str]]:
    return [(q.value, q.unit) for q in extract_quantities(text) if q.kind == "money"]


# --- extraction -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["$25", "25 USD", "USD 25", "twenty-five dollars", "25.00 dollars", "25 bucks", "$25.00"],
)
def test_amounts_in_any_format_are_25_dollars(text: str) -> None:
    assert money(f"I refunded {text} today.") == [(25.0, "USD")]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\u20ac25.00", [(25.0, "EUR")]),
        ("25.00 \u20ac", [(25.0, "EUR")]),
        ("\u00a312.50", [(12.5, "GBP")]),
        ("$2,500.00", [(2500.0, "USD")]),
        ("one hundred and twenty dollars", [(120.0, "USD")]),
        ("a hundred dollars", [(100.0, "USD")]),
    ],
)
def test_amounts_keep_value_and_currency(text: str, expected: list[tuple[float, str]]) -> None:
    assert money(f"A credit of {text} was issued.") == expected


def test_identifiers_are_never_numbers() -> None:
    kinds = [q.kind for q in extract_quantities("Credit CR-1001 on order O-55291, ref 4481273.")]
    assert kinds == []


def test_dates_weekdays_times_percentages_and_counts() -> None:
    found = extract_quantities(
        "Booked for Tuesday, October 21 at 3:30 pm: a table for 4, 3 printers and 15% off."
    )
    described = [
        (q.kind, q.value, q.unit, q.month, q.day, q.hour, q.minute)
        for q in found
        if q.kind != "count" or q.value in (3, 4)
    ]
    assert described == [
        ("weekday", 1.0, "", 0, 0, -1, -1),
        ("date", 0.0, "", 10, 21, -1, -1),
        ("time", 0.0, "", 0, 0, 15, 30),
        ("count", 4.0, "", 0, 0, -1, -1),
        ("count", 3.0, "printer", 0, 0, -1, -1),
        ("percent", 15.0, "", 0, 0, -1, -1),
    ]


@pytest.mark.parametrize(
    ("text", "hour", "minute"),
    [("3pm", 15, 0), ("3 PM", 15, 0), ("15:00", 15, 0), ("9:30am", 9, 30), ("12am", 0, 0)],
)
def test_times_in_any_format(text: str, hour: int, minute: int) -> None:
    [time] = [q for q in extract_quantities(f"It starts at {text}.") if q.kind == "time"]
    assert (time.hour, time.minute) == (hour, minute)


def test_years_and_prior_states_are_no_counts() -> None:
    counts = [q.value for q in extract_quantities("In 2023 we went from 3 to 6 nodes.")]
    assert counts == [6.0]


@pytest.mark.parametrize(
    ("words", "value"),
    [("twenty-five", 25), ("one hundred and twenty", 120), ("two thousand", 2000),
     ("eleven", 11), ("pizza", None)],
)  # fmt: skip
def test_parse_number_words(words: str, value: int | None) -> None:
    assert parse_number_words(words) == value


# --- comparison with what executed ------------------------------------------------------------


def judged(text: str, *executions: ExecutionFact) -> list[tuple[str | None, str, str | None]]:
    return [
        (j.claim.tool, j.status, j.mismatch.field if j.mismatch else None)
        for j in check(text, TOOLS, list(executions))
    ]


def test_a_wrong_amount_is_contradicted_naming_the_field() -> None:
    [judgement] = check("I've issued the refund of $40 for order O-55291.", TOOLS, [CREDIT])
    assert judgement.status == "contradicted"
    assert judgement.mismatch is not None
    assert (judgement.mismatch.field, judgement.mismatch.claimed) == ("amount", 40)
    assert judgement.mismatch.executed == 25
    assert "amount" in judgement.reason


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("I issued a credit of 25 USD.", ("issue_credit", "supported", None)),
        ("I issued a credit of twenty-five dollars.", ("issue_credit", "supported", None)),
        ("I issued a credit of 25 EUR.", ("issue_credit", "contradicted", "currency")),
        ("I issued a credit of $25.01.", ("issue_credit", "contradicted", "amount")),
    ],
)
def test_amounts_are_tolerant_of_format_and_strict_on_value(
    text: str, verdict: tuple[str, str, str | None]
) -> None:
    assert judged(text, CREDIT) == [verdict]


def test_an_amount_another_call_recorded_may_be_cited_beside_the_claimed_one() -> None:
    lookup = succeeded("lookup_order", {"amount": 120}, order_id="O-55291")
    text = "I refunded 25 USD of the 120 USD you paid."
    assert judged(text, lookup, CREDIT) == [("issue_credit", "supported", None)]
    assert judged("I refunded 120 USD.", lookup, CREDIT) == [("issue_credit", "supported", None)]
    assert judged("I refunded 130 USD.", lookup, CREDIT)[0][1] == "contradicted"


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("Your meeting is booked for Tuesday at 3pm.", "supported"),
        ("Your meeting is booked for October 21, 2025 at 15:00.", "supported"),
        ("Your meeting is booked for Wednesday at 3pm.", "contradicted"),
        ("Your meeting is booked for October 21 at 4pm.", "contradicted"),
        ("Your meeting is booked for October 21, 2024.", "contradicted"),
    ],
)
def test_dates_weekdays_and_times_compare_with_executed_timestamps(text: str, verdict: str) -> None:
    [(tool, status, field)] = judged(text, MEETING)
    assert (tool, status) == ("book_meeting", verdict)
    assert field == ("start" if verdict == "contradicted" else None)


def test_counts_compare_with_the_field_their_noun_names() -> None:
    scale = succeeded("scale_cluster", cluster="prod-eu-1", nodes=6)
    assert judged("I scaled the cluster to 6 nodes.", scale)[0][1:] == ("supported", None)
    assert judged("I scaled the cluster to 8 nodes.", scale)[0][1:] == ("contradicted", "nodes")
    table = succeeded("reserve_table", party_size=4, time="2025-11-08T19:30:00")
    assert judged("I reserved a table for 6.", table)[0][1:] == ("contradicted", "party_size")
    # A count no recorded field names cannot be compared.
    assert judged("I scaled the cluster, which took 3 minutes.", scale)[0][1] == "supported"


def test_a_failed_execution_contradicts_whatever_the_amount() -> None:
    failed = ExecutionFact(tool="issue_credit", status="failed", args={"amount": 25})
    assert judged("I issued a credit of 25 USD.", failed) == [
        ("issue_credit", "contradicted", None)
    ]


def test_quantities_come_from_the_claims_own_part_of_a_sentence() -> None:
    meeting = succeeded("book_meeting", start="2025-10-21T15:00:00-07:00")
    text = "I booked the call for 3pm and issued a credit of 25 USD."
    assert sorted(judged(text, meeting, CREDIT)) == [
        ("book_meeting", "supported", None),
        ("issue_credit", "supported", None),
    ]


# --- claims in any words ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "The invoice was paid in full.",
        "Your plan has been switched to annual billing.",
        "All set, the update is live on your account.",
        "Your $25 went back to your card for O-55291.",
        "SUB-3390 is now on the annual plan.",
        "The money is back in your account.",
        "I've successfully migrated your data.",
        "Your 200 USD is on its way to ACC-7731.",
    ],
)
def test_success_claims_are_found_by_their_grammar(text: str) -> None:
    assert len(TOOLS.find_claims(text)) == 1, text


@pytest.mark.parametrize(
    "text",
    [
        "Once the invoice is paid in full, the account unlocks.",
        "Has your plan been switched to annual billing yet?",
        "If the $25 went back to your card, you'll see it soon.",
        "The invoice hasn't been paid yet.",
        'You wrote "my plan was switched without my consent."',
        "Had we switched you to annual billing, you would have saved $40.",
        "The switch to annual billing was declined by the provider.",
        "I'll switch your plan to annual billing once you confirm.",
        "I can see that $25 was credited back in March.",
        "You've already switched the plan yourself.",
        "The bank says the payment went through on their side.",
        "Typically, the money is back in your account within 3 days.",
        "I checked order O-55291: it was paid last week.",
        "Your meeting is still on the calendar.",
        "I understand your plan was switched without notice.",
    ],
)
def test_lookalikes_are_not_claims(text: str) -> None:
    assert TOOLS.find_claims(text) == [], text


@pytest.mark.parametrize(
    "text",
    [
        # a participle whose stem looks like a word of another class ("saved" is not "say")
        "Your draft has been saved.",
        # a clause that opens with "is" after a comma takes the sentence's subject
        "The reservation for Friday, 8 pm, is secured.",
        # a returning phrasal verb ("sent back") is its own action
        "The deposit was sent back to you.",
        # "asked for" is a request in a relative clause, not reported speech
        "The 2 monitors you asked for are on their way.",
        # "is out to" someone: a state the action reached
        "The signed contract is out to legal.",
        # coordinated verbs share "we"; an identifier may be a plain past's subject
        "We went ahead and renamed the workspace.",
        "PR-4471 merged an hour ago.",
        # "now" makes a present passive a change
        "Dark mode is enabled now.",
        # a passive measured "by" an amount is still the speaker's claim
        "Your trial was extended by 7 days.",
    ],
)
def test_grammar_rules_of_the_second_pass(text: str) -> None:
    assert len(TOOLS.find_claims(text)) == 1, text


@pytest.mark.parametrize(
    "text",
    [
        "Your workspace was renamed by the owner last year.",
        "Suppose the fee had been waived: you would pay $10 less.",
        "Imagine the seats had been bumped to 12.",
        "I am sorry and embarrassed about the delay.",
        "INV-2001 remained open over the weekend.",
        "The data is encrypted at rest.",
        "The printer is out of toner.",
    ],
)
def test_lookalikes_of_the_second_pass(text: str) -> None:
    assert TOOLS.find_claims(text) == [], text


def test_a_returned_amount_is_attributed_to_the_call_it_cites() -> None:
    text = "The 25 USD was sent back to your card for O-55291."
    [claim] = TOOLS.find_claims(text)
    assert (claim.tool, claim.verb) == (None, "sendback")
    assert judged(text, CREDIT) == [("issue_credit", "supported", None)]


def test_a_claim_in_any_words_is_attributed_by_what_it_cites() -> None:
    text = "Your $25 went back to your card for O-55291."
    [claim] = TOOLS.find_claims(text)
    assert claim.tool is None
    assert judged(text, CREDIT) == [("issue_credit", "supported", None)]
    # A read-only call recording the same order backs nothing.
    lookup = succeeded("lookup_order", {"amount": 25}, order_id="O-55291")
    assert judged(text, lookup) == [(None, "unsupported", None)]
    assert judged(text) == [(None, "unsupported", None)]


def test_attribution_by_a_quantity_and_then_its_comparison() -> None:
    scale = succeeded("scale_cluster", cluster="prod-eu-1", nodes=6)
    assert judged("Node count has been bumped to 6.", scale) == [
        ("scale_cluster", "supported", None)
    ]
    assert judged("Node count has been bumped to 9.", scale) == [
        ("scale_cluster", "contradicted", "nodes")
    ]


def test_citations_pointing_to_two_tools_attribute_to_neither() -> None:
    other = succeeded("transfer_funds", amount=25, currency="USD")
    assert judged("Your $25 went back to your card.", CREDIT, other) == [
        (None, "unsupported", None)
    ]


def test_a_verb_naming_another_action_is_not_attributed_by_an_identifier() -> None:
    # "reversed" is a known action, and not issue_credit's: the order id does not make it one.
    text = "The duplicate charge on O-55291 was reversed."
    assert judged(text, CREDIT) == [(None, "unsupported", None)]


def test_judge_without_a_detector_attributes_to_any_executed_tool() -> None:
    claim = Claim(text="Your $25 went back.", start=0, end=19, tool=None, verb="goback")
    [judgement] = judge([claim], [CREDIT])
    assert (judgement.claim.tool, judgement.status) == ("issue_credit", "supported")
    assert judgement.claim.quantities == (Quantity("money", "$25", 25.0, "USD"),)
