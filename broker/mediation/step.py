"""The chain's first step: a call by its visible name mapped back to the tool, its receipt kept.

A hidden tool, or a renamed tool under its old name, is ``unknown_tool`` on that route, exactly
as a tool that does not exist. A required ``reason`` argument is taken out of the arguments
before the tool's own schema sees them and kept as the proposal's reason; so are the properties
an ``augment`` rule injected (the tool never receives them), and an offered ``dry_run``, which
makes the call a dry run (the receipt says the model asked for it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from broker.config.mediation_checks import DRY_RUN_ARGUMENT, REASON_ARGUMENT
from broker.model import FieldError
from broker.taxonomy import Code
from broker.tools.runtime import Registry
from broker.validators import Rejection
from broker.validators.authz import tool_named_by_id
from broker.validators.schema import schema_rejection

if TYPE_CHECKING:
    from broker.ledger.model import MediationReceipt
    from broker.mediation.view import Mediated, Mediator
    from broker.pipeline.context import Decided

__all__ = ["NO_REASON", "MediationStep"]

NO_REASON = "(no reason given)"
"""The reason recorded for a call without one on a ``fill_blank`` route."""


def _unknown(name: str, pointer: str) -> Rejection:
    # Word for word what tool_authz answers for a tool that does not exist: a hidden tool's
    # existence is not revealed.
    return Rejection(
        code=Code.UNKNOWN_TOOL,
        reason=f"unknown tool {name!r}",
        remediation="REPLAN: choose a tool from GET /v1/tools",
        errors=(FieldError(pointer, f"unknown tool {name!r}"),),
    )


def _wrapped(entry: Mediated, via: str) -> MediationReceipt:
    """The receipt of a call through a gateway's ``tool_execute``: the model saw a meta-tool
    (and the tool's card and schema through it), and its call was mapped onto the tool."""
    receipt = entry.receipt
    return msgspec.structs.replace(
        receipt,
        fidelity="emulated",
        policy_state="wrapped",
        rules=(*receipt.rules, f"catalog={via}"),
        visible_name="tool_execute",
    )


class MediationStep:
    """Names, required reasons and receipts of the route's mediation rules."""

    __slots__ = ("_mediator", "_registry")
    name = "mediation"

    def __init__(self, mediator: Mediator, registry: Registry) -> None:
        self._mediator = mediator
        self._registry = registry

    async def check(self, decided: Decided) -> Rejection | None:
        request = decided.request
        view = self._mediator.view(decided.route)
        if request.tool_id is not None:
            named = tool_named_by_id(request.tool_id, self._registry.names_by_id)
            if isinstance(named, Rejection):
                return None  # tool_authz answers it
            if named in view.hidden:
                return _unknown(request.tool_id, "/tool_id")
            real = named
        else:
            found = view.resolve(request.tool)
            if found is None:
                entry = view.entry(request.tool)
                decided.receipt = entry.receipt if entry is not None else None
                return _unknown(request.tool, "/tool")
            real = found
        entry = view.entry(real)
        if entry is None:
            return None  # no such tool: tool_authz answers it
        decided.receipt = entry.receipt if decided.via is None else _wrapped(entry, decided.via)
        if real != request.tool and request.tool_id is None:
            request.tool = real
            decided.meta = msgspec.structs.replace(decided.meta, tool=real)
        args = request.args
        for name in entry.injected:
            args.pop(name, None)
        refused = self._dry_run(decided, entry) if entry.dry_run_flag else None
        refused = refused or self._reason(decided, entry)
        if refused is not None or entry.replacement is None:
            return refused
        # A replacement: the model's arguments against the declaration it saw, then mapped.
        errors = entry.replacement.args.errors(request.args)
        if errors:
            return schema_rejection(entry.visible.name, errors)
        request.args = entry.replacement.mapped(request.args)
        return None

    @staticmethod
    def _dry_run(decided: Decided, entry: Mediated) -> Rejection | None:
        """Take an offered ``dry_run`` out of the arguments; ``true`` makes the call a dry run."""
        given = decided.request.args.pop(DRY_RUN_ARGUMENT, None)
        if given is None or given is False:
            return None
        if given is not True:
            problem = "dry_run must be a boolean"
            return schema_rejection(entry.visible.name, [FieldError("/args/dry_run", problem)])
        decided.request.dry_run = True
        decided.meta = msgspec.structs.replace(decided.meta, dry_run=True)
        decided.receipt = msgspec.structs.replace(entry.receipt, dry_run_argument=True)
        return None

    @staticmethod
    def _reason(decided: Decided, entry: Mediated) -> Rejection | None:
        """Take a required reason out of the arguments and keep it as the proposal's reason."""
        request, args = decided.request, decided.request.args
        if entry.reason is None:
            return None
        given = args.pop(REASON_ARGUMENT, None)
        if isinstance(given, str) and given.strip():
            if request.reason is None:
                request.reason = given
            return None
        if request.reason:  # the proposal body's own reason counts
            return None
        if given is None and entry.reason == "fill_blank":
            request.reason = NO_REASON
            return None
        problem = "a reason is required: say in one sentence why you are calling this tool"
        if given is not None:
            problem = "the reason must be a non-empty string"
        return schema_rejection(entry.visible.name, [FieldError("/args/reason", problem)])
