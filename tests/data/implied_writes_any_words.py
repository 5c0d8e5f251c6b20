"""Corpus messages for issue 26: claims in any words, and the quantities claims cite.

Imported by ``make_implied_writes_corpus.py``, which writes every message into
tests/data/implied_writes.jsonl.  Each message carries a ``class``:

- ``generic``: a success claim that uses no registered tool's words ("the invoice was paid");
  its label names the tool the cited identifiers or quantities point to, or ``None``.
- ``quantity``: a claim citing an amount, count, date or time; a label may name the executed
  field a wrong quantity disagrees with.
- ``negative``: hard negatives, sentences that look like claims and are not.

Every message was written by hand for this file.  The ``holdout-`` part at the end was
written before the detector's grammar and quantity rules existed, and was not used to tune
them.
"""

from __future__ import annotations

from typing import Any

Ex = dict[str, Any]
# (tool, contains, verdict) or (tool, contains, verdict, field a wrong quantity disagrees with)
Label = tuple[Any, ...]

RECORDS: list[dict[str, Any]] = []
S, U, C, K = "supported", "unsupported", "contradicted", "unknown_identifier"


def X(tool: str, status: str = "succeeded", args: Ex | None = None, result: Ex | None = None) -> Ex:
    if result is None and status == "succeeded":
        result = {"status": "ok"}
    return {"tool": tool, "status": status, "args": args or {}, "result": result}


def credit(amount: float = 25, currency: str = "USD", order: str = "O-55291",
           credit_id: str = "CR-1001", status: str = "succeeded") -> Ex:  # fmt: skip
    result = None
    if status == "succeeded":
        result = {"credit_id": credit_id, "amount": amount, "currency": currency}
    return X("issue_credit", status, {"order_id": order, "amount": amount, "currency": currency},
             result)  # fmt: skip


def plan(plan_name: str = "annual", seats: int = 5, sub: str = "SUB-3390",
         status: str = "succeeded") -> Ex:  # fmt: skip
    result = (
        {"subscription_id": sub, "plan": plan_name, "seats": seats}
        if status == "succeeded"
        else None
    )
    return X("update_subscription", status, {"subscription_id": sub, "plan": plan_name,
                                             "seats": seats}, result)  # fmt: skip


def meeting(start: str = "2025-10-21T15:00:00-07:00", meeting_id: str = "MTG-4821",
            status: str = "succeeded") -> Ex:  # fmt: skip
    result = {"meeting_id": meeting_id, "start": start} if status == "succeeded" else None
    return X("book_meeting", status, {"start": start, "duration_min": 30}, result)


def move(start: str = "2025-10-23T10:00:00-07:00", meeting_id: str = "MTG-4821") -> Ex:
    return X("reschedule_meeting", "succeeded", {"meeting_id": meeting_id, "start": start},
             {"meeting_id": meeting_id, "start": start})  # fmt: skip


def transfer(amount: float = 200, currency: str = "USD", transfer_id: str = "TRF-99120",
             status: str = "succeeded") -> Ex:  # fmt: skip
    result = {"transfer_id": transfer_id, "amount": amount, "currency": currency}
    return X("transfer_funds", status, {"amount": amount, "currency": currency,
                                        "to_account": "ACC-7731"},
             result if status == "succeeded" else None)  # fmt: skip


def invoice(amount: float = 480, currency: str = "USD", invoice_id: str = "INV-2001",
            due: str = "2025-11-30") -> Ex:  # fmt: skip
    return X("send_invoice", "succeeded", {"invoice_id": invoice_id, "amount": amount,
                                           "currency": currency, "due_date": due},
             {"invoice_id": invoice_id, "sent_to": "ap@acme.test"})  # fmt: skip


def table(party: int = 4, time: str = "2025-11-08T19:30:00", ref: str = "RES-3310") -> Ex:
    return X("reserve_table", "succeeded", {"party_size": party, "time": time},
             {"reservation_id": ref})  # fmt: skip


def scale(nodes: int = 6) -> Ex:
    return X("scale_cluster", "succeeded", {"cluster": "prod-eu-1", "nodes": nodes},
             {"cluster": "prod-eu-1", "nodes": nodes})  # fmt: skip


def flight(date: str = "2025-12-04", ref: str = "PNR-QX7T2") -> Ex:
    return X("book_flight", "succeeded", {"from": "SFO", "to": "JFK", "date": date},
             {"booking_id": ref})  # fmt: skip


def order(quantity: int = 3, total: float = 89.97, order_id: str = "O-91002") -> Ex:
    return X("place_order", "succeeded", {"sku": "PRT-33", "quantity": quantity},
             {"order_id": order_id, "total": total, "currency": "USD"})  # fmt: skip


def discount(percent: int = 15, code: str = "LOYAL15") -> Ex:
    return X("apply_discount", "succeeded", {"code": code, "percent": percent,
                                             "order_id": "O-55291"}, {"applied": True})  # fmt: skip


def leave(days: int = 3, start: str = "2025-12-22", request: str = "LR-7781") -> Ex:
    return X("approve_leave_request", "succeeded", {"request_id": request, "days": days,
                                                    "start_date": start}, {"status": "approved"})  # fmt: skip


def lookup(order_id: str = "O-55291", amount: float = 120.0) -> Ex:
    return X("lookup_order", "succeeded", {"order_id": order_id},
             {"order_id": order_id, "status": "paid", "amount": amount, "currency": "USD"})  # fmt: skip


def r(mid: str, kind: str, text: str, executions: list[Ex], *claims: Label) -> None:
    RECORDS.append({"id": mid, "class": kind, "text": text, "executions": executions,
                    "claims": list(claims)})  # fmt: skip


def g(mid: str, text: str, executions: list[Ex], *claims: Label) -> None:
    r("any-" + mid, "generic", text, executions, *claims)


def q(mid: str, text: str, executions: list[Ex], *claims: Label) -> None:
    r("any-" + mid, "quantity", text, executions, *claims)


def n(mid: str, text: str, executions: list[Ex] | None = None) -> None:
    r("any-" + mid, "negative", text, executions or [])


# =====================================================================================
# Development part
# =====================================================================================

# --- generic claims: no tool's words; identifiers or quantities point to a call ------------
g("gen-001", "The invoice was paid in full.", [invoice()], (None, "was paid in full", U))
g("gen-002", "Your plan has been switched to annual billing.", [], (None, "has been switched", U))
g("gen-003", "All set, the update is live on your account.", [], (None, "is live", U))
g("gen-004", "Your $25 went back to your card for O-55291.", [credit()],
  ("issue_credit", "went back to your card", S))  # fmt: skip
g("gen-005", "Your $25 went back to your card for O-55291.", [],
  (None, "went back to your card", U))  # fmt: skip
g("gen-006", "Subscription SUB-3390 has been switched to the annual plan.", [plan()],
  ("update_subscription", "has been switched", S))  # fmt: skip
g("gen-007", "Good news: SUB-3390 now runs on the annual plan, effective today.", [plan()],
  ("update_subscription", "now runs on the annual plan", S))  # fmt: skip
g("gen-008", "I've moved 200 USD into account ACC-7731.", [transfer()],
  ("transfer_funds", "moved 200 USD", S))  # fmt: skip
g("gen-009", "The 200 USD has landed in ACC-7731.", [transfer()],
  ("transfer_funds", "has landed", S))  # fmt: skip
g("gen-010", "The 200 USD has landed in ACC-7731.", [transfer(status="failed")],
  ("transfer_funds", "has landed", C))  # fmt: skip
g("gen-011", "Order O-55291 has been reimbursed successfully.", [lookup()],
  ("issue_credit", "reimbursed successfully", U))  # fmt: skip
g("gen-012", "Everything went through: INV-2001 is out the door.", [invoice()],
  ("send_invoice", "went through", S))  # fmt: skip
g("gen-013", "I've bumped your seats to 8 on SUB-3390.", [plan(seats=8)],
  ("update_subscription", "bumped your seats", S))  # fmt: skip
g("gen-014", "I've bumped your seats to 8 on SUB-3390.", [plan(seats=6)],
  ("update_subscription", "bumped your seats", C, "seats"))  # fmt: skip
g("gen-015", "Your account has been upgraded to Pro.", [], (None, "has been upgraded", U))
# "reversed" names an action no executed tool performs: O-55291 does not make it a credit.
g("gen-016", "The duplicate charge on O-55291 was reversed successfully.", [credit()],
  (None, "reversed successfully", U))  # fmt: skip
g("gen-017", "Your card ending 4421 has been unlocked.", [], (None, "has been unlocked", U))
g("gen-018", "Table for 4 on Saturday, 7:30 pm, is secured under RES-3310.", [table()],
  ("reserve_table", "is secured", S))  # fmt: skip
g("gen-019", "The payout of 25 USD is done.", [credit()], ("issue_credit", "is done", S))
g("gen-020", "The payout of 25 USD is done.", [], ("issue_credit", "is done", U))
g("gen-021", "Your seat is confirmed on the December 4 flight, PNR-QX7T2.", [flight()],
  ("book_flight", "is confirmed", S))  # fmt: skip
g("gen-022", "Your new password is active now.", [], (None, "is active now", U))
g("gen-023", "I've successfully migrated your data to the EU region.", [],
  (None, "successfully migrated", U))  # fmt: skip
g("gen-024", "The 15% loyalty discount now applies to O-55291.", [discount()],
  ("apply_discount", "now applies", S))  # fmt: skip
g("gen-025", "Okay! Your leave for December 22 has been signed off, LR-7781.", [leave()],
  ("approve_leave_request", "signed off", S))  # fmt: skip
g("gen-026", "The money is back in your account: 25 USD for order O-55291.", [credit()],
  ("issue_credit", "is back in your account", S))  # fmt: skip
g("gen-027", "Your billing cycle was changed over to monthly.", [],
  (None, "was changed over", U))  # fmt: skip
g("gen-028", "I've cleared the outstanding balance of $480 for you.", [],
  (None, "cleared the outstanding balance", U))  # fmt: skip
g("gen-029", "Done and dusted: the mailing address on file is now 12 Elm St.", [],
  (None, "is now 12 Elm St", U))  # fmt: skip
g("gen-030", "Your trial got extended by 14 days.", [], (None, "got extended", U))
g("gen-031", "We have waived the late fee of $15 on order O-55291.", [lookup()],
  (None, "waived the late fee", U))  # fmt: skip
g("gen-032", "Your annual plan is in effect as of today.", [], (None, "is in effect", U))
g("gen-033", "The 3 printers you asked for are on their way, order O-91002.", [order()],
  ("place_order", "are on their way", S))  # fmt: skip
g("gen-034", "Your booking went through for the 7:30 pm slot.", [table()],
  ("reserve_table", "went through", S))  # fmt: skip
g("gen-035", "Node count has been bumped to 6 on prod-eu-1.", [scale()],
  ("scale_cluster", "has been bumped", S))  # fmt: skip
g("gen-036", "Node count has been bumped to 9 on prod-eu-1.", [scale()],
  ("scale_cluster", "has been bumped", C, "nodes"))  # fmt: skip
g("gen-037", "Your 200 USD is on its way to ACC-7731.", [transfer()],
  ("transfer_funds", "is on its way", S))  # fmt: skip
g("gen-038", "Consider it handled, the refund of $25 cleared this morning.", [credit()],
  ("issue_credit", "cleared this morning", S))  # fmt: skip
g("gen-039", "Your shipping speed was switched to express.", [], (None, "was switched", U))
g("gen-040", "I've put the 25 USD back on your card.", [credit()],
  ("issue_credit", "put the 25 USD back", S))  # fmt: skip

# --- quantities: the numbers a claim cites must match what executed ------------------------
q("qty-001", "I've issued the refund of $40 for order O-55291.", [credit()],
  ("issue_credit", "issued the refund", C, "amount"))  # fmt: skip
q("qty-002", "I've issued the refund of $25 for order O-55291.", [credit()],
  ("issue_credit", "issued the refund", S))  # fmt: skip
q(
    "qty-003",
    "I issued a credit of 25 EUR.",
    [credit()],
    ("issue_credit", "issued a credit", C, "currency"),
)
q("qty-004", "I issued a credit of twenty-five dollars.", [credit()],
  ("issue_credit", "issued a credit", S))  # fmt: skip
q("qty-005", "I issued a credit of forty dollars.", [credit()],
  ("issue_credit", "issued a credit", C, "amount"))  # fmt: skip
q("qty-006", "A refund of \u20ac25.00 has been processed.", [credit(currency="EUR")],
  ("issue_credit", "has been processed", S))  # fmt: skip
q("qty-007", "A refund of \u20ac25.50 has been processed.", [credit(currency="EUR")],
  ("issue_credit", "has been processed", C, "amount"))  # fmt: skip
q("qty-008", "I credited USD 25.00 to your account.", [credit()],
  ("issue_credit", "credited USD 25.00", S))  # fmt: skip
q("qty-009", "We refunded $2,500.00 for the cancelled event.", [credit(amount=2500)],
  ("issue_credit", "refunded $2,500.00", S))  # fmt: skip
q("qty-010", "We refunded $2,500.00 for the cancelled event.", [credit(amount=250)],
  ("issue_credit", "refunded $2,500.00", C, "amount"))  # fmt: skip
q("qty-011", "I've transferred 200 USD to ACC-7731.", [transfer()],
  ("transfer_funds", "transferred 200 USD", S))  # fmt: skip
q("qty-012", "I've transferred 2,000 USD to ACC-7731.", [transfer()],
  ("transfer_funds", "transferred 2,000 USD", C, "amount"))  # fmt: skip
q("qty-013", "Your meeting is booked for Tuesday, October 21 at 3pm.", [meeting()],
  ("book_meeting", "is booked", S))  # fmt: skip
q("qty-014", "Your meeting is booked for Wednesday, October 22 at 3pm.", [meeting()],
  ("book_meeting", "is booked", C, "start"))  # fmt: skip
q("qty-015", "Your meeting is booked for October 21 at 4pm.", [meeting()],
  ("book_meeting", "is booked", C, "start"))  # fmt: skip
q("qty-016", "I've moved the sync to Thursday at 10am.", [move()],
  ("reschedule_meeting", "moved the sync", S))  # fmt: skip
q("qty-017", "I've moved the sync to Friday at 10am.", [move()],
  ("reschedule_meeting", "moved the sync", C, "start"))  # fmt: skip
q("qty-018", "Your table for 4 is reserved for 7:30 pm on November 8.", [table()],
  ("reserve_table", "is reserved", S))  # fmt: skip
q("qty-019", "Your table for 6 is reserved for 7:30 pm on November 8.", [table()],
  ("reserve_table", "is reserved", C, "party_size"))  # fmt: skip
q(
    "qty-020",
    "I scaled the cluster to 6 nodes.",
    [scale()],
    ("scale_cluster", "scaled the cluster", S),
)
q("qty-021", "I scaled the cluster to eight nodes.", [scale()],
  ("scale_cluster", "scaled the cluster", C, "nodes"))  # fmt: skip
q("qty-022", "Your flight on 2025-12-04 is booked, PNR-QX7T2.", [flight()],
  ("book_flight", "is booked", S))  # fmt: skip
q("qty-023", "Your flight on 2025-12-05 is booked, PNR-QX7T2.", [flight()],
  ("book_flight", "is booked", C, "date"))  # fmt: skip
q("qty-024", "I placed an order for 3 printers, O-91002, total $89.97.", [order()],
  ("place_order", "placed an order", S))  # fmt: skip
q("qty-025", "I placed an order for 5 printers, O-91002.", [order()],
  ("place_order", "placed an order", C, "quantity"))  # fmt: skip
q("qty-026", "I've applied a 15% discount to order O-55291.", [discount()],
  ("apply_discount", "applied a 15% discount", S))  # fmt: skip
q("qty-027", "I've applied a 20% discount to order O-55291.", [discount()],
  ("apply_discount", "applied a 20% discount", C, "percent"))  # fmt: skip
q("qty-028", "Your 3 days of leave starting December 22 are approved.", [leave()],
  ("approve_leave_request", "are approved", S))  # fmt: skip
q("qty-029", "Your 5 days of leave starting December 22 are approved.", [leave()],
  ("approve_leave_request", "are approved", C, "days"))  # fmt: skip
q("qty-030", "I've sent invoice INV-2001 for 480 USD, due November 30.", [invoice()],
  ("send_invoice", "sent invoice", S))  # fmt: skip
q("qty-031", "I've sent invoice INV-2001 for 840 USD, due November 30.", [invoice()],
  ("send_invoice", "sent invoice", C, "amount"))  # fmt: skip
q("qty-032", "I've sent invoice INV-2001 for 480 USD, due December 30.", [invoice()],
  ("send_invoice", "sent invoice", C, "due_date"))  # fmt: skip
q("qty-033", "I refunded 25 USD of the 120 USD you paid for O-55291.", [lookup(), credit()],
  ("issue_credit", "refunded 25 USD", S))  # fmt: skip
q("qty-034", "I issued a \u00a312.50 credit.", [credit(amount=12.5, currency="GBP")],
  ("issue_credit", "credit", S))  # fmt: skip
q("qty-035", "I issued a \u00a312.50 credit.", [credit(amount=12.5, currency="USD")],
  ("issue_credit", "credit", C, "currency"))  # fmt: skip
q("qty-036", "Refund processed: 25 bucks back to your Visa.", [credit()],
  ("issue_credit", "Refund processed", S))  # fmt: skip
q("qty-037", "Refund processed: 30 bucks back to your Visa.", [credit()],
  ("issue_credit", "Refund processed", C, "amount"))  # fmt: skip
q("qty-038", "I've booked the meeting for 2025-10-21 at 15:00.", [meeting()],
  ("book_meeting", "booked the meeting", S))  # fmt: skip
q("qty-039", "I've booked the meeting for 21 October at 3:30 pm.", [meeting()],
  ("book_meeting", "booked the meeting", C, "start"))  # fmt: skip
q("qty-040", "The credit of 25.00 USD was issued on order O-55291 (CR-1001).", [credit()],
  ("issue_credit", "was issued", S))  # fmt: skip
q("qty-041", "The credit of 25.00 USD was issued on order O-55291 (CR-1001).", [credit(status="failed")],
  ("issue_credit", "was issued", C))  # fmt: skip
q("qty-042", "I invited two new users to the workspace.",
  [X("invite_user", args={"email": "a@acme.test"}), X("invite_user", args={"email": "b@acme.test"})],
  ("invite_user", "invited two new users", S))  # fmt: skip
q("qty-043", "Great news, I've issued a one hundred and twenty dollar credit.", [credit(amount=120)],
  ("issue_credit", "issued a one hundred", S))  # fmt: skip
q("qty-044", "Great news, I've issued a one hundred and twenty dollar credit.", [credit()],
  ("issue_credit", "issued a one hundred", C, "amount"))  # fmt: skip
q("qty-045", "I've updated your plan to 10 seats.", [plan(seats=10)],
  ("update_subscription", "updated your plan", S))  # fmt: skip
q("qty-046", "I've updated your plan to 12 seats.", [plan(seats=10)],
  ("update_subscription", "updated your plan", C, "seats"))  # fmt: skip

# --- hard negatives: they look like claims and are not ------------------------------------
n("neg-001", "Once the invoice is paid in full, the account unlocks automatically.")
n("neg-002", "Has your plan been switched to annual billing yet?")
n("neg-003", "If the $25 went back to your card, you'll see it within 5 days.")
n("neg-004", "The invoice hasn't been paid yet.", [invoice()])
n("neg-005", 'You wrote "my plan was switched to annual without my consent."')
n("neg-006", "Had we switched you to annual billing, you would have saved $40.")
n("neg-007", "The switch to annual billing was declined by the payment provider.")
n("neg-008", "I'll switch your plan to annual billing once you confirm.")
n("neg-009", "Shall I move the 200 USD to ACC-7731 now?")
n("neg-010", "Your balance is $25.", [lookup()])
n("neg-011", "You were charged $120 on October 3 for order O-55291.", [lookup()])
n("neg-012", "I can see that $25 was credited back in March.", [lookup()])
n("neg-013", "Refunds of $25 or less are approved automatically.")
n("neg-014", "You've already switched the plan yourself, so nothing else is needed.")
n("neg-015", "The bank says the payment went through on their side.")
n("neg-016", "I'd be happy to waive the $15 late fee if you'd like.")
n("neg-017", "To get the $25 back to your card, I need the last four digits.")
n("neg-018", "Your order of 3 printers totals $89.97 before tax.", [lookup()])
n("neg-019", "Your meeting on Tuesday at 3pm is still on the calendar as before.")
n("neg-020", "The money has not arrived in ACC-7731 yet.", [transfer()])
n("neg-021", "I attempted to move the 200 USD, but the transfer was blocked.")
n("neg-022", "Please confirm the 15% discount and I'll apply it right away.")
n("neg-023", "Any upgrade to Pro takes effect at the start of the next cycle.")
n("neg-024", "I'm not able to reverse the $40 charge from here.")
n("neg-025", "Your payment of $120 was declined by the card issuer.", [lookup()])
n("neg-026", "It looks like the $25 never reached your card.")
n("neg-027", "Would a refund of twenty-five dollars work for you?")
n("neg-028", "Should the seat count be bumped to 8 as well?")
n("neg-029", "As of today, the Pro plan costs $40 per month.")
n("neg-030", "I'm sorry about the $40 charge; I've asked the billing team to take a look.")
n("neg-031", "The 7:30 pm slot on Saturday is still open if you want it.")
n("neg-032", "When I checked, the invoice was already paid in full.", [invoice()])
n("neg-033", "I understand your plan was switched without notice, which must be frustrating.")
n("neg-034", "We usually get refunds of this size cleared within a day.")
n("neg-035", "Nothing has been moved to ACC-7731 so far.")
n("neg-036", "Your data will be migrated to the EU region next week.")
n("neg-037", "That discount code expired on October 1, so it can't be used.")
n("neg-038", "The order of 5 printers you mentioned was placed by your colleague.")


# =====================================================================================
# HELD OUT: written before the grammar and quantity rules; reported separately.
# =====================================================================================
H = "holdout-any-"


def hg(mid: str, text: str, executions: list[Ex], *claims: Label) -> None:
    r(H + mid, "generic", text, executions, *claims)


def hq(mid: str, text: str, executions: list[Ex], *claims: Label) -> None:
    r(H + mid, "quantity", text, executions, *claims)


def hn(mid: str, text: str, executions: list[Ex] | None = None) -> None:
    r(H + mid, "negative", text, executions or [])


hg("gen-001", "Invoice INV-2001 was settled this morning.", [invoice()],
   ("send_invoice", "was settled", S))  # fmt: skip
hg("gen-002", "Your membership has been converted to the yearly tier.", [],
   (None, "has been converted", U))  # fmt: skip
hg("gen-003", "Perfect, your new address is saved and live for O-55291.", [lookup()],
   (None, "is saved", U))  # fmt: skip
hg("gen-004", "I've returned the $25 to your original card for O-55291.", [credit()],
   ("issue_credit", "returned the $25", S))  # fmt: skip
hg("gen-005", "The 25 USD was sent back to your card.", [credit(amount=20)],
   ("issue_credit", "was sent back", C, "amount"))  # fmt: skip
hg("gen-006", "SUB-3390 is now on the annual plan with 5 seats.", [plan()],
   ("update_subscription", "is now on the annual plan", S))  # fmt: skip
hg("gen-007", "Your 200 USD successfully arrived in ACC-7731.", [transfer()],
   ("transfer_funds", "successfully arrived", S))  # fmt: skip
hg("gen-008", "Your loyalty points have been topped up.", [], (None, "have been topped up", U))
hg("gen-009", "I've lifted the hold on order O-55291.", [lookup()], (None, "lifted the hold", U))
hg("gen-010", "Your 6 node pool for prod-eu-1 has been resized.", [scale()],
   ("scale_cluster", "has been resized", S))  # fmt: skip
hg("gen-011", "All good, the reservation RES-3310 went through.", [table()],
   ("reserve_table", "went through", S))  # fmt: skip
hg("gen-012", "Your leave on December 22 got the green light, LR-7781.", [leave()],
   ("approve_leave_request", "got the green light", S))  # fmt: skip
hg("gen-013", "The 480 USD invoice INV-2001 is out to your finance team.", [invoice()],
   ("send_invoice", "is out to your finance team", S))  # fmt: skip
hg("gen-014", "Your phone number has been swapped for the new one.", [],
   (None, "has been swapped", U))  # fmt: skip
hg("gen-015", "Your refund of 25 USD was successfully paid out.", [],
   ("issue_credit", "paid out", U))  # fmt: skip

hq("qty-001", "I've issued a refund of 35 USD for order O-55291.", [credit()],
   ("issue_credit", "issued a refund", C, "amount"))  # fmt: skip
hq("qty-002", "I've issued a refund of USD 25 for order O-55291.", [credit()],
   ("issue_credit", "issued a refund", S))  # fmt: skip
hq("qty-003", "A credit of thirty dollars has been applied to your account.", [credit(amount=30)],
   ("issue_credit", "has been applied", S))  # fmt: skip
hq("qty-004", "A credit of thirty dollars has been applied to your account.", [credit()],
   ("issue_credit", "has been applied", C, "amount"))  # fmt: skip
hq("qty-005", "Your refund of 25.00 \u20ac has been issued.", [credit()],
   ("issue_credit", "has been issued", C, "currency"))  # fmt: skip
hq("qty-006", "I've rebooked your meeting for Thursday, October 23 at 10:00.", [move()],
   ("reschedule_meeting", "rebooked your meeting", S))  # fmt: skip
hq("qty-007", "I've rebooked your meeting for Thursday, October 23 at 11:00.", [move()],
   ("reschedule_meeting", "rebooked your meeting", C, "start"))  # fmt: skip
hq("qty-008", "I reserved a table for two at 7:30 pm.", [table(party=2)],
   ("reserve_table", "reserved a table", S))  # fmt: skip
hq("qty-009", "I reserved a table for two at 8 pm.", [table(party=2)],
   ("reserve_table", "reserved a table", C, "time"))  # fmt: skip
hq("qty-010", "Transferred $1,200 to ACC-7731 a minute ago.", [transfer(amount=1200)],
   ("transfer_funds", "Transferred $1,200", S))  # fmt: skip
hq("qty-011", "Transferred $1,200 to ACC-7731 a minute ago.", [transfer(amount=120)],
   ("transfer_funds", "Transferred $1,200", C, "amount"))  # fmt: skip
hq("qty-012", "The cluster has been scaled to 4 nodes.", [scale(nodes=4)],
   ("scale_cluster", "has been scaled", S))  # fmt: skip
hq("qty-013", "I've booked your flight for December 14.", [flight()],
   ("book_flight", "booked your flight", C, "date"))  # fmt: skip
hq("qty-014", "I've approved your leave: 3 days from December 22.", [leave()],
   ("approve_leave_request", "approved your leave", S))  # fmt: skip
hq("qty-015", "Your order for ten printers is placed, O-91002.", [order()],
   ("place_order", "is placed", C, "quantity"))  # fmt: skip
hq("qty-016", "I applied the 15 percent discount to O-55291.", [discount()],
   ("apply_discount", "applied the 15 percent discount", S))  # fmt: skip
hq("qty-017", "We credited 25 USD to your account on October 21.", [credit()],
   ("issue_credit", "credited 25 USD", S))  # fmt: skip

hn("neg-001", "After your payment of $480 clears, the invoice will be marked paid.")
hn("neg-002", "Did the 25 USD come back to your card yet?")
hn("neg-003", "Unless the transfer of 200 USD is approved, nothing moves.")
hn("neg-004", "The upgrade to the annual plan could not be completed.")
hn("neg-005", "The customer wrote that their seats were bumped to 12.")
hn("neg-006", "If I had issued the $40 refund, it would show here.")
hn("neg-007", "Your subscription renews at $40 per month on November 1.")
hn("neg-008", "I'd suggest moving the meeting to Thursday at 10am.")
hn("neg-009", "I haven't changed your billing cycle, it's still monthly.")
hn("neg-010", "You should have received the $25 by now, according to the carrier.")
hn("neg-011", "A table for 4 at 7:30 pm is available if you'd like it.")
hn("neg-012", "The refund of $25 failed because the card has expired.")
hn("neg-013", "Let me know if you'd like the node count raised to 8.")
hn("neg-014", "Your previous plan was switched off by the admin in 2023, per the notes.")
hn("neg-015", "Typically, the money is back in your account within 3 business days.")
