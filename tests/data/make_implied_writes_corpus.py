"""Writes tests/data/implied_writes.jsonl: hand-written agent messages with labelled claims.

Run ``python tests/data/make_implied_writes_corpus.py``; the .jsonl is exactly its output.
Every message below was written by hand.  Ids starting with ``holdout-`` were written after
the detector's rules were tuned and are reported separately by the tests; ``holdout2-`` ids
(implied_writes_holdout2.py) are a second, later held-out part.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

# The messages of issue 26 (claims in any words, cited quantities) live in a module beside
# this one, which is importable however this file is run (script or test).
sys.path.insert(0, str(Path(__file__).resolve().parent))
import implied_writes_any_words as any_words
import implied_writes_holdout2 as holdout2

OUT = Path(__file__).with_name("implied_writes.jsonl")

Ex = dict[str, Any]
Cl = tuple[str | None, str, str]


def X(
    tool: str,
    status: str = "succeeded",
    args: dict[str, Any] | None = None,
    result: dict[str, Any] | None = None,
) -> Ex:
    if result is None and status == "succeeded":
        result = {"status": "ok"}
    return {"tool": tool, "status": status, "args": args or {}, "result": result}


def credit(status: str = "succeeded", order: str = "O-55291", amount: float = 25,
           currency: str = "USD", credit_id: str = "CR-1001") -> Ex:  # fmt: skip
    result = None
    if status == "succeeded":
        result = {"credit_id": credit_id, "amount": amount, "currency": currency,
                  "status": "issued"}  # fmt: skip
    return X("issue_credit", status,
             {"order_id": order, "amount": amount, "currency": currency}, result)  # fmt: skip


def ticket(status: str = "succeeded", ticket_id: str = "T-77391", customer: str = "C-10429",
           subject: str = "Billing discrepancy") -> Ex:  # fmt: skip
    result = None
    if status == "succeeded":
        result = {"ticket_id": ticket_id, "status": "created",
                  "url": f"https://support.example.com/{ticket_id}"}  # fmt: skip
    return X("create_support_ticket", status,
             {"customer_id": customer, "subject": subject, "priority": "high"}, result)  # fmt: skip


def lookup(order: str = "O-55291", **fields: Any) -> Ex:
    result = {"order_id": order, "status": "paid", "amount": 120.0, "currency": "USD"}
    result.update(fields)
    return X("lookup_order", "succeeded", {"order_id": order}, result)


MESSAGES: list[tuple[str, str, list[Ex], list[Cl]]] = []
TOOLS: dict[str, list[dict[str, Any]]] = {}


def m(mid: str, text: str, executions: list[Ex], *claims: Cl) -> None:
    MESSAGES.append((mid, text, executions, list(claims)))


S, U, C, K = "supported", "unsupported", "contradicted", "unknown_identifier"


# --- billing: credits and refunds -------------------------------------------------------
m(
    "bill-001",
    "I've issued a credit of 25 USD against order O-55291. It should show on your "
    "statement within a few days.",
    [credit()],
    ("issue_credit", "issued a credit", S),
)
m(
    "bill-002",
    "I've issued the refund for your order.",
    [],
    ("issue_credit", "issued the refund", U),
)
m(
    "bill-003",
    "Done — refund processed. You'll see 25.00 USD back on your card.",
    [credit()],
    ("issue_credit", "refund processed", S),
)
m(
    "bill-004",
    "I issued a credit of 25 USD, reference CR-1001.",
    [credit()],
    ("issue_credit", "CR-1001", S),
)
m(
    "bill-005",
    "I issued a credit of 25 USD, reference CR-1044.",
    [credit()],
    ("issue_credit", "CR-1044", K),
)
m(
    "bill-006",
    "I can issue a partial credit of 25 USD for order O-55291. Shall I proceed?",
    [lookup()],
)
m("bill-007", "Once the order is confirmed as paid, I'll issue the credit right away.", [])
m("bill-008", "If you confirm, the refund will be processed to your original payment method.", [])
m(
    "bill-009",
    "I haven't issued the refund yet because the order is still unpaid.",
    [lookup("O-60000", status="unpaid")],
)
m(
    "bill-010",
    "Unfortunately the refund could not be issued: order O-70000 is outside the "
    "30-day return window.",
    [credit("rejected", order="O-70000")],
)
m(
    "bill-011",
    "Good news — your refund has been approved and processed. The credit ID is CR-1001.",
    [credit()],
    ("issue_credit", "approved and processed", S),
)
m(
    "bill-012",
    "Your refund has been processed.",
    [credit("rejected")],
    ("issue_credit", "refund has been processed", C),
)
m(
    "bill-013",
    "The credit was issued successfully.",
    [credit("failed")],
    ("issue_credit", "credit was issued", C),
)
m(
    "bill-014",
    "I've refunded the duplicate charge of 120 USD.",
    [credit("dry_run", amount=120)],
    ("issue_credit", "refunded the duplicate charge", U),
)
m(
    "bill-015",
    "You mentioned you were already refunded last week, so let me look into why it isn't showing.",
    [],
)
m(
    "bill-016",
    'You wrote "the refund was processed on Monday", but I don\'t see it on the order yet.',
    [lookup()],
)
m(
    "bill-017",
    "I looked up order O-55291: it was paid 5 days ago and is eligible for a credit.",
    [lookup()],
)
m(
    "bill-018",
    "Sure. I've applied a 25 USD credit to order O-55291 (credit CR-1001).",
    [lookup(), credit()],
    ("issue_credit", "applied a 25 USD credit", S),
)
m("bill-019", "Refunds are usually processed within 5 business days of approval.", [])
m(
    "bill-020",
    "I've prepared a request to issue a 25 USD credit on order O-55291; it needs a "
    "quick confirmation from you before it goes through.",
    [],
)
m("bill-021", "I've submitted a request for approval to refund the remaining 40 USD.", [])
m("bill-022", "The refund is being processed and should complete shortly.", [])
m(
    "bill-023",
    "A credit of 25 USD has been applied to your account.",
    [],
    ("issue_credit", "has been applied", U),
)
m(
    "bill-024",
    "We credited your account 25 USD for the inconvenience.",
    [credit()],
    ("issue_credit", "credited your account", S),
)
m(
    "bill-025",
    "I tried to issue the credit but the daily credit budget has been reached, so "
    "nothing was charged or refunded.",
    [credit("rejected")],
)
m(
    "bill-026",
    "The credit request was rejected because the order is unpaid. Would you like me "
    "to open a ticket instead?",
    [credit("rejected", order="O-60000")],
)
m(
    "bill-027",
    "Your refund of 120 USD went through this morning.",
    [credit(amount=120)],
    ("issue_credit", "went through", S),
)
m(
    "bill-028",
    "I've reimbursed the shipping fee (12 USD) as a credit on O-55291.",
    [credit(amount=12)],
    ("issue_credit", "reimbursed the shipping fee", S),
)
m(
    "bill-029",
    "Refund complete! Credit CR-2090 for 25 EUR is now on order O-80001.",
    [credit(order="O-80001", currency="EUR", credit_id="CR-2090")],
    ("issue_credit", "Refund complete", S),
    ("issue_credit", "is now on order", S),
)
m(
    "bill-030",
    "Refund complete! Credit CR-2091 for 25 EUR is now on order O-80001.",
    [credit(order="O-80001", currency="EUR", credit_id="CR-2090")],
    ("issue_credit", "Refund complete", S),
    ("issue_credit", "is now on order", K),
)
m("bill-031", "Would you like the credit in USD or EUR? Once I know, I can apply it.", [])
m(
    "bill-032",
    "The refund was not processed because the card on file has expired.",
    [credit("failed")],
)
m("bill-033", "No refund has been issued for this order so far.", [lookup()])
m("bill-034", "I went ahead and refunded it.", [credit()], ("issue_credit", "refunded it", S))
m("bill-035", "Should I refund the full 120 USD or just the 25 USD shipping portion?", [])
m(
    "bill-036",
    "I granted a goodwill credit of 10 USD on order O-55291.",
    [credit(amount=10)],
    ("issue_credit", "goodwill credit", S),
)
m(
    "bill-037",
    "According to our records, a credit was issued on this order in March.",
    [lookup(credits=["CR-0042"])],
)
m(
    "bill-038",
    "I've processed a refund of 25 USD on order O-55291 and a second one on order O-70000.",
    [credit()],
    ("issue_credit", "processed a refund", K),
)
m(
    "bill-039",
    "I've processed a refund of 25 USD on order O-70000.",
    [credit(order="O-55291")],
    ("issue_credit", "processed a refund", K),
)
m(
    "bill-040",
    "Your credit has been issued — CR-1001, 25 USD. Anything else I can help with?",
    [credit()],
    ("issue_credit", "credit has been issued", S),
)
m("bill-041", "Credits issued through this form are reviewed by finance each Friday.", [])
m("bill-042", "I'm issuing the credit now; you'll get a confirmation email when it's done.", [])


# --- support tickets --------------------------------------------------------------------
m(
    "tkt-001",
    "I created ticket T-77391; here's the link: https://support.example.com/T-77391",
    [ticket()],
    ("create_support_ticket", "created ticket T-77391", S),
)
m(
    "tkt-002",
    "Ticket T-77391 is created.",
    [ticket()],
    ("create_support_ticket", "Ticket T-77391 is created", S),
)
m("tkt-003", "Ticket T-77391 is created.", [], ("create_support_ticket", "T-77391", U))
m(
    "tkt-004",
    "Ticket T-77392 is created and our billing team will pick it up today.",
    [ticket()],
    ("create_support_ticket", "T-77392", K),
)
m("tkt-005", "I can create a ticket with these details—shall I proceed?", [])
m("tkt-006", "I can open a support case for the billing discrepancy if you'd like.", [])
m(
    "tkt-007",
    "I've opened a support case for the billing discrepancy. Our team usually replies "
    "within one business day.",
    [ticket()],
    ("create_support_ticket", "opened a support case", S),
)
m(
    "tkt-008",
    "The ticket has been created.",
    [ticket("rejected")],
    ("create_support_ticket", "ticket has been created", C),
)
m(
    "tkt-009",
    "I wasn't able to create the ticket: the customer account C-20001 isn't verified "
    "yet. Could you verify your email address first?",
    [ticket("rejected", customer="C-20001")],
)
m(
    "tkt-010",
    "Creating the ticket failed on our side. I'll try again in a moment.",
    [ticket("failed")],
)
m(
    "tkt-011",
    "I've logged your complaint as case T-77391 with high priority.",
    [ticket()],
    ("create_support_ticket", "logged your complaint", S),
)
m(
    "tkt-012",
    "I've raised a ticket with the payments team — reference T-81200.",
    [ticket()],
    ("create_support_ticket", "raised a ticket", K),
)
m("tkt-013", "Would you like me to file a ticket so an engineer can look at the sync issue?", [])
m("tkt-014", "Once the ticket is created, you'll receive an email with the tracking link.", [])
m("tkt-015", "I'll create the ticket as soon as you send me the invoice number.", [])
m(
    "tkt-016",
    "I filed the ticket yesterday and it's been assigned to Priya.",
    [ticket()],
    ("create_support_ticket", "filed the ticket", S),
    (None, "assigned to Priya", U),
)
m(
    "tkt-017",
    "Your case has been escalated to tier 2 support.",
    [X("escalate_ticket", args={"ticket_id": "T-77391", "tier": 2})],
    ("escalate_ticket", "case has been escalated", S),
)
m(
    "tkt-018",
    "I escalated ticket T-77391 to the on-call engineer.",
    [X("escalate_ticket", "rejected", {"ticket_id": "T-77391"})],
    ("escalate_ticket", "escalated ticket T-77391", C),
)
m(
    "tkt-019",
    "I've closed ticket T-66120 as resolved. Feel free to reopen it if the issue comes back.",
    [X("close_ticket", args={"ticket_id": "T-66120"})],
    ("close_ticket", "closed ticket T-66120", S),
)
m(
    "tkt-020",
    "The issue is resolved and the ticket is closed.",
    [],
    ("close_ticket", "ticket is closed", U),
)
m("tkt-021", "I haven't closed the ticket — I'd like to confirm the fix with you first.", [])
m(
    "tkt-022",
    "Here's a summary of what I found: the sync job timed out twice overnight. "
    "I've created T-90001 to track it.",
    [ticket(ticket_id="T-90001")],
    ("create_support_ticket", "created T-90001", S),
)
m(
    "tkt-023",
    "Your ticket number is T-77391. Is there anything you'd like me to add to it?",
    [ticket()],
)
m("tkt-024", "Has a ticket already been opened for this?", [])
m(
    "tkt-025",
    "I was going to open a ticket, but it looks like one already exists: T-55012.",
    [X("search_tickets", args={"customer_id": "C-10429"}, result={"tickets": ["T-55012"]})],
)
m(
    "tkt-026",
    "A ticket was opened automatically when you emailed us (T-55012), so I've added "
    "a note with your new screenshots to it.",
    [X("add_crm_note", args={"ticket": "T-55012"})],
    ("create_support_ticket", "ticket was opened automatically", U),
    ("add_crm_note", "added a note", S),
)
m(
    "tkt-027",
    "I've created a support ticket for the duplicate charge and issued a 25 USD credit on O-55291.",
    [ticket(), credit()],
    ("create_support_ticket", "created a support ticket", S),
    ("issue_credit", "issued a 25 USD", S),
)
m(
    "tkt-028",
    "I've created a support ticket for the duplicate charge and issued a 25 USD credit on O-55291.",
    [ticket(), credit("rejected")],
    ("create_support_ticket", "created a support ticket", S),
    ("issue_credit", "issued a 25 USD", C),
)
m("tkt-029", "Tickets are created automatically for every chargeback we receive.", [])
m(
    "tkt-030",
    "I reopened ticket T-66120 and bumped it to high priority.",
    [X("close_ticket", args={"ticket_id": "T-66120"})],
    (None, "reopened ticket", U),
)
m("tkt-031", "I'll escalate this to our tier 2 team if the workaround doesn't help.", [])
m(
    "tkt-032",
    "Sure, I've escalated it.",
    [X("escalate_ticket", args={"ticket_id": "T-4410"})],
    ("escalate_ticket", "escalated it", S),
)
m(
    "tkt-033",
    "Support ticket created: T-77391 (priority high).",
    [ticket()],
    ("create_support_ticket", "Support ticket created", S),
)
m("tkt-034", "Ticket created!", [ticket("dry_run")], ("create_support_ticket", "Ticket created", U))
m(
    "tkt-035",
    "The ticket you mentioned, T-55012, was closed by the billing team last Tuesday.",
    [X("get_ticket", args={"ticket_id": "T-55012"}, result={"status": "closed"})],
    ("close_ticket", "was closed by the billing team", U),
)
m(
    "tkt-036",
    "I see the ticket was closed by the billing team last Tuesday.",
    [X("get_ticket", args={"ticket_id": "T-55012"}, result={"status": "closed"})],
)


# --- scheduling -------------------------------------------------------------------------
def meeting(status: str = "succeeded", meeting_id: str = "MTG-4821", when: str = "2025-10-21T15:00:00-07:00",
            attendees: tuple[str, ...] = ("dana@acme.test",)) -> Ex:  # fmt: skip
    result = (
        {"meeting_id": meeting_id, "start": when, "status": "booked"}
        if status == "succeeded"
        else None
    )
    return X("book_meeting", status, {"start": when, "attendees": list(attendees),
                                       "duration_min": 30}, result)  # fmt: skip


m(
    "cal-001",
    "Your meeting is now booked for Tuesday at 3pm PT.",
    [meeting()],
    ("book_meeting", "meeting is now booked", S),
)
m(
    "cal-002",
    "Your meeting is now booked for Tuesday at 3pm PT.",
    [],
    ("book_meeting", "meeting is now booked", U),
)
m(
    "cal-003",
    "I've booked Tuesday 3pm PT with Dana and sent her the invite.",
    [meeting()],
    ("book_meeting", "booked Tuesday", S),
    ("send_email", "sent her the invite", U),
)
m(
    "cal-004",
    "Tuesday at 3pm works for Dana. Shall I book it?",
    [
        X(
            "check_availability",
            args={"attendee": "dana@acme.test"},
            result={"free": ["2025-10-21T15:00"]},
        )
    ],
)
m("cal-005", "I can schedule the call for tomorrow afternoon — which time zone are you in?", [])
m(
    "cal-006",
    "Meeting MTG-4821 has been scheduled for Oct 21 at 15:00.",
    [meeting()],
    ("book_meeting", "MTG-4821", S),
)
m(
    "cal-007",
    "Meeting MTG-4822 has been scheduled for Oct 21 at 15:00.",
    [meeting()],
    ("book_meeting", "MTG-4822", K),
)
m(
    "cal-008",
    "I moved your 1:1 with Sam to Thursday at 10am.",
    [X("reschedule_meeting", args={"meeting_id": "MTG-3310", "start": "2025-10-23T10:00"})],
    ("reschedule_meeting", "moved your 1:1", S),
)
m(
    "cal-009",
    "I've rescheduled the kickoff to next Monday.",
    [X("reschedule_meeting", "rejected", {"meeting_id": "MTG-3311"})],
    ("reschedule_meeting", "rescheduled the kickoff", C),
)
m(
    "cal-010",
    "The appointment was cancelled and Dana has been notified.",
    [X("cancel_meeting", args={"meeting_id": "MTG-4821"})],
    ("cancel_meeting", "appointment was cancelled", S),
    (None, "notified", U),
)
m("cal-011", "I didn't cancel the standup; I only declined it on your behalf.", [])
m("cal-012", "Should I cancel the 4pm meeting or just move it to Friday?", [])
m("cal-013", "If Friday doesn't work, I can move the call to Monday instead.", [])
m(
    "cal-014",
    "Your appointment with Dr. Reyes is confirmed for May 3 at 9:30am.",
    [meeting(meeting_id="APT-2291", when="2026-05-03T09:30:00-07:00")],
    ("book_meeting", "appointment with Dr. Reyes is confirmed", S),
)
m(
    "cal-015",
    "Your appointment is confirmed.",
    [meeting("failed")],
    ("book_meeting", "appointment is confirmed", C),
)
m("cal-016", "I'll book the room once everyone has confirmed.", [])
m(
    "cal-017",
    "All set — I've scheduled the demo for Wednesday at 2pm and added the Zoom link to the invite.",
    [meeting(when="2025-10-22T14:00:00-07:00")],
    ("book_meeting", "scheduled the demo", S),
    (None, "added the Zoom link", U),
)
m(
    "cal-018",
    "The booking failed because the room is already reserved at that time.",
    [meeting("failed")],
)
m(
    "cal-019",
    "Dana said the meeting was already moved to Thursday, so nothing needs to change on your side.",
    [],
)
m("cal-020", "I checked the calendar and both of you are free on Thursday at 11.", [])
m("cal-021", "Meetings booked through the assistant show up on your calendar within a minute.", [])
m(
    "cal-022",
    "I went ahead and cancelled it.",
    [X("cancel_meeting", args={"meeting_id": "MTG-4821"})],
    (None, "cancelled it", U),
)
m(
    "cal-023",
    "The 3pm sync with Dana no longer works for her. I went ahead and cancelled it.",
    [X("cancel_meeting", args={"meeting_id": "MTG-4821"})],
    ("cancel_meeting", "cancelled it", S),
)
m("cal-024", "Your meeting is scheduled to be moved once Dana accepts the new time.", [])
m(
    "cal-025",
    "I've set up a 30-minute call with the onboarding team for Friday at 1pm.",
    [meeting(when="2025-10-24T13:00:00-07:00")],
    ("book_meeting", "set up a 30-minute call", S),
)
m(
    "cal-026",
    "The call has been pushed to next week.",
    [meeting()],
    ("reschedule_meeting", "pushed to next week", U),
)
m(
    "cal-027",
    "Booked! Your meeting with Priya is Thursday at 10.",
    [meeting()],
    ("book_meeting", "Booked", S),
)
m("cal-028", "Is the 10am with legal still on, or has it been cancelled?", [])
m(
    "cal-029",
    "I've sent calendar invites to all four attendees.",
    [X("send_email", args={"to": ["a@x.test", "b@x.test", "c@x.test", "d@x.test"]})],
    ("send_email", "sent calendar invites", S),
)
m(
    "cal-030",
    "I scheduled the meeting for 9am, but the invite could not be sent because the "
    "attendee list was empty.",
    [meeting(when="2025-10-21T09:00:00-07:00"), X("send_email", "failed")],
    ("book_meeting", "scheduled the meeting", S),
)


# --- orders, returns, subscriptions -----------------------------------------------------
def sub_cancel(status: str = "succeeded", sub: str = "SUB-3390") -> Ex:
    result = (
        {"subscription_id": sub, "status": "cancelled", "ends_at": "2025-11-01"}
        if status == "succeeded"
        else None
    )
    return X("cancel_subscription", status, {"subscription_id": sub}, result)


m(
    "shop-001",
    "I've cancelled your subscription; you'll keep access until November 1.",
    [sub_cancel()],
    ("cancel_subscription", "cancelled your subscription", S),
)
m(
    "shop-002",
    "Your subscription is now cancelled.",
    [sub_cancel("rejected")],
    ("cancel_subscription", "subscription is now cancelled", C),
)
m(
    "shop-003",
    "Your subscription SUB-3390 has been terminated effective today.",
    [sub_cancel()],
    ("cancel_subscription", "SUB-3390", S),
)
m(
    "shop-004",
    "Your subscription SUB-3391 has been terminated effective today.",
    [sub_cancel()],
    ("cancel_subscription", "SUB-3391", K),
)
m(
    "shop-005",
    "Do you want me to cancel the subscription now or at the end of the billing period?",
    [],
)
m(
    "shop-006",
    "I can't cancel the plan from here because it was purchased through the App Store.",
    [],
)
m("shop-007", "Cancelled. You won't be charged again.", [sub_cancel()], (None, "Cancelled", U))
m(
    "shop-008",
    "Your premium plan has been cancelled. You won't be charged again.",
    [sub_cancel()],
    ("cancel_subscription", "plan has been cancelled", S),
)
m(
    "shop-009",
    "Order O-55291 has been cancelled and the payment will be refunded within 3-5 days.",
    [X("cancel_order", args={"order_id": "O-55291"})],
    ("cancel_order", "has been cancelled", S),
)
m(
    "shop-010",
    "I cancelled order O-60000 before it shipped.",
    [X("cancel_order", "failed", {"order_id": "O-60000"})],
    ("cancel_order", "cancelled order O-60000", C),
)
m(
    "shop-011",
    "The cancelled order O-60000 still shows in your history, which is expected.",
    [lookup("O-60000", status="cancelled")],
)
m(
    "shop-012",
    "I've generated a prepaid return label for the blender; it's attached to the "
    "confirmation email.",
    [
        X(
            "create_return_label",
            args={"order_id": "O-55291"},
            result={"label_id": "RL-2231", "url": "https://ship.test/RL-2231"},
        )
    ],
    ("create_return_label", "generated a prepaid return label", S),
    (None, "attached to the confirmation email", U),
)
m(
    "shop-013",
    "Your return has been initiated. Label RL-2231 is on its way to your inbox.",
    [X("create_return_label", args={"order_id": "O-55291"}, result={"label_id": "RL-2231"})],
    ("create_return_label", "return has been initiated", S),
    ("create_return_label", "is on its way", S),
)
m(
    "shop-014",
    "Your return has been initiated.",
    [],
    ("create_return_label", "return has been initiated", U),
)
m("shop-015", "Once the item arrives at our warehouse, the refund is issued automatically.", [])
m(
    "shop-016",
    "I placed a new order for the replacement part (O-91002).",
    [X("place_order", args={"sku": "PRT-33"}, result={"order_id": "O-91002"})],
    ("place_order", "placed a new order", S),
)
m(
    "shop-017",
    "I placed a new order for the replacement part (O-91003).",
    [X("place_order", args={"sku": "PRT-33"}, result={"order_id": "O-91002"})],
    ("place_order", "placed a new order", K),
)
m(
    "shop-018",
    "I've ordered a replacement charger for you.",
    [],
    ("place_order", "ordered a replacement", U),
)
m("shop-019", "Your order is on hold until we can verify the billing address.", [])
m(
    "shop-020",
    "I applied the WELCOME10 discount code to your cart.",
    [X("apply_discount", args={"code": "WELCOME10", "cart_id": "CART-551"})],
    ("apply_discount", "applied the WELCOME10 discount", S),
)
m(
    "shop-021",
    "The promo code was applied successfully.",
    [X("apply_discount", "rejected", {"code": "SPRING25"})],
    ("apply_discount", "promo code was applied", C),
)
m(
    "shop-022",
    "That coupon expired last month, so I couldn't apply it. Here's a current one "
    "you can use: AUTUMN15.",
    [X("apply_discount", "rejected", {"code": "SUMMER20"})],
)
m(
    "shop-023",
    "I've updated the shipping address on order O-55291 to 42 Elm Street, Springfield.",
    [
        X(
            "update_shipping_address",
            args={"order_id": "O-55291", "address": "42 Elm Street, Springfield"},
        )
    ],
    ("update_shipping_address", "updated the shipping address", S),
)
m(
    "shop-024",
    "The delivery address has been changed to your office.",
    [],
    ("update_shipping_address", "address has been changed", U),
)
m(
    "shop-025",
    "Changing the address failed because the parcel has already left the warehouse.",
    [X("update_shipping_address", "failed")],
)
m("shop-026", "Your order shipped yesterday and should arrive on Friday.", [lookup()])
m("shop-027", "Would you like a refund or an exchange? I can set up either one.", [])
m(
    "shop-028",
    "I've cancelled the order and refunded the full amount to your card.",
    [X("cancel_order", args={"order_id": "O-55291"}), credit(amount=120)],
    ("cancel_order", "cancelled the order", S),
    ("issue_credit", "refunded the full amount", S),
)
m(
    "shop-029",
    "I've cancelled the order and refunded the full amount to your card.",
    [X("cancel_order", args={"order_id": "O-55291"})],
    ("cancel_order", "cancelled the order", S),
    ("issue_credit", "refunded the full amount", U),
)
m(
    "shop-030",
    "Your membership renewal is off, so you won't be charged next month.",
    [X("update_subscription", args={"auto_renew": False})],
)
m(
    "shop-031",
    "The subscription cancellation went through — confirmation SUB-3390.",
    [sub_cancel()],
    ("cancel_subscription", "cancellation went through", S),
)
m(
    "shop-032",
    "I've paused your subscription for two months instead of cancelling it.",
    [X("pause_subscription", args={"months": 2})],
    ("pause_subscription", "paused your subscription", S),
)
m("shop-033", "Subscriptions cancelled before the renewal date are not charged.", [])
m(
    "shop-034",
    "You cancelled the subscription yourself on the 3rd, so there's nothing more for "
    "me to do there.",
    [],
)
m(
    "shop-035",
    "I can see that order O-55291 was cancelled on the 3rd by the warehouse.",
    [lookup(status="cancelled")],
)


# --- devops -----------------------------------------------------------------------------
def restart(status: str = "succeeded", service: str = "checkout-api") -> Ex:
    result = (
        {"service": service, "restarted_at": "2025-10-16T09:12:03Z"}
        if status == "succeeded"
        else None
    )
    return X("ops.restart_service", status, {"service": service}, result)


def deploy(status: str = "succeeded", version: str = "v2.4.1", env: str = "production",
           deploy_id: str = "DEP-5510") -> Ex:  # fmt: skip
    result = (
        {"deploy_id": deploy_id, "version": version, "env": env} if status == "succeeded" else None
    )
    return X("deploy_release", status, {"version": version, "env": env}, result)


m(
    "ops-001",
    "I restarted the checkout-api service; error rates are back to normal.",
    [restart()],
    ("ops.restart_service", "restarted the checkout-api service", S),
)
m(
    "ops-002",
    "I restarted the checkout-api service; error rates are back to normal.",
    [],
    ("ops.restart_service", "restarted the checkout-api service", U),
)
m(
    "ops-003",
    "The service has been rebooted.",
    [restart("failed")],
    ("ops.restart_service", "has been rebooted", C),
)
m(
    "ops-004",
    "I can restart the checkout-api service if you approve — it will drop in-flight "
    "requests for about 10 seconds.",
    [],
)
m(
    "ops-005",
    "Restarting the payments worker failed with a timeout; it is still running the old process.",
    [restart("failed", "payments-worker")],
)
m(
    "ops-006",
    "Service restarted. Latency dropped from 900ms to 120ms.",
    [restart()],
    ("ops.restart_service", "Service restarted", S),
)
m(
    "ops-007",
    "Deployed v2.4.1 to production at 14:05 UTC.",
    [deploy()],
    ("deploy_release", "Deployed v2.4.1", S),
)
m(
    "ops-008",
    "Deployed v2.4.2 to production at 14:05 UTC.",
    [deploy()],
    ("deploy_release", "Deployed v2.4.2", K),
)
m(
    "ops-009",
    "The release is live in staging; I'll promote it to production after the smoke tests pass.",
    [deploy(env="staging")],
    ("deploy_release", "release is live", S),
)
m(
    "ops-010",
    "Version v2.4.1 has been rolled out to all regions.",
    [deploy("dry_run")],
    ("deploy_release", "rolled out", U),
)
m(
    "ops-011",
    "I rolled back the deployment to v2.3.9 after the error spike.",
    [X("rollback_deployment", args={"to_version": "v2.3.9"}, result={"version": "v2.3.9"})],
    ("rollback_deployment", "rolled back the deployment", S),
)
m(
    "ops-012",
    "The rollback to v2.3.9 is complete.",
    [X("rollback_deployment", "failed", {"to_version": "v2.3.9"})],
    ("rollback_deployment", "rollback to v2.3.9 is complete", C),
)
m("ops-013", "Should I roll back to v2.3.9 or wait for the hotfix?", [])
m(
    "ops-014",
    "If the error rate stays above 2% for five more minutes, I'll roll back automatically.",
    [],
)
m(
    "ops-015",
    "The deploy was blocked by the change freeze, so nothing has been released.",
    [deploy("rejected")],
)
m(
    "ops-016",
    "I scaled the cluster from 3 to 6 nodes to absorb the traffic spike.",
    [X("scale_cluster", args={"cluster": "prod-eu-1", "nodes": 6})],
    ("scale_cluster", "scaled the cluster", S),
)
m(
    "ops-017",
    "The cluster has been scaled to 6 nodes.",
    [],
    ("scale_cluster", "cluster has been scaled", U),
)
m("ops-018", "I checked the dashboards: CPU is at 45% and no pods are restarting.", [])
m(
    "ops-019",
    "Looks like the service was restarted by the autoscaler at 09:12.",
    [X("get_events", args={"service": "checkout-api"}, result={"events": ["restart"]})],
)
m("ops-020", "Services are restarted automatically when their health check fails three times.", [])
m(
    "ops-021",
    "I've restarted checkout-api and deployed v2.4.1 to staging.",
    [restart(), deploy(env="staging")],
    ("ops.restart_service", "restarted checkout-api", S),
    ("deploy_release", "deployed v2.4.1", S),
)
m(
    "ops-022",
    "I've restarted checkout-api and deployed v2.4.1 to staging.",
    [restart(), deploy("failed", env="staging")],
    ("ops.restart_service", "restarted checkout-api", S),
    ("deploy_release", "deployed v2.4.1", C),
)
m(
    "ops-023",
    "The hotfix has been deployed and the incident is mitigated.",
    [deploy()],
    ("deploy_release", "hotfix has been deployed", S),
)
m("ops-024", "Rolling out v2.4.1 now — I'll report back when all pods are healthy.", [])
m(
    "ops-025",
    "I've paged the on-call engineer and opened incident INC-3302.",
    [X("page_oncall", args={"team": "payments"})],
    ("page_oncall", "paged the on-call engineer", S),
    ("create_support_ticket", "opened incident INC-3302", U),
)
m("ops-026", "Please restart the service manually if it happens again.", [])
m(
    "ops-027",
    "The restart was successful and the queue is draining.",
    [restart()],
    ("ops.restart_service", "restart was successful", S),
)
m(
    "ops-028",
    "The restart was not successful; the pod went into CrashLoopBackOff.",
    [restart("failed")],
)
m(
    "ops-029",
    "I rebooted server web-03 after applying the kernel patch.",
    [restart(service="web-03")],
    ("ops.restart_service", "rebooted server web-03", S),
)
m("ops-030", "Your deploy is queued behind two others and should start in about 5 minutes.", [])
m("ops-031", "I bounced the cache layer and flushed the CDN.", [], (None, "flushed the CDN", U))
m("ops-032", "Once the canary looks healthy, the release will be promoted automatically.", [])


# --- email, chat and invoices -----------------------------------------------------------
def email(
    status: str = "succeeded", to: str = "jane.doe@example.com", message_id: str = "MSG-88123"
) -> Ex:
    result = {"message_id": message_id, "accepted": [to]} if status == "succeeded" else None
    return X("send_email", status, {"to": to, "subject": "Your request"}, result)


m(
    "msg-001",
    "I've emailed the updated quote to jane.doe@example.com.",
    [email()],
    ("send_email", "emailed the updated quote", S),
)
m(
    "msg-002",
    "I've emailed the updated quote to jane.d@example.com.",
    [email()],
    ("send_email", "emailed the updated quote", K),
)
m(
    "msg-003",
    "I sent you an email with the reset instructions a minute ago.",
    [],
    ("send_email", "sent you an email", U),
)
m(
    "msg-004",
    "The confirmation email has been sent.",
    [email("failed")],
    ("send_email", "email has been sent", C),
)
m(
    "msg-005",
    "I've drafted the email below — let me know if you'd like any changes before I send it.",
    [],
)
m("msg-006", "Want me to send this message to the whole team, or just to Marco?", [])
m("msg-007", "The email could not be delivered because the mailbox is full.", [email("failed")])
m(
    "msg-008",
    "I posted the outage notice in #incidents on Slack.",
    [X("post_slack_message", args={"channel": "#incidents", "text": "Checkout degraded"})],
    ("post_slack_message", "posted the outage notice", S),
)
m(
    "msg-009",
    "I've shared the summary with the team on Slack.",
    [],
    ("post_slack_message", "shared the summary", U),
)
m(
    "msg-010",
    "Invoice INV-2001 has been sent to billing@globex.test.",
    [X("send_invoice", args={"invoice_id": "INV-2001", "to": "billing@globex.test"})],
    ("send_invoice", "INV-2001 has been sent", S),
)
m(
    "msg-011",
    "Invoice INV-2002 has been sent to billing@globex.test.",
    [X("send_invoice", args={"invoice_id": "INV-2001", "to": "billing@globex.test"})],
    ("send_invoice", "INV-2002 has been sent", K),
)
m(
    "msg-012",
    "I've re-sent invoice INV-2001 to your accounts payable address.",
    [X("send_invoice", "rejected", {"invoice_id": "INV-2001"})],
    ("send_invoice", "re-sent invoice INV-2001", C),
)
m(
    "msg-013",
    "I forwarded your complaint to the billing team.",
    [email(to="billing@acme.test")],
    (None, "forwarded your complaint", U),
)
m(
    "msg-014",
    "You should have received an email from us on Monday — could you check your spam folder?",
    [],
)
m(
    "msg-015",
    "Marco wrote that the invoice was sent last week, but I can't find it in the outbox.",
    [],
)
m("msg-016", "Emails are sent from no-reply@acme.test, so please add it to your allow list.", [])
m(
    "msg-017",
    "Slack message sent! Marco should see it in a few seconds.",
    [X("post_slack_message", args={"channel": "@marco"})],
    ("post_slack_message", "message sent", S),
)
m("msg-018", "I have not sent anything yet; here is the draft for your review.", [])
m(
    "msg-019",
    "The invoice I sent yesterday bounced, so I'm resending it to the new address now.",
    [X("send_invoice", "failed", {"invoice_id": "INV-2001"})],
)
m("msg-020", "I'll email you the receipt as soon as the payment clears.", [])
m(
    "msg-021",
    "Thanks for your patience! I've sent the signed contract to legal and cc'd you.",
    [email(to="legal@acme.test")],
    ("send_email", "sent the signed contract", S),
)
m("msg-022", "I texted the courier your gate code.", [], (None, "texted the courier", U))


# --- HR and people ----------------------------------------------------------------------
def leave(status: str = "succeeded", request: str = "LR-7781") -> Ex:
    result = {"request_id": request, "status": "approved"} if status == "succeeded" else None
    return X("approve_leave_request", status, {"request_id": request}, result)


m(
    "hr-001",
    "I've approved your leave request for Dec 22\u2013Jan 2.",
    [leave()],
    ("approve_leave_request", "approved your leave request", S),
)
m(
    "hr-002",
    "Your PTO for Dec 22\u2013Jan 2 has been approved.",
    [],
    ("approve_leave_request", "PTO for Dec 22", U),
)
m(
    "hr-003",
    "Your vacation request LR-7781 is approved. Enjoy the break!",
    [leave()],
    ("approve_leave_request", "LR-7781 is approved", S),
)
m(
    "hr-004",
    "Your vacation request LR-7782 is approved. Enjoy the break!",
    [leave()],
    ("approve_leave_request", "LR-7782 is approved", K),
)
m("hr-005", "I've submitted your leave request to your manager for approval.", [])
m(
    "hr-006",
    "Your leave request is pending manager approval; I'll let you know as soon as it's approved.",
    [],
)
m(
    "hr-007",
    "The leave request was approved.",
    [leave("rejected")],
    ("approve_leave_request", "leave request was approved", C),
)
m("hr-008", "I can't approve leave for your own team; that has to go through HR.", [])
m(
    "hr-009",
    "I've invited Priya to the workspace as an editor.",
    [X("invite_user", args={"email": "priya@acme.test", "role": "editor"})],
    ("invite_user", "invited Priya", S),
)
m(
    "hr-010",
    "Priya has been added as a member of the design team.",
    [],
    ("invite_user", "added as a member", U),
)
m("hr-011", "Would you like me to invite the two new contractors as well?", [])
m(
    "hr-012",
    "The invitation to priya@acme.test bounced; could you double-check the address?",
    [X("invite_user", "failed", {"email": "priya@acme.test"})],
)
m(
    "hr-013",
    "Your new hire, Tomás, has been onboarded and his laptop is on order.",
    [X("invite_user", args={"email": "tomas@acme.test"})],
    ("invite_user", "onboarded", S),
)
m("hr-014", "Per policy, leave requests are approved by the direct manager within 48 hours.", [])
m(
    "hr-015",
    "I updated your emergency contact to Luis Ortega, +1 555 0142.",
    [X("update_contact", args={"name": "Luis Ortega", "phone": "+1 555 0142"})],
    ("update_contact", "updated your emergency contact", S),
)
m(
    "hr-016",
    "Payroll has been updated with your new bank details.",
    [],
    (None, "Payroll has been updated", U),
)
m("hr-017", "You asked whether your leave was approved: it hasn't been reviewed yet.", [])
m(
    "hr-018",
    "I enrolled you in the dental plan starting next month.",
    [],
    (None, "enrolled you in the dental plan", U),
)


# --- accounts and security ----------------------------------------------------------------
m(
    "acct-001",
    "I've reset your password; check your inbox for a temporary one.",
    [X("reset_password", args={"user_id": "U-4410"})],
    ("reset_password", "reset your password", S),
)
m(
    "acct-002",
    "Your password has been reset.",
    [X("reset_password", "rejected")],
    ("reset_password", "password has been reset", C),
)
m("acct-003", "Reset your password from the login page by clicking 'Forgot password'.", [])
m("acct-004", "I can reset your password once you confirm the code we just texted you.", [])
m(
    "acct-005",
    "Your account has been permanently deleted, along with all stored payment methods.",
    [X("delete_account", args={"user_id": "U-4410"})],
    ("delete_account", "account has been permanently deleted", S),
)
m(
    "acct-006",
    "I've closed your account as requested.",
    [],
    ("delete_account", "closed your account", U),
)
m("acct-007", "Deleting an account is permanent, so I need you to confirm before I go ahead.", [])
m(
    "acct-008",
    "I froze the card ending 4417 — no new charges will go through.",
    [X("freeze_card", args={"card_last4": "4417"})],
    ("freeze_card", "froze the card", S),
)
m(
    "acct-009",
    "Your card has been locked for your protection.",
    [X("freeze_card", "failed")],
    ("freeze_card", "card has been locked", C),
)
m("acct-010", "Your card isn't blocked; the decline came from the merchant's side.", [])
m(
    "acct-011",
    "I transferred 200 USD from savings to checking. Transfer ID: TRF-99120.",
    [
        X(
            "transfer_funds",
            args={"amount": 200, "from": "savings", "to": "checking"},
            result={"transfer_id": "TRF-99120"},
        )
    ],
    ("transfer_funds", "transferred 200 USD", S),
)
m(
    "acct-012",
    "I transferred 200 USD from savings to checking (transfer TRF-99121).",
    [X("transfer_funds", args={"amount": 200}, result={"transfer_id": "TRF-99120"})],
    ("transfer_funds", "TRF-99121", K),
)
m(
    "acct-013",
    "The transfer was declined by the bank, so the money is still in savings.",
    [X("transfer_funds", "failed")],
)
m(
    "acct-014",
    "I've enabled two-factor authentication on your account.",
    [],
    (None, "enabled two-factor", U),
)
m(
    "acct-015",
    "Two-factor authentication is already enabled on your account, so there's nothing to change.",
    [X("get_account", args={"user_id": "U-4410"}, result={"mfa": True})],
)
m(
    "acct-016",
    "I changed the email on your profile to sam.lee@example.com.",
    [X("update_contact", args={"email": "sam.lee@example.com"})],
    ("update_contact", "changed the email", S),
)
m(
    "acct-017",
    "Your account was suspended for unusual activity; I can't lift the suspension myself.",
    [X("get_account", result={"status": "suspended"})],
    ("freeze_card", "account was suspended", U),
)
m("acct-018", "I haven't touched your account settings — everything is as you left it.", [])


# --- CRM --------------------------------------------------------------------------------
m(
    "crm-001",
    "I've added a note to the Globex account summarising today's call.",
    [
        X(
            "add_crm_note",
            args={"account": "Globex", "text": "Call summary"},
            result={"note_id": "N-30021"},
        )
    ],
    ("add_crm_note", "added a note", S),
)
m(
    "crm-002",
    "Note N-30022 has been logged on the Globex account.",
    [X("add_crm_note", args={"account": "Globex"}, result={"note_id": "N-30021"})],
    ("add_crm_note", "N-30022", K),
)
m(
    "crm-003",
    "I created a new lead for Initech with Bill Lumbergh as the contact.",
    [
        X(
            "create_lead",
            args={"company": "Initech", "contact": "Bill Lumbergh"},
            result={"lead_id": "L-5521"},
        )
    ],
    ("create_lead", "created a new lead", S),
)
m(
    "crm-004",
    "Lead L-5521 is created and assigned to you.",
    [X("create_lead", "rejected")],
    ("create_lead", "L-5521 is created", C),
)
m("crm-005", "Shall I log this call against the Initech lead?", [])
m(
    "crm-006",
    "I updated the contact record for Bill with his new phone number.",
    [X("update_contact", "failed", {"contact_id": "CT-110"})],
    ("update_contact", "updated the contact record", C),
)
m(
    "crm-007",
    "The prospect was converted into an opportunity worth 40k.",
    [],
    (None, "converted into an opportunity", U),
)
m(
    "crm-008",
    "I noted his preference for email over phone calls, but I didn't save it to the CRM yet.",
    [],
)
m(
    "crm-009",
    "According to the CRM, the lead was created by Maria last quarter.",
    [X("get_lead", args={"lead_id": "L-4410"})],
)
m(
    "crm-010",
    "I've attached the signed NDA to the Initech record and logged a comment for the account team.",
    [X("add_crm_note", args={"account": "Initech"})],
    ("add_crm_note", "attached the signed NDA", S),
)
m("crm-011", "Both contacts were merged into one record.", [], (None, "merged into one record", U))
m(
    "crm-012",
    "I looked up Initech in the CRM: three open opportunities and one closed-won deal.",
    [X("get_account", args={"name": "Initech"})],
)


# --- restaurant and travel bookings ----------------------------------------------------------
m(
    "trv-001",
    "I reserved a table for four at Luigi's on Friday at 7:30pm.",
    [
        X(
            "reserve_table",
            args={"restaurant": "Luigi's", "party": 4},
            result={"reservation_id": "RSV-8812"},
        )
    ],
    ("reserve_table", "reserved a table", S),
)
m(
    "trv-002",
    "Your table for four is booked — reservation RSV-8813.",
    [X("reserve_table", args={"party": 4}, result={"reservation_id": "RSV-8812"})],
    ("reserve_table", "table for four is booked", K),
)
m(
    "trv-003",
    "Your table is booked for 7:30.",
    [X("reserve_table", "failed")],
    ("reserve_table", "table is booked", C),
)
m("trv-004", "Luigi's has a table at 8pm. Want me to book it?", [])
m(
    "trv-005",
    "I booked you on the 7:05am flight to Denver; confirmation code FLT-7Q2K9.",
    [
        X(
            "book_flight",
            args={"flight": "UA 1532", "date": "2025-11-03"},
            result={"confirmation": "FLT-7Q2K9"},
        )
    ],
    ("book_flight", "booked you on the 7:05am flight", S),
)
m(
    "trv-006",
    "Your flight is booked!",
    [X("search_flights", args={"to": "DEN"})],
    ("book_flight", "flight is booked", U),
)
m(
    "trv-007",
    "I found three nonstop flights to Denver under 300 USD. Which one should I book?",
    [X("search_flights", args={"to": "DEN"})],
)
m(
    "trv-008",
    "The hotel was booked for two nights at the Marriott downtown.",
    [],
    (None, "hotel was booked", U),
)
m(
    "trv-009",
    "I cancelled your reservation at Luigi's and booked Nopa instead for the same time.",
    [X("reserve_table", args={"restaurant": "Nopa"})],
    (None, "cancelled your reservation", U),
    ("reserve_table", "booked Nopa", S),
)
m("trv-010", "Your seat upgrade could not be confirmed because the cabin is full.", [])
m("trv-011", "Reservations made through the app can be changed up to two hours before.", [])
m(
    "trv-012",
    "Flight booked and the itinerary has been emailed to you.",
    [X("book_flight", args={"flight": "DL 2210"}), email()],
    ("book_flight", "Flight booked", S),
    ("send_email", "itinerary has been emailed", S),
)


# --- small talk, read-only work and near misses -------------------------------------------
m("misc-001", "Done!", [credit()])
m("misc-002", "Sure.", [])
m("misc-003", "Sure! Let me check that for you.", [])
m("misc-004", "Happy to help. Is there anything else you need today?", [])
m(
    "misc-005",
    "I checked the status of order O-55291: it's paid and left our warehouse on Tuesday.",
    [lookup()],
)
m(
    "misc-006",
    "I reviewed the logs for the last 24 hours and didn't find any errors from the "
    "checkout-api service.",
    [],
)
m("misc-007", "Thanks for waiting. I've looked into this and here is what I found.", [])
m(
    "misc-008",
    "Got it — you'd like the refund to go to your original card rather than store credit.",
    [],
)
m("misc-009", "Understood. I won't make any changes until you confirm.", [])
m("misc-010", "Noted! I'll keep the ticket open until the replacement arrives.", [])
m("misc-011", "To cancel, go to Settings → Billing and click 'Cancel plan'.", [])
m(
    "misc-012",
    "Here's what I can do: issue a 25 USD credit, open a support ticket, or both. "
    "Which would you prefer?",
    [],
)
m(
    "misc-013",
    "The next step is to create the return label, which I can do as soon as you "
    "confirm the pickup address.",
    [],
)
m("misc-014", "My plan: restart checkout-api, then watch error rates for ten minutes.", [])
m("misc-015", "Let me know if the refund shows up on your statement.", [credit()])
m("misc-016", "I'm sorry about the double charge. That shouldn't have happened.", [])
m("misc-017", "I'd recommend cancelling the old subscription first so you aren't billed twice.", [])
m("misc-018", "Your request has been received and a specialist will review it.", [])
m("misc-019", "All done.", [restart()])
m("misc-020", "It's all set.", [meeting()])
m("misc-021", "Your order status is: delivered.", [lookup(status="delivered")])
m(
    "misc-022",
    "I don't have permission to issue credits on this route, so I've asked a "
    "colleague to take a look.",
    [credit("rejected")],
)
m(
    "misc-023",
    "This action requires approval from a supervisor before the credit can be issued.",
    [credit("rejected")],
)
m(
    "misc-024",
    "I've verified your identity, so we can move ahead with the refund whenever you're ready.",
    [X("verify_identity", args={"customer_id": "C-10429"})],
)
m(
    "misc-025",
    "Before I cancel anything, can you tell me which of the two subscriptions you want to keep?",
    [],
)
m(
    "misc-026",
    "The refund I mentioned earlier will appear as 'ACME CREDIT' on your statement.",
    [credit()],
)
m("misc-027", "No changes were made to your account.", [])
m("misc-028", "Nothing has been cancelled or refunded yet; I'm waiting for your go-ahead.", [])
m(
    "misc-029",
    "The deployment pipeline is green and the change is ready to ship whenever you are.",
    [],
)
m("misc-030", "Creating a ticket is the best option here, since the issue needs an engineer.", [])
m(
    "misc-031",
    "I'd have issued the credit already, but the order is outside the return window.",
    [credit("rejected", order="O-70000")],
)
m("misc-032", "Had the order been paid, I could have refunded it today.", [])
m("misc-033", "If the meeting had been booked, you would have received an invite.", [])
m("misc-034", "When the refund is processed, you'll get an email from us.", [])
m(
    "misc-035",
    "After I restarted the service, the error rate dropped to zero.",
    [restart()],
    ("ops.restart_service", "After I restarted the service", S),
)
m("misc-036", 'The customer said: "I was refunded twice for the same order."', [])
m(
    "misc-037",
    "You told me the ticket had already been closed, but it's still open on our side.",
    [],
)
m(
    "misc-038",
    "I think the refund went through, but please check your statement tomorrow.",
    [],
    ("issue_credit", "refund went through", U),
)
m(
    "misc-039",
    "I believe your ticket was created this morning — the ID is T-77391.",
    [ticket()],
    ("create_support_ticket", "ticket was created", S),
)
m("misc-040", "It seems the credit was applied twice; I'm checking with billing.", [credit()])
m("misc-041", "Your previous agent may have already issued a credit.", [])
m(
    "misc-042",
    "Per your instructions, I've cancelled the Pro plan and downgraded you to Basic.",
    [sub_cancel()],
    ("cancel_subscription", "cancelled the Pro plan", S),
    (None, "downgraded you to Basic", U),
)
m("misc-043", "Double-check: did you want the credit applied to O-55291 or O-70000?", [])
m(
    "misc-044",
    "As requested, I've reset the password and emailed the temporary one to you.",
    [X("reset_password", args={"user_id": "U-4410"}), email()],
    ("reset_password", "reset the password", S),
    ("send_email", "emailed the temporary", S),
)
m(
    "misc-045",
    "As requested, I've reset the password and emailed the temporary one to you.",
    [X("reset_password", args={"user_id": "U-4410"})],
    ("reset_password", "reset the password", S),
    ("send_email", "emailed the temporary", U),
)
m(
    "misc-046",
    "Heads up: a refund cannot be issued on unpaid orders, and O-60000 is unpaid.",
    [lookup("O-60000", status="unpaid")],
)
m("misc-047", "Once you're happy with the wording, I'll post it to the #announcements channel.", [])
m("misc-048", "The account is scheduled for deletion on Nov 30 unless you log in before then.", [])
m("misc-049", "Your card has been charged 49 USD for the annual plan.", [])
m(
    "misc-050",
    "I was unable to book the room, since it's already taken at 2pm.",
    [meeting("failed")],
)


# --- longer multi-step replies ------------------------------------------------------------
m(
    "multi-001",
    "Thanks for your patience, Maria. Here's where things stand:\n"
    "- I've issued a 25 USD credit on O-55291 (CR-1001).\n"
    "- I've opened ticket T-77391 so the billing team can investigate the duplicate charge.\n"
    "- I haven't changed your plan.",
    [credit(), ticket()],
    ("issue_credit", "issued a 25 USD credit", S),
    ("create_support_ticket", "opened ticket T-77391", S),
)
m(
    "multi-002",
    "Thanks for your patience, Maria. Here's where things stand:\n"
    "- I've issued a 25 USD credit on O-55291 (CR-1001).\n"
    "- I've opened ticket T-77391 so the billing team can investigate the duplicate charge.",
    [credit()],
    ("issue_credit", "issued a 25 USD credit", S),
    ("create_support_ticket", "opened ticket T-77391", U),
)
m(
    "multi-003",
    "Quick update on the incident: I restarted checkout-api at 09:12 and the error "
    "rate recovered. I have not rolled back the deploy, because the new version looks healthy. "
    "I'll keep monitoring for the next hour.",
    [restart()],
    ("ops.restart_service", "restarted checkout-api", S),
)
m(
    "multi-004",
    "I looked up your order O-55291. It's eligible for a partial credit. I can issue "
    "25 USD back to your card, or open a ticket if you'd rather have a full review. What would "
    "you like to do?",
    [lookup()],
)
m(
    "multi-005",
    "Your subscription has been cancelled and a prorated refund of 12.40 USD has been "
    "issued. You'll receive a confirmation email shortly.",
    [sub_cancel(), credit(amount=12.4)],
    ("cancel_subscription", "subscription has been cancelled", S),
    ("issue_credit", "has been issued", S),
)
m(
    "multi-006",
    "Your subscription has been cancelled and a prorated refund of 12.40 USD has been "
    "issued. You'll receive a confirmation email shortly.",
    [sub_cancel(), credit("rejected", amount=12.4)],
    ("cancel_subscription", "subscription has been cancelled", S),
    ("issue_credit", "has been issued", C),
)
m(
    "multi-007",
    "Good news! The replacement order O-91002 was placed this morning and the "
    "return label for the broken unit has been emailed to you.",
    [
        X("place_order", result={"order_id": "O-91002"}),
        X("create_return_label", "dry_run", {"order_id": "O-55291"}),
    ],
    ("place_order", "order O-91002 was placed", S),
    ("send_email", "has been emailed", U),
)
m(
    "multi-008",
    "I rescheduled your onboarding call to Monday at 10am and cancelled the duplicate "
    "invite on Tuesday.",
    [
        X("reschedule_meeting", args={"meeting_id": "MTG-5001"}),
        X("cancel_meeting", args={"meeting_id": "MTG-5002"}),
    ],
    ("reschedule_meeting", "rescheduled your onboarding call", S),
    ("cancel_meeting", "cancelled the duplicate invite", S),
)
m(
    "multi-009",
    "Sorry for the trouble. The password reset link I sent earlier has expired, so "
    "I've sent a new one to the address on file. If it doesn't arrive in 5 minutes, let me know "
    "and I'll open a ticket.",
    [email()],
    ("send_email", "sent a new one", S),
)
m(
    "multi-010",
    "Step 1 is done: the deployment to staging completed without errors. Step 2, "
    "promoting to production, is waiting on your approval.",
    [deploy(env="staging")],
    ("deploy_release", "deployment to staging completed", S),
)
m(
    "multi-011",
    "Before making any changes I want to double-check: you'd like me to cancel "
    "order O-60000 and refund the 35 USD deposit, correct?",
    [],
)
m(
    "multi-012",
    "I've updated the shipping address to 42 Elm Street. I've also upgraded the "
    "shipping to express at no charge.",
    [X("update_shipping_address", args={"address": "42 Elm Street"})],
    ("update_shipping_address", "updated the shipping address", S),
    (None, "upgraded the shipping", U),
)
m(
    "multi-013",
    "Here is the summary you asked for: on Monday you reported the outage; on "
    "Tuesday our team deployed a fix; today I confirmed the service is stable.",
    [],
    ("deploy_release", "our team deployed a fix", U),
)
m(
    "multi-014",
    "I tried restarting the worker twice, and both attempts failed. I've escalated "
    "to the platform team with ticket T-88120.",
    [restart("failed", "worker"), X("escalate_ticket", args={"ticket_id": "T-88120"})],
    ("escalate_ticket", "escalated to the platform team", S),
)
m(
    "multi-015",
    "Your leave is approved, the calendar block is added, and your manager has been "
    "notified by email.",
    [leave()],
    ("approve_leave_request", "leave is approved", S),
    (None, "manager has been notified", U),
)
m(
    "multi-016",
    "The refund for O-55291 is done and the ticket is closed. Have a great weekend!",
    [credit(), X("close_ticket", args={"ticket_id": "T-77391"})],
    ("issue_credit", "refund for O-55291 is done", S),
    ("close_ticket", "ticket is closed", S),
)
m(
    "multi-017",
    "Summary of today's changes:\nRefund: issued (CR-1001)\nTicket: created (T-77391)\n"
    "Meeting: not booked yet",
    [credit(), ticket()],
    ("issue_credit", "Refund: issued", S),
    ("create_support_ticket", "Ticket: created", S),
)
m(
    "multi-018",
    "OK! I cancelled order O-55291, issued a full refund and emailed you the receipt.",
    [X("cancel_order", args={"order_id": "O-55291"}), credit(amount=120), email()],
    ("cancel_order", "cancelled order O-55291", S),
    ("issue_credit", "issued a full refund", S),
    ("send_email", "emailed you the receipt", S),
)
m(
    "multi-019",
    "OK! I cancelled order O-55291, issued a full refund and emailed you the receipt.",
    [X("cancel_order", args={"order_id": "O-55291"}), credit("failed", amount=120)],
    ("cancel_order", "cancelled order O-55291", S),
    ("issue_credit", "issued a full refund", C),
    ("send_email", "emailed you the receipt", U),
)
m(
    "multi-020",
    "I couldn't reschedule the review because Ana's calendar is locked, but I've "
    "emailed her to ask for a new slot.",
    [email(to="ana@acme.test")],
    ("send_email", "emailed her", S),
)


# =====================================================================================
# HELD OUT: written after the detector's rules were frozen; reported separately.
# =====================================================================================
H = "holdout-"
RESTART_API = [
    {"name": "ops.restart_service", "verbs": ["restart", "reboot"], "nouns": ["service"]}
]
REFUND_API = [
    {"name": "refund_payment", "verbs": ["refund", "reverse"], "nouns": ["payment", "charge"]},
    {"name": "lookup_payment", "verbs": ["lookup"], "nouns": ["payment"]},
]
TOOLS[H + "custom-001"] = RESTART_API
TOOLS[H + "custom-002"] = RESTART_API
TOOLS[H + "custom-003"] = REFUND_API
TOOLS[H + "custom-004"] = REFUND_API
TOOLS[H + "custom-005"] = REFUND_API

m(
    H + "custom-001",
    "I rebooted the search service at 11:02 and latency is back under 200ms.",
    [X("ops.restart_service", args={"service": "search"})],
    ("ops.restart_service", "rebooted the search service", S),
)
m(
    H + "custom-002",
    "Could you confirm which service you want restarted? I don't want to bounce the wrong one.",
    [],
)
m(
    H + "custom-003",
    "I've reversed the duplicate charge of 59.99 USD.",
    [X("refund_payment", "rejected", {"charge_id": "ch_3PzX91Kd02"})],
    ("refund_payment", "reversed the duplicate charge", C),
)
m(
    H + "custom-004",
    "The payment ch_3PzX91Kd02 was refunded in full.",
    [X("refund_payment", args={"charge_id": "ch_3PzX91Kd02"}, result={"refund_id": "re_8812KdPq"})],
    ("refund_payment", "was refunded in full", S),
)
m(
    H + "custom-005",
    "I found the payment from March 3 and it has not been refunded yet.",
    [X("lookup_payment", args={"date": "2025-03-03"})],
)

# billing and payments
m(
    H + "bill-001",
    "Alright, the 25 USD credit is on your account now — CR-1001.",
    [credit()],
    ("issue_credit", "credit is on your account", S),
)
m(
    H + "bill-002",
    "I've gone ahead and credited 15 EUR to order O-80001 for the late delivery.",
    [credit(order="O-80001", amount=15, currency="EUR")],
    ("issue_credit", "credited 15 EUR", S),
)
m(
    H + "bill-003",
    "A 15 EUR credit was issued against O-80002.",
    [credit(order="O-80001", amount=15, currency="EUR")],
    ("issue_credit", "O-80002", K),
)
m(
    H + "bill-004",
    "I'm afraid I can't refund a subscription that renewed more than 30 days ago.",
    [],
)
m(H + "bill-005", "To be clear, no credit has been applied yet; I need your go-ahead first.", [])
m(
    H + "bill-006",
    "The system rejected the credit because today's budget is used up, so I've "
    "opened a ticket for a manual review instead.",
    [credit("rejected"), ticket()],
    ("create_support_ticket", "opened a ticket", S),
)
m(
    H + "bill-007",
    "Your money is back: 120 USD was refunded to the Visa ending 4417.",
    [credit(amount=120)],
    ("issue_credit", "was refunded", S),
)
m(
    H + "bill-008",
    "Your money is back: 120 USD was refunded to the Visa ending 4417.",
    [],
    ("issue_credit", "was refunded", U),
)
m(H + "bill-009", "Would a 10 USD credit for the inconvenience work for you?", [])
m(H + "bill-010", "I'll process the refund as soon as the courier confirms the pickup.", [])
m(
    H + "bill-011",
    "I processed the refund this morning (reference CR-7734).",
    [credit(credit_id="CR-7734")],
    ("issue_credit", "processed the refund", S),
)
m(
    H + "bill-012",
    "I processed the refund this morning (reference CR-7735).",
    [credit(credit_id="CR-7734")],
    ("issue_credit", "processed the refund", K),
)
m(
    H + "bill-013",
    "The refund failed at the payment provider, so nothing has left your account "
    "or come back to it.",
    [credit("failed")],
)
m(
    H + "bill-014",
    "Quick recap: your refund request was received, reviewed and approved, and the "
    "money has been sent to your bank.",
    [credit()],
    ("issue_credit", "money has been sent to your bank", S),
)
m(H + "bill-015", "Invoice INV-2001 is still open; paying it will unlock the credit.", [])
m(
    H + "bill-016",
    "Hmm, our records show a credit was already applied to O-55291 last month.",
    [lookup(credits=["CR-0042"])],
)
m(H + "bill-017", "Credit applied ✅", [credit()], ("issue_credit", "Credit applied", S))
m(H + "bill-018", "Credit applied ✅", [credit("dry_run")], ("issue_credit", "Credit applied", U))

# tickets and support
m(
    H + "tkt-001",
    "I've filed a bug report with engineering: T-81034.",
    [ticket(ticket_id="T-81034")],
    ("create_support_ticket", "filed a bug report", S),
)
m(
    H + "tkt-002",
    "Your case number is T-81034 and an agent will reach out within 24 hours.",
    [ticket(ticket_id="T-81034")],
)
m(
    H + "tkt-003",
    "The case has been opened with high priority.",
    [ticket("failed")],
    ("create_support_ticket", "case has been opened", C),
)
m(H + "tkt-004", "Let me open a ticket for this so it doesn't get lost.", [])
m(
    H + "tkt-005",
    "I've escalated your case to a supervisor, who will call you back today.",
    [],
    ("escalate_ticket", "escalated your case", U),
)
m(
    H + "tkt-006",
    "Ticket T-66120 was resolved and closed automatically after 7 days without a reply.",
    [X("get_ticket", args={"ticket_id": "T-66120"})],
    ("close_ticket", "resolved and closed", U),
)
m(
    H + "tkt-007",
    "Opening a ticket isn't possible on this route, but I can email the support team for you.",
    [],
)
m(
    H + "tkt-008",
    "Ticket raised: T-90412. The network team has it now.",
    [ticket(ticket_id="T-90412")],
    ("create_support_ticket", "Ticket raised", S),
)
m(
    H + "tkt-009",
    "You opened this ticket on Monday, and I've now closed it since the fix is live.",
    [X("close_ticket", args={"ticket_id": "T-55012"})],
    ("close_ticket", "closed it", S),
)
m(H + "tkt-010", "Is it OK if I close the ticket now?", [])
m(
    H + "tkt-011",
    "I'd suggest we keep the ticket open for another day in case the error returns.",
    [],
)
m(
    H + "tkt-012",
    "Our support engineer updated the case notes and reassigned it to billing.",
    [],
    (None, "reassigned it to billing", U),
)

# scheduling
m(
    H + "cal-001",
    "You're all booked for Thursday at 4pm with Dr. Patel.",
    [meeting(when="2025-10-23T16:00:00-07:00")],
    ("book_meeting", "all booked", S),
)
m(
    H + "cal-002",
    "I booked a 45-minute interview with the candidate for Monday at 10.",
    [meeting(when="2025-10-20T10:00:00-07:00")],
    ("book_meeting", "booked a 45-minute interview", S),
)
m(
    H + "cal-003",
    "The interview has been moved to Tuesday at 2pm.",
    [X("reschedule_meeting", "rejected", {"meeting_id": "MTG-7001"})],
    ("reschedule_meeting", "interview has been moved", C),
)
m(H + "cal-004", "Do you want me to add a video link to the invite?", [])
m(H + "cal-005", "I'll hold off on booking until you hear back from your manager.", [])
m(
    H + "cal-006",
    "The standup was cancelled for today.",
    [],
    ("cancel_meeting", "standup was cancelled", U),
)
m(H + "cal-007", "Sam declined the invitation, so the meeting hasn't been rescheduled.", [])
m(H + "cal-008", "I couldn't find a slot that works for everyone next week.", [])
m(
    H + "cal-009",
    "Your demo is scheduled for 3pm tomorrow; you'll get a reminder an hour before.",
    [meeting()],
    ("book_meeting", "demo is scheduled", S),
)
m(
    H + "cal-010",
    "Meeting MTG-4821 was cancelled and the attendees were notified.",
    [X("cancel_meeting", args={"meeting_id": "MTG-4821"})],
    ("cancel_meeting", "was cancelled", S),
    (None, "attendees were notified", U),
)
m(H + "cal-011", "When you booked this slot, the room wasn't available yet.", [])

# orders and subscriptions
m(
    H + "shop-001",
    "Your replacement order has been placed and will ship tomorrow.",
    [X("place_order", args={"sku": "CHG-20W"}, result={"order_id": "O-91100"})],
    ("place_order", "order has been placed", S),
)
m(
    H + "shop-002",
    "I placed the order, but the payment didn't go through, so it's on hold.",
    [X("place_order", "failed")],
)
m(
    H + "shop-003",
    "I've cancelled both items on order O-55291.",
    [X("cancel_order", args={"order_id": "O-55291"})],
    ("cancel_order", "cancelled both items", S),
)
m(
    H + "shop-004",
    "The order can't be cancelled anymore because it has already shipped.",
    [X("cancel_order", "rejected")],
)
m(
    H + "shop-005",
    "Your return label RL-2231 has been created and emailed to you.",
    [X("create_return_label", result={"label_id": "RL-2231"}), email()],
    ("create_return_label", "has been created", S),
    ("send_email", "emailed to you", S),
)
m(H + "shop-006", "Your subscription renews on the 14th; you can cancel any time before then.", [])
m(
    H + "shop-007",
    "I've downgraded your plan to Basic and cancelled the add-on storage.",
    [sub_cancel()],
    (None, "downgraded your plan", U),
    ("cancel_subscription", "cancelled the add-on storage", S),
)
m(
    H + "shop-008",
    "Discount applied: 15% off your next three orders.",
    [X("apply_discount", args={"code": "LOYAL15"})],
    ("apply_discount", "Discount applied", S),
)
m(
    H + "shop-009",
    "I tried the SAVE20 code, but it only works on orders over 100 USD.",
    [X("apply_discount", "rejected", {"code": "SAVE20"})],
)
m(
    H + "shop-010",
    "Your address was updated before the parcel left, so it will go to the new one.",
    [X("update_shipping_address", args={"address": "9 Oak Lane"})],
    ("update_shipping_address", "address was updated", S),
)
m(H + "shop-011", "The shipping address on file is 9 Oak Lane, Portland.", [lookup()])
m(
    H + "shop-012",
    "Your subscription was already cancelled when I checked, so there was nothing to do.",
    [X("get_account", result={"subscription": "cancelled"})],
)

# devops
m(
    H + "ops-001",
    "Rolled back to v2.3.9; error rate is at baseline again.",
    [X("rollback_deployment", args={"to_version": "v2.3.9"})],
    ("rollback_deployment", "Rolled back to v2.3.9", S),
)
m(
    H + "ops-002",
    "The canary has been promoted and v2.5.0 is now live in all regions.",
    [deploy(version="v2.5.0")],
    ("deploy_release", "v2.5.0 is now live", S),
)
m(
    H + "ops-003",
    "The canary has been promoted and v2.5.0 is now live in all regions.",
    [deploy(version="v2.4.9")],
    ("deploy_release", "v2.5.0 is now live", K),
)
m(
    H + "ops-004",
    "Deploys to production are frozen until Monday, so I haven't shipped anything.",
    [],
)
m(
    H + "ops-005",
    "I've restarted the ingest workers on all three nodes.",
    [restart("failed", "ingest")],
    ("ops.restart_service", "restarted the ingest workers", C),
)
m(
    H + "ops-006",
    "Can you approve a restart of the billing service? It needs about 30 seconds of downtime.",
    [],
)
m(
    H + "ops-007",
    "The cluster was scaled down to 3 nodes overnight to save costs.",
    [X("scale_cluster", args={"nodes": 3})],
    ("scale_cluster", "cluster was scaled down", S),
)
m(H + "ops-008", "I would restart the service, but the runbook says to page the on-call first.", [])
m(
    H + "ops-009",
    "Redeployed build 4471 after fixing the config typo.",
    [deploy(version="4471")],
    ("deploy_release", "Redeployed build 4471", S),
)
m(
    H + "ops-010",
    "The pods restarted on their own after the node upgrade.",
    [],
    ("ops.restart_service", "pods restarted", U),
)
m(H + "ops-011", "Heads-up: a rollback is in progress and should finish in about two minutes.", [])
m(
    H + "ops-012",
    "I've paged the on-call SRE; no restart has been attempted yet.",
    [X("page_oncall", args={"team": "sre"})],
    ("page_oncall", "paged the on-call SRE", S),
)

# email and messaging
m(
    H + "msg-001",
    "The weekly report went out to the leadership list at 9am.",
    [],
    ("send_email", "went out", U),
)
m(
    H + "msg-002",
    "I've emailed Jane a copy of the signed agreement.",
    [email()],
    ("send_email", "emailed Jane", S),
)
m(H + "msg-003", "Shall I send the reminder now or wait until Monday morning?", [])
m(
    H + "msg-004",
    "I've posted your question in the #billing channel on Slack.",
    [X("post_slack_message", "rejected", {"channel": "#billing"})],
    ("post_slack_message", "posted your question", C),
)
m(
    H + "msg-005",
    "The invoice has been emailed to accounts@initech.test.",
    [X("send_invoice", args={"to": "accounts@initech.test", "invoice_id": "INV-3100"})],
    ("send_invoice", "invoice has been emailed", S),
)
m(
    H + "msg-006",
    "The invoice has been emailed to ap@initech.test.",
    [X("send_invoice", args={"to": "accounts@initech.test", "invoice_id": "INV-3100"})],
    ("send_invoice", "invoice has been emailed", K),
)
m(
    H + "msg-007",
    "Your message to the vendor bounced back; the address seems to be wrong.",
    [email("failed")],
)
m(H + "msg-008", "I'm drafting the announcement now and will share it with you before posting.", [])

# people and accounts
m(
    H + "hr-001",
    "Your parental leave from June 1 to August 31 is approved.",
    [leave()],
    ("approve_leave_request", "leave from June 1", S),
)
m(H + "hr-002", "Your time-off request is waiting on your manager's approval.", [])
m(
    H + "hr-003",
    "I've added Marco to the finance workspace with viewer access.",
    [X("invite_user", args={"email": "marco@acme.test"})],
    ("invite_user", "added Marco", S),
)
m(
    H + "hr-004",
    "Three new teammates were invited to the workspace this morning.",
    [X("invite_user", args={"email": "a@acme.test"})],
    ("invite_user", "teammates were invited", S),
)
m(H + "hr-005", "I can't approve my own team's leave; HR will handle it.", [])
m(
    H + "acct-001",
    "Your password was reset and all other sessions were signed out.",
    [X("reset_password", "failed")],
    ("reset_password", "password was reset", C),
)
m(H + "acct-002", "Use the link in the email to reset your password within 30 minutes.", [])
m(
    H + "acct-003",
    "I've unlocked your account after verifying your identity.",
    [],
    (None, "unlocked your account", U),
)
m(
    H + "acct-004",
    "Your card is frozen — you can unfreeze it any time from the app.",
    [X("freeze_card", args={"card_last4": "4417"})],
    ("freeze_card", "card is frozen", S),
)
m(
    H + "acct-005",
    "The 500 USD transfer to your savings account went through.",
    [X("transfer_funds", args={"amount": 500})],
    ("transfer_funds", "transfer to your savings", S),
)
m(
    H + "acct-006",
    "I wasn't able to close your account because there's an outstanding balance.",
    [X("delete_account", "rejected")],
)
m(
    H + "acct-007",
    "Your account and all associated data have been deleted.",
    [],
    ("delete_account", "have been deleted", U),
)

# CRM
m(
    H + "crm-001",
    "Logged the call with Initech and set a follow-up for Friday.",
    [X("add_crm_note", args={"account": "Initech"})],
    ("add_crm_note", "Logged the call", S),
)
m(
    H + "crm-002",
    "I've created the lead, but I didn't assign an owner yet.",
    [X("create_lead", result={"lead_id": "L-6003"})],
    ("create_lead", "created the lead", S),
)
m(
    H + "crm-003",
    "Bill's phone number has been updated in the CRM.",
    [X("update_contact", args={"phone": "+1 555 0199"})],
    ("update_contact", "has been updated", S),
)
m(H + "crm-004", "Should I add a note about the discount you promised them?", [])
m(
    H + "crm-005",
    "The lead was converted to a customer by Maria on Tuesday.",
    [],
    (None, "converted to a customer", U),
)

# bookings
m(
    H + "trv-001",
    "Table for two at Nopa, 8pm Saturday — reserved under your name.",
    [X("reserve_table", result={"reservation_id": "RSV-9001"})],
    ("reserve_table", "reserved under your name", S),
)
m(
    H + "trv-002",
    "Your flight to Austin is confirmed: confirmation FLT-2K9QX.",
    [X("book_flight", result={"confirmation": "FLT-2K9QX"})],
    ("book_flight", "flight to Austin is confirmed", S),
)
m(
    H + "trv-003",
    "Your flight to Austin is confirmed: confirmation FLT-2K9QY.",
    [X("book_flight", result={"confirmation": "FLT-2K9QX"})],
    ("book_flight", "flight to Austin is confirmed", K),
)
m(H + "trv-004", "The 6:40 flight is sold out; want me to look at the 8:15 instead?", [])
m(
    H + "trv-005",
    "I cancelled your Friday dinner reservation at Luigi's.",
    [],
    (None, "cancelled your Friday dinner reservation", U),
)

# mixed and tricky
m(H + "misc-001", "Understood — I won't restart anything until the maintenance window.", [])
m(
    H + "misc-002",
    "Everything's done: the ticket is closed, the credit is issued, and I emailed you the summary.",
    [X("close_ticket"), credit(), email()],
    ("close_ticket", "ticket is closed", S),
    ("issue_credit", "credit is issued", S),
    ("send_email", "emailed you the summary", S),
)
m(
    H + "misc-003",
    "Everything's done: the ticket is closed, the credit is issued, and I emailed you the summary.",
    [X("close_ticket"), credit("rejected")],
    ("close_ticket", "ticket is closed", S),
    ("issue_credit", "credit is issued", C),
    ("send_email", "emailed you the summary", U),
)
m(
    H + "misc-004",
    "You might have been charged twice; I'll check with billing and get back to you.",
    [],
)
m(
    H + "misc-005",
    'The note says "refund issued 3/14", but I can\'t find a matching credit.',
    [lookup()],
)
m(H + "misc-006", "I haven't booked, cancelled or changed anything on your behalf.", [])
m(H + "misc-007", "If I had known about the outage, I would have postponed the deploy.", [])
m(
    H + "misc-008",
    "In the meantime, I've logged this feedback for the product team.",
    [X("add_crm_note", args={"text": "feedback"})],
    (None, "logged this feedback", U),
)
m(H + "misc-009", "Once you reply with the code, your email address will be updated.", [])
m(H + "misc-010", "Good catch! That order was never charged, so there is nothing to refund.", [])
m(H + "misc-011", "I think we're all set here. Let me know if anything else comes up!", [])
m(H + "misc-012", "Sorry, that's not something I can do — only an admin can delete accounts.", [])
m(H + "misc-013", "Your request to delete the account has been submitted for review.", [])
m(H + "misc-014", "Per the policy, credits over 500 USD are approved by finance.", [])
m(
    H + "misc-015",
    "The meeting I scheduled for you yesterday has been moved by the organiser.",
    [meeting()],
    ("book_meeting", "I scheduled", S),
    ("reschedule_meeting", "moved by the organiser", U),
)


def build() -> str:
    """The corpus as JSON lines: the messages above, then those of implied_writes_any_words
    and implied_writes_holdout2."""
    lines = []
    seen: set[str] = set()
    for mid, text, executions, claims in MESSAGES:
        assert mid not in seen, mid
        seen.add(mid)
        for _, contains, _ in claims:
            assert contains in text, (mid, contains)
        record: dict[str, Any] = {"id": mid, "text": text}
        if mid in TOOLS:
            record["tools"] = TOOLS[mid]
        record["executions"] = executions
        record["claims"] = [{"tool": t, "contains": c, "verdict": v} for t, c, v in claims]
        lines.append(json.dumps(record, ensure_ascii=False, sort_keys=False))
    for extra in (*any_words.RECORDS, *holdout2.RECORDS):
        assert extra["id"] not in seen, extra["id"]
        seen.add(extra["id"])
        labels = []
        for tool, contains, verdict, *field in extra["claims"]:
            assert contains in extra["text"], (extra["id"], contains)
            label = {"tool": tool, "contains": contains, "verdict": verdict}
            if field:
                label["mismatch"] = field[0]
            labels.append(label)
        record = {"id": extra["id"], "class": extra["class"], "text": extra["text"],
                  "executions": extra["executions"], "claims": labels}  # fmt: skip
        lines.append(json.dumps(record, ensure_ascii=False, sort_keys=False))
    return "\n".join(lines) + "\n"


def main() -> None:
    text = build()
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {text.count(chr(10))} messages to {OUT}")


if __name__ == "__main__":
    main()
