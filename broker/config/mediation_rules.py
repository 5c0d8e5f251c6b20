"""``[routes.X.mediation]``: what one route's model is offered, rule by rule (issue 22).

A rule names one tool of the route and changes how it is declared to that route's model:
``hide`` (neither listed nor callable), ``rename`` (called by its new name, mapped back before the
chain), ``replace`` (a trusted declaration whose arguments are mapped onto the tool's) and
``augment`` (a description suffix, extra properties the model may fill, stripped
before the tool's own schema validates). ``required_reason`` (route-wide) or a
``require_reason`` rule (one tool) adds a ``reason`` argument the model must give; it is kept as
the proposal's reason. ``offer_dry_run`` adds an optional boolean ``dry_run`` argument: set, the
call runs as a dry run. How rules relate to each other and to the tools is checked in
``broker.config.mediation_checks``; applying them is ``broker.mediation``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

__all__ = [
    "AugmentRule",
    "HideRule",
    "MediationConfig",
    "MediationRule",
    "OfferDryRunRule",
    "RenameRule",
    "ReplaceRule",
    "RequireReasonRule",
]

_ToolName = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
_VisibleName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")]
_RuleId = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]


class _Rule(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, tag_field="action"):
    id: _RuleId | None = None
    """Named in receipts (default ``rules[i]``, its place in the list)."""
    tool: _ToolName
    """The tool it applies to: one of the route's tools, or a ``[registered_tools]`` name."""


class HideRule(_Rule, tag="hide"):
    """The tool is neither listed nor callable on this route (under any name)."""


class RenameRule(_Rule, tag="rename"):
    """The model sees and calls the tool as ``name``; its own name is no longer callable here."""

    name: _VisibleName


class AugmentRule(_Rule, tag="augment"):
    """The declaration gains a description suffix and/or extra (optional) input properties."""

    description_append: str = ""
    properties: dict[str, dict[str, Any]] = {}
    """Extra JSON Schema properties offered to the model; stripped from calls before the tool's
    own schema validates them (the tool never receives them)."""


class ReplaceRule(_Rule, tag="replace"):
    """A trusted declaration shown in the tool's place: the model calls ``name`` with arguments
    of ``input_schema``, which the broker validates and maps onto the tool's own arguments."""

    name: _VisibleName
    description: Annotated[str, msgspec.Meta(min_length=1)]
    input_schema: dict[str, Any]
    arguments: dict[str, str]
    """The tool's argument name -> the visible argument it takes its value from (top level)."""


class RequireReasonRule(_Rule, tag="require_reason"):
    """This tool's calls must carry a ``reason`` argument (as ``required_reason`` route-wide)."""


class OfferDryRunRule(_Rule, tag="offer_dry_run"):
    """This tool's declaration offers the model an optional boolean ``dry_run`` argument: set to
    ``true``, the call runs as a dry run (the adapter's preview; nothing runs, nothing is spent)."""


MediationRule = (
    HideRule | RenameRule | AugmentRule | ReplaceRule | RequireReasonRule | OfferDryRunRule
)


class MediationConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``[routes.X.mediation]``: the route's catalog rules, applied in every catalog it serves."""

    required_reason: bool = False
    """Every tool of the route takes a ``reason`` argument (kept in the ledger and traces)."""
    reason_on_missing: Literal["reject", "fill_blank"] = "reject"
    """``reject``: the reason is required in the schema and a call without one is a schema
    rejection. ``fill_blank``: advertised but optional, recorded as "(no reason given)"."""
    rules: list[MediationRule] = []
    unknown_tools: Literal["pass_through", "drop"] = "pass_through"
    """``POST /v1/catalog/mediate``: what becomes of the tools an agent declares that the broker
    does not have (its own, or the provider's): passed through as declared (``deferred``: not the
    broker's to allow), or dropped (``blocked``)."""
