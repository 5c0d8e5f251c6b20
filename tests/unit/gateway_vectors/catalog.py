"""A deterministic catalog of 1,000 realistic tools (20 namespaces x 10 resources x 5 verbs) for
the gateway tests and ``bench/bench_gateway_browse.py``: no randomness, so every run browses the
same catalog and any change in a card, a rank or a path is a real change."""

from __future__ import annotations

from broker.gateway.cards import GatewayEntry
from broker.tool_id import format_tool_id

NAMESPACES: dict[str, tuple[str, tuple[str, ...]]] = {
    "github": (
        "GitHub",
        (
            "issue",
            "pull_request",
            "repository",
            "branch",
            "commit",
            "release",
            "label",
            "milestone",
            "webhook",
            "gist",
        ),
    ),
    "gitlab": (
        "GitLab",
        (
            "issue",
            "merge_request",
            "project",
            "pipeline",
            "runner",
            "tag",
            "snippet",
            "environment",
            "deploy_key",
            "wiki_page",
        ),
    ),
    "slack": (
        "Slack",
        (
            "message",
            "channel",
            "user",
            "reaction",
            "file",
            "reminder",
            "bookmark",
            "usergroup",
            "pin",
            "emoji",
        ),
    ),
    "jira": (
        "Jira",
        (
            "issue",
            "sprint",
            "board",
            "epic",
            "worklog",
            "comment",
            "version",
            "component",
            "filter",
            "dashboard",
        ),
    ),
    "stripe": (
        "Stripe",
        (
            "customer",
            "charge",
            "refund",
            "invoice",
            "subscription",
            "payout",
            "coupon",
            "price",
            "product",
            "dispute",
        ),
    ),
    "billing": (
        "the billing ledger",
        (
            "credit",
            "invoice",
            "payment",
            "account",
            "statement",
            "tax_rate",
            "adjustment",
            "plan",
            "usage_record",
            "discount",
        ),
    ),
    "crm": (
        "the CRM",
        (
            "contact",
            "lead",
            "deal",
            "company",
            "note",
            "task",
            "pipeline",
            "activity",
            "quote",
            "territory",
        ),
    ),
    "calendar": (
        "the calendar",
        (
            "event",
            "calendar",
            "attendee",
            "reminder",
            "room",
            "availability",
            "invitation",
            "recurrence",
            "timezone",
            "holiday",
        ),
    ),
    "drive": (
        "the file drive",
        (
            "file",
            "folder",
            "permission",
            "revision",
            "comment",
            "shortcut",
            "shared_drive",
            "label",
            "upload",
            "export",
        ),
    ),
    "email": (
        "the mail service",
        (
            "message",
            "draft",
            "thread",
            "label",
            "attachment",
            "filter",
            "signature",
            "alias",
            "contact",
            "template",
        ),
    ),
    "k8s": (
        "Kubernetes",
        (
            "pod",
            "deployment",
            "service",
            "namespace",
            "config_map",
            "secret",
            "ingress",
            "job",
            "node",
            "volume",
        ),
    ),
    "aws": (
        "AWS",
        (
            "instance",
            "bucket",
            "queue",
            "topic",
            "function",
            "table",
            "role",
            "key_pair",
            "snapshot",
            "alarm",
        ),
    ),
    "datadog": (
        "Datadog",
        (
            "monitor",
            "dashboard",
            "metric",
            "event",
            "incident",
            "downtime",
            "synthetic_test",
            "log_index",
            "slo",
            "notebook",
        ),
    ),
    "pagerduty": (
        "PagerDuty",
        (
            "incident",
            "service",
            "schedule",
            "escalation_policy",
            "oncall",
            "alert",
            "team",
            "maintenance_window",
            "priority",
            "webhook",
        ),
    ),
    "notion": (
        "Notion",
        (
            "page",
            "database",
            "block",
            "comment",
            "property",
            "template",
            "workspace",
            "user",
            "view",
            "relation",
        ),
    ),
    "zendesk": (
        "Zendesk",
        (
            "ticket",
            "user",
            "organization",
            "macro",
            "view",
            "trigger",
            "article",
            "group",
            "satisfaction_rating",
            "tag",
        ),
    ),
    "shop": (
        "the shop",
        (
            "order",
            "product",
            "variant",
            "cart",
            "fulfillment",
            "return",
            "discount",
            "inventory_item",
            "collection",
            "shipping_zone",
        ),
    ),
    "analytics": (
        "the analytics warehouse",
        (
            "report",
            "query",
            "segment",
            "funnel",
            "cohort",
            "dashboard",
            "metric",
            "export",
            "alert",
            "dataset",
        ),
    ),
    "hr": (
        "the HR system",
        (
            "employee",
            "time_off",
            "payslip",
            "position",
            "review",
            "benefit",
            "onboarding",
            "department",
            "expense",
            "timesheet",
        ),
    ),
    "search": (
        "the search index",
        (
            "document",
            "index",
            "synonym",
            "alias",
            "pipeline",
            "snapshot",
            "query_rule",
            "analyzer",
            "shard",
            "template",
        ),
    ),
}

VERBS: tuple[tuple[str, str, bool], ...] = (
    ("create", "Create a new {thing} in {service}. Returns the created {thing} with its id.", True),
    ("get", "Fetch one {thing} from {service} by id, with all of its fields.", False),
    (
        "list",
        "List {things} in {service}, newest first, with paging. Filter by owner, state or date range; at most 100 per page.",
        False,
    ),
    (
        "update",
        "Update fields of an existing {thing} in {service}. Only the fields given change.",
        True,
    ),
    (
        "delete",
        "Delete {a} {thing} from {service} permanently. This cannot be undone, so confirm the id first.",
        True,
    ),
)


# Two kinds of long prose, so the 1,000 cards exercise both §2.4 cuts: at a sentence end, and hard.
SENTENCES_NOTE = (
    "Requests are rate limited per workspace and retried with backoff when the service is busy. "
    "Results are cached for a short while, so a change made elsewhere may take a minute to show. "
    "Audit records keep the caller, the arguments and the outcome for every call made here."
)
RUN_ON_NOTE = (
    "accepts optional fields for custom attributes external references owner assignment "
    "visibility scopes notification preferences retention settings and localisation hints "
    "which are passed through unchanged to the upstream service and echoed back in the answer "
    "together with the server generated timestamps revision numbers and links to related records"
)


def _plural(word: str) -> str:
    if word.endswith("y") and word[-2:-1] not in "aeiou":
        return word[:-1] + "ies"
    if word.endswith(("s", "x", "ch", "sh")):
        return word + "es"
    return word + "s"


def _article(words: str) -> str:
    return "an" if words[0] in "aeiou" else "a"


def generated_entries() -> list[GatewayEntry]:
    """The 1,000 entries, in generation order."""
    entries = []
    for namespace, (service, things) in NAMESPACES.items():
        for thing in things:
            for verb, template, writes in VERBS:
                name = f"{verb}_{_plural(thing)}" if verb == "list" else f"{verb}_{thing}"
                words = thing.replace("_", " ")
                description = template.format(
                    thing=words, things=_plural(words), a=_article(words), service=service
                )
                if thing == things[0]:
                    description += " " + SENTENCES_NOTE
                elif thing == things[1]:
                    description = description.rstrip(".") + " and " + RUN_ON_NOTE
                schema = {
                    "type": "object",
                    "properties": {"id": {"type": "string"}}
                    if verb != "list"
                    else {"page": {"type": "integer"}},
                }
                tool_id = format_tool_id(
                    f"{namespace}.{name}", schema, namespace=namespace, version=None
                )
                entries.append(
                    GatewayEntry(
                        tool_id=tool_id,
                        name=name,
                        namespace=namespace,
                        description=description,
                        tags=(thing.replace("_", "-"), "write" if writes else "read"),
                        input_schema=schema,
                        side_effects=writes,
                    )
                )
    return entries
