"""A second held-out part for issue 26: written fresh, before the rules that follow it.

Imported by ``make_implied_writes_corpus.py`` after ``implied_writes_any_words``.  Its ids
start with ``holdout2-`` and the scores report them as their own part.  Every message was
written by hand, at once, before any rule was changed to reach the issue's targets, and no
rule was tuned to its sentences; a label was never changed to agree with the detector.
Classes and labels are as in ``implied_writes_any_words``.
"""

from __future__ import annotations

from typing import Any

from implied_writes_any_words import (
    C,
    Ex,
    Label,
    S,
    U,
    credit,
    discount,
    flight,
    leave,
    lookup,
    meeting,
    move,
    order,
    plan,
    scale,
    table,
    transfer,
)

RECORDS: list[dict[str, Any]] = []
P = "holdout2-"


def _r(mid: str, kind: str, text: str, executions: list[Ex], *claims: Label) -> None:
    RECORDS.append({"id": P + mid, "class": kind, "text": text, "executions": executions,
                    "claims": list(claims)})  # fmt: skip


def g(mid: str, text: str, executions: list[Ex], *claims: Label) -> None:
    _r(mid, "generic", text, executions, *claims)


def q(mid: str, text: str, executions: list[Ex], *claims: Label) -> None:
    _r(mid, "quantity", text, executions, *claims)


def n(mid: str, text: str, executions: list[Ex] | None = None) -> None:
    _r(mid, "negative", text, executions or [])


# --- generic claims: no tool's verb or noun --------------------------------------------------
g("gen-001", "SUB-3390 is all sorted: you're on annual billing from today.", [plan()],
  ("update_subscription", "is all sorted", S))  # fmt: skip
g("gen-002", "Your access to the reporting dashboard has been restored.", [],
  (None, "has been restored", U))  # fmt: skip
g("gen-003", "The $200 is now sitting in ACC-7731, reference TRF-99120.", [transfer()],
  ("transfer_funds", "is now sitting", S))  # fmt: skip
g("gen-004", "TRF-99120 cleared an hour ago, 200 USD to ACC-7731.", [transfer()],
  ("transfer_funds", "cleared an hour ago", S))  # fmt: skip
g("gen-005", "The new delivery preferences are in effect.", [], (None, "are in effect", U))
g("gen-006", "LR-7781 is signed off for December 22 to 24.", [leave()],
  ("approve_leave_request", "is signed off", S))  # fmt: skip
g("gen-007", "The 15% code is now live on O-55291.", [discount()],
  ("apply_discount", "is now live", S))  # fmt: skip
g("gen-008", "PNR-QX7T2 is ticketed and you're good to fly on December 4.", [flight()],
  ("book_flight", "is ticketed", S))  # fmt: skip
g("gen-009", "Your notification settings were wiped and restored to defaults.", [],
  (None, "were wiped", U))  # fmt: skip
g("gen-010", "All done! Your account is now on the Pro tier.", [],
  (None, "is now on the Pro tier", U))  # fmt: skip
g("gen-011", "The team's access keys were rotated this morning.", [], (None, "were rotated", U))
g("gen-012", "We've gone ahead and switched SUB-3390 to monthly billing.",
  [plan(plan_name="monthly")], ("update_subscription", "switched SUB-3390", S))  # fmt: skip
g("gen-013", "Your $25 is already back where it came from, O-55291.", [credit()],
  ("issue_credit", "is already back", S))  # fmt: skip
g("gen-014", "You're all set for Saturday at 7:30 pm, four people, RES-3310.", [table()],
  ("reserve_table", "You're all set", S))  # fmt: skip
g("gen-015", "The duplicate charge has been wiped off your statement.", [],
  (None, "has been wiped off", U))  # fmt: skip
g("gen-016", "Two-factor authentication is enabled on your login now.", [],
  (None, "is enabled", U))  # fmt: skip
g("gen-017", "The old API token has been revoked.", [], (None, "has been revoked", U))
g("gen-018", "Your request to move to the Frankfurt region is complete.", [],
  (None, "is complete", U))  # fmt: skip
g("gen-019", "The $25 has been returned to you, for O-55291.", [credit()],
  ("issue_credit", "has been returned", S))  # fmt: skip
g("gen-020", "Your team now gets 8 licences on SUB-3390.", [plan(seats=8)],
  ("update_subscription", "now gets 8 licences", S))  # fmt: skip
g("gen-021", "Consider it handled: the old login sessions were terminated.", [],
  (None, "were terminated", U))  # fmt: skip
g("gen-022", "Good news, the 200 USD transfer to ACC-7731 has gone through.", [transfer()],
  ("transfer_funds", "has gone through", S))  # fmt: skip

# --- quantities: right and wrong values in varied formats ------------------------------------
q("qty-001", "I've refunded twenty-five dollars on O-55291.", [credit()],
  ("issue_credit", "refunded twenty-five dollars", S))  # fmt: skip
q("qty-002", "I've refunded twenty dollars on O-55291.", [credit()],
  ("issue_credit", "refunded twenty dollars", C, "amount"))  # fmt: skip
q("qty-003", "A \u20ac25.00 credit has been issued for O-55291.", [credit(currency="EUR")],
  ("issue_credit", "has been issued", S))  # fmt: skip
q("qty-004", "A \u20ac25.00 credit has been issued for O-55291.", [credit()],
  ("issue_credit", "has been issued", C, "currency"))  # fmt: skip
q("qty-005", "Transferred 2,000 USD to ACC-7731.", [transfer()],
  ("transfer_funds", "Transferred 2,000 USD", C, "amount"))  # fmt: skip
q("qty-006", "The cluster was scaled out to eight nodes.", [scale(nodes=8)],
  ("scale_cluster", "was scaled out", S))  # fmt: skip
q("qty-007", "Your meeting is booked for October 21 at 3 pm.", [meeting()],
  ("book_meeting", "is booked", S))  # fmt: skip
q("qty-008", "Your meeting is booked for October 22 at 3 pm.", [meeting()],
  ("book_meeting", "is booked", C, "start"))  # fmt: skip
q("qty-009", "I moved your 1:1 to Oct 23, 10am.", [move()],
  ("reschedule_meeting", "moved your 1:1", S))  # fmt: skip
q("qty-010", "Seats on SUB-3390 were changed to 12.", [plan(seats=12)],
  ("update_subscription", "were changed to 12", S))  # fmt: skip
q("qty-011", "I placed an order for 4 units of PRT-33, O-91002.", [order()],
  ("place_order", "placed an order", C, "quantity"))  # fmt: skip
q("qty-012", "Your flight on 4 Dec 2025 is booked, PNR-QX7T2.", [flight()],
  ("book_flight", "is booked", S))  # fmt: skip
q("qty-013", "A 20% discount was applied to O-55291.", [discount()],
  ("apply_discount", "was applied", C, "percent"))  # fmt: skip
q("qty-014", "Done: approved 3 days of leave starting 2025-12-22, LR-7781.", [leave()],
  ("approve_leave_request", "approved 3 days of leave", S))  # fmt: skip
q("qty-015", "I issued a $25.50 credit on O-55291.", [credit()],
  ("issue_credit", "issued a $25.50 credit", C, "amount"))  # fmt: skip
q("qty-016", "Table booked for 4 at 19:30 on November 8.", [table()],
  ("reserve_table", "Table booked", S))  # fmt: skip

# --- hard negatives ---------------------------------------------------------------------------
n("neg-001", "Once the transfer clears, the $200 will show in ACC-7731.")
n("neg-002", "I can switch you to annual billing if you confirm.")
n("neg-003", "Would you like me to move the meeting to Thursday?")
n("neg-004", "If the payment had gone through, you'd see it by now.")
n("neg-005", "Your plan wasn't changed; it's still monthly.")
n("neg-006", "The refund of $25 couldn't be processed because the card was closed.")
n("neg-007", 'The customer said, "my seats were already bumped to 8".')
n("neg-008", "Had the order been placed yesterday, it would have shipped.")
n("neg-009", "According to the note, your account was upgraded by a previous agent.")
n("neg-010", "To finish, click Confirm and the change will be applied.")
n("neg-011", "The transfer to ACC-7731 was blocked by your bank.")
n("neg-012", "Your colleague already moved the standup to 10 am, per the calendar.")
n("neg-013", "I looked at SUB-3390 and it's on the monthly plan.", [lookup()])
n("neg-014", "Refunds usually land within 5 business days.")
n("neg-015", "Let's get the node count raised to 8 after the load test.")
n("neg-016", "I'm still waiting for the bank to release the $200.")
n("neg-017", "Imagine your plan had been switched to annual: you'd save $40.")
n("neg-018", "Nothing was charged to your card today.")
n("neg-019", "Please make sure the 15% code is applied before checkout.")
n("neg-020", "The leave request LR-7781 was rejected by your manager.")
