"""The chain's steps: each binds one check from ``broker.validators`` to a proposal.

A step is built once (``broker.pipeline.chain``), holds no per-proposal state, and answers
``check(decided)`` with ``None`` to pass the proposal on or a verdict that ends the chain; what
it learns for later steps it sets on ``decided``. Its ``name`` is what the ledger records.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import msgspec

from broker.faults import crash_point
from broker.plugins import VerifierContext
from broker.stores import Admission, AdmissionStore, Admitted, Conflict, Limited, Replay
from broker.taxonomy import Code, StoreUnavailableError
from broker.validators import STORE_UNAVAILABLE, Rejection
from broker.validators.authz import check_tool, tool_named_by_id
from broker.validators.idempotency import build_claim, conflict_rejection, resolve_key
from broker.validators.limits import limit_rejection, limits_for
from broker.validators.policy import IMPLIED_WRITE_CHECK, require_implied_write_check
from broker.validators.preconditions import check_listed, verify
from broker.validators.repair import repair_args
from broker.validators.schema import schema_rejection

if TYPE_CHECKING:
    from prometheus_client import Counter

    from broker.ledger import LedgerSink
    from broker.metrics import BrokerMetrics
    from broker.pipeline.context import Decided
    from broker.tools.runtime import Registry, ToolRuntime

__all__ = [
    "AdmissionStep",
    "IdempotencyKeyStep",
    "ImpliedWritePolicyStep",
    "PreconditionsStep",
    "SchemaStep",
    "ToolAuthzStep",
]

log = logging.getLogger("broker.pipeline")

# The session check could not read the ledger: the policy refused, not admission.
_POLICY_STORE_UNAVAILABLE = msgspec.structs.replace(
    STORE_UNAVAILABLE, failed_check=IMPLIED_WRITE_CHECK
)


class ToolAuthzStep:
    """The tool exists and the caller's route may call it: stateless, so it runs first and an
    unauthorized caller learns nothing of keys or budgets."""

    __slots__ = ("_registry",)
    name = "tool_authz"

    def __init__(self, registry: Registry) -> None:
        self._registry = registry  # read per proposal: registrations swap its tools

    async def check(self, decided: Decided) -> Rejection | None:
        request = decided.request
        if request.tool_id is not None:  # named by its stable id: the answers name it as usual
            named = tool_named_by_id(request.tool_id, self._registry.names_by_id)
            if isinstance(named, Rejection):
                decided.meta = msgspec.structs.replace(decided.meta, tool=None)  # no name to give
                return named
            request.tool = named
            decided.meta = msgspec.structs.replace(decided.meta, tool=named)
        found = check_tool(request.tool, decided.principal, self._registry.tools)
        registry = self._registry
        if (
            isinstance(found, Rejection)
            and found.code is Code.UNKNOWN_TOOL
            and registry.catch_up is not None
        ):
            # Maybe registered through another process a moment ago, and its pub/sub or poll
            # is behind. Whoever installs a newer catalog meanwhile (this call or the follower)
            # moves the version: look again then.
            seen = registry.version
            await registry.catch_up()
            if registry.version != seen:
                found = check_tool(request.tool, decided.principal, registry.tools)
        if isinstance(found, Rejection):
            return found
        decided.tool = found
        return None


class SchemaStep:
    """The arguments against the tool's JSON Schema, and every listed precondition known.

    On routes with ``argument_repair``, arguments that fail are repaired where that cannot
    change their meaning (``broker.validators.repair``) and validated again: the repaired ones
    go on if they pass, and otherwise the errors of what was sent are answered. Valid arguments
    never reach the repair, so it costs nothing until a proposal would be refused.
    """

    __slots__ = ("_registry", "_repairs")
    name = "schema"

    def __init__(self, registry: Registry, *, repairs: Counter | None = None) -> None:
        self._registry = registry
        self._repairs = repairs
        """``broker_argument_repairs_total`` when the route repairs arguments, else ``None``."""

    async def check(self, decided: Decided) -> Rejection | None:
        tool = decided.tool
        if tool is None:
            raise _misplaced(self)
        request = decided.request
        if self._repairs is None:
            errors = tool.args.errors(request.args)
            if errors:
                return schema_rejection(tool.name, errors)
        elif not tool.args.valid(request.args) and not self._repaired(decided, tool):
            # Located against the arguments as sent, not against a repair that did not help.
            return schema_rejection(tool.name, tool.args.errors(request.args))
        return check_listed(request.preconditions, self._registry.preconditions)

    def _repaired(self, decided: Decided, tool: ToolRuntime) -> bool:
        """Whether repair made the arguments valid (then they replace the ones sent)."""
        args, repairs = repair_args(tool.config.input_schema, decided.request.args)
        if not repairs or not isinstance(args, dict) or not tool.args.valid(args):
            return False
        decided.request.args = args
        decided.repairs = tuple(repairs)
        counter = self._repairs
        if counter is not None:
            for repair in repairs:
                counter.labels(decided.route, repair.kind).inc()
        return True


class ImpliedWritePolicyStep:
    """On routes with ``require_implied_write_check`` only (the chain leaves it out elsewhere):
    the report of the session's last action was checked for implied writes."""

    __slots__ = ("_ledger",)
    name = "policy"

    def __init__(self, ledger: LedgerSink | None) -> None:
        self._ledger = ledger

    async def check(self, decided: Decided) -> Rejection | None:
        try:
            return await require_implied_write_check(self._ledger, decided.request.session_id)
        except StoreUnavailableError:
            return _POLICY_STORE_UNAVAILABLE


class IdempotencyKeyStep:
    """The key from body and header, required for tools that change the world; with one, the
    claim that admission will take."""

    __slots__ = ("_lease_margin_s",)
    name = "idempotency_key"

    def __init__(self, *, lease_margin_s: float) -> None:
        self._lease_margin_s = lease_margin_s

    async def check(self, decided: Decided) -> Rejection | None:
        tool = decided.tool
        if tool is None:
            raise _misplaced(self)
        key = resolve_key(decided.request.idempotency_key, decided.header_key, tool)
        if isinstance(key, Rejection):
            return key
        decided.key = key
        if key:
            decided.claim = build_claim(
                key,
                tool,
                decided.request.args,
                tenant=decided.tenant,
                route=decided.route,
                lease_margin_s=self._lease_margin_s,
            )
        return None


class _StoreStep:
    """A step that reads the admission store: failures of the store are counted and refused."""

    __slots__ = ("_clock", "_metrics", "_store")

    def __init__(
        self, store: AdmissionStore, *, clock: Callable[[], float], metrics: BrokerMetrics
    ) -> None:
        self._store = store
        self._clock = clock
        self._metrics = metrics


class PreconditionsStep(_StoreStep):
    """The tool's declared checks against the data plane, before admission reserves anything.

    A failure still consults the key: a legitimate retry of something that already happened
    replays its answer, however the world has moved since (a dry run never replays).
    """

    __slots__ = ()
    name = "preconditions"

    async def check(self, decided: Decided) -> Rejection | Replay | None:
        tool = decided.tool
        if tool is None:
            raise _misplaced(self)
        context = VerifierContext(
            tenant=decided.tenant,
            route=decided.route,
            tool=tool.name,
            trace_id=decided.meta.trace_id,
        )
        failed = await verify(tool, decided.request.args, context)
        if failed is None or decided.claim is None:
            return failed
        try:
            earlier = await self._store.lookup(decided.claim, now=self._clock())
        except StoreUnavailableError:
            return _store_down(decided, self._metrics)
        if isinstance(earlier, Replay):
            return failed if decided.meta.dry_run else earlier
        if isinstance(earlier, Conflict):
            return conflict_rejection(earlier)
        return failed


class AdmissionStep(_StoreStep):
    """The idempotency claim, budget reservations and rate-limit hits in one atomic store call,
    all or nothing; last, because it is the only step that takes state."""

    __slots__ = ()
    name = "admission"

    async def check(self, decided: Decided) -> Rejection | Replay | None:
        tool = decided.tool
        if tool is None:
            raise _misplaced(self)
        tenant = decided.tenant
        charges, hits = limits_for(tool, decided.request.args, tenant=tenant, route=decided.route)
        if decided.policy_hits:  # loop thresholds of broker.policy: counted in the same call
            hits = (*hits, *decided.policy_hits)
        admission = Admission(tenant=tenant, claim=decided.claim, charges=charges, hits=hits)
        try:
            result = await self._store.admit(
                admission, now=self._clock(), dry_run=decided.meta.dry_run
            )
        except StoreUnavailableError:
            return _store_down(decided, self._metrics)
        if isinstance(result, Admitted):
            crash_point("after_claim")
            decided.admitted = result
            return None
        if isinstance(result, Conflict):
            return conflict_rejection(result)
        if isinstance(result, Limited):
            refusal = decided.policy_refusals and decided.policy_refusals.get(result.name)
            return refusal(result) if refusal else limit_rejection(result)
        return result


def _misplaced(step: object) -> RuntimeError:
    # Inline ``is None`` rather than a method on Decided: four calls fewer per proposal.
    return RuntimeError(f"{type(step).__name__} needs the tool: it must come after tool_authz")


def _store_down(decided: Decided, metrics: BrokerMetrics) -> Rejection:
    log.warning("store unavailable; failing closed for %s", decided.meta.proposal_id)
    # Both the key's lookup and the admission count as "admit": the decision's store calls.
    metrics.store_errors.labels("admit").inc()
    return STORE_UNAVAILABLE
