"""A meta-tool call, whichever front door brought it: ``POST /v1/tool-calls`` or MCP ``tools/call``.

- ``tool_browse`` and ``tool_hydrate`` read the route's catalog (``broker.gateway.catalog``):
  not proposals, so not in the ledger; each is counted in ``broker_gateway_calls_total``.
- ``tool_execute(tool_id, args)`` is a proposal like any other: the same pipeline, chain,
  idempotency and ledger record as ``POST /v1/proposals`` naming the tool by ``tool_id``, with
  a receipt that says it came through the gateway (``wrapped``, ``emulated``). An id the route
  cannot reach and malformed meta-arguments are refusals recorded like any refused proposal.
- ``tool_view(handle, selector)`` reads a result kept aside (``broker.gateway.views``).

Problems are answered in seed 004's §3.4 shape (``{"error": CODE, "message", "path",
"details"}``); a proposal the chain refused for another reason than its arguments keeps the
broker's own error (category, code, reason, remediation), as any tool call's does.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import msgspec

from broker.approvals.records import pending_content
from broker.gateway.catalog import GatewayCatalogs, RouteCatalog
from broker.gateway.errors import CatalogError, GatewayCode, GatewayError
from broker.gateway.surface import BROWSE, EXECUTE, HYDRATE, VIEW, meta_tools
from broker.gateway.views import KeptAside, ViewProblem, keep_aside, load_aside
from broker.metrics import BrokerMetrics
from broker.model import FieldError, Principal, ProposalRequest
from broker.pipeline.orchestrator import Pipeline
from broker.responses import Answer
from broker.stores.expiring import ExpiringValues
from broker.taxonomy import CODE_STATUS, Code, StoreUnavailableError
from broker.validators.schema import ArgsValidator

if TYPE_CHECKING:
    from broker.gateway.browsing import BrowseMemory

__all__ = ["BROWSE_MEMORY_TTL_S", "Gateway", "MetaCall", "MetaOutcome"]

log = logging.getLogger("broker.gateway")

BROWSE_MEMORY_TTL_S = 3600
"""How long a session's browse memory outlives its last browse."""


@dataclass(frozen=True, slots=True)
class MetaCall:
    """One meta-tool call and what its proposal (for ``tool_execute``) shares with the turn."""

    name: str
    args: dict[str, Any]
    session_id: str | None = None
    idempotency_key: str | None = None
    trace_id: str | None = None
    dry_run: bool = False
    traceparent: str | None = None
    mcp: bool = False
    """Called through MCP: ``tool_execute`` takes its idempotency key among the arguments."""


@dataclass(frozen=True, slots=True)
class MetaOutcome:
    """What the model reads, and the proposal's answer when the call was one."""

    content: dict[str, Any]
    is_error: bool
    proposal: Answer | None = None


def _validators(format: str) -> dict[str, ArgsValidator]:
    """The meta-tools' own schemas, as ``format`` declares them."""
    return {tool.name: ArgsValidator(tool.input_schema) for tool in meta_tools("gateway", format)}


def _problem(
    code: str, message: str, *, path: str = "", details: dict[str, Any] | None = None
) -> MetaOutcome:
    # tool_view's SELECTOR_NOT_FOUND and SELECTION_TOO_LARGE are not (yet) among the core's
    # GatewayCode names; the shape is the same §3.4 object.
    error = GatewayError(cast("GatewayCode", code), message, path=path, details=details)
    return MetaOutcome(error.payload(), True)


def _args_details(errors: list[FieldError], *, inner: bool = False) -> dict[str, Any]:
    """``details`` of an ``ARGS_INVALID``: every problem, located by a JSON Pointer into the
    meta-tool call's arguments, and (as the core's errors say it) the first one's ``field`` and
    ``pointer``. The validator points into a proposal body (``/args/...``): for the meta-tool's
    own arguments that prefix goes; for the tool's (``inner``), a proposal's ``/args`` is
    ``tool_execute``'s ``args`` member, so the pointer stands as it is."""
    located = [
        {"path": e.path if inner else e.path.removeprefix("/args"), "message": e.message}
        for e in errors
    ]
    first = located[0]["path"] if located else ""
    field = first.split("/")[1] if first.count("/") else ""
    return {"field": field, "pointer": first, "errors": located}


class Gateway:
    """The meta-tools of every gateway and proxy route, for one app."""

    def __init__(
        self,
        *,
        catalogs: GatewayCatalogs,
        pipeline: Pipeline,
        store: ExpiringValues,
        metrics: BrokerMetrics,
    ) -> None:
        self.catalogs = catalogs
        self._pipeline = pipeline
        self._store = store
        self._kept = KeptAside(store)
        self._validators = _validators("openai")
        self._mcp_validators = _validators("mcp")
        # Each labelled child looked up once: ``labels()`` takes a lock and builds a key on
        # every call, which tool_execute would pay beside the proposal it makes.
        self._counted = {
            (name, failed): metrics.gateway_calls.labels(name, "error" if failed else "ok")
            for name in (BROWSE, HYDRATE, EXECUTE, VIEW)
            for failed in (False, True)
        }

    def serves(self, principal: Principal) -> bool:
        """Whether ``principal``'s route declares meta-tools instead of its tools."""
        return self.catalogs.mode(principal.route) != "tools"

    def offers(self, principal: Principal, name: str) -> bool:
        """Whether ``name`` is one of the meta-tools ``principal``'s route declares."""
        mode = self.catalogs.mode(principal.route)
        return any(tool.name == name for tool in meta_tools(mode, "mcp"))

    async def call(self, principal: Principal, call: MetaCall) -> MetaOutcome:
        """The outcome of one meta-tool call (never raises for bad input: it is answered)."""
        try:
            outcome = await self._dispatch(principal, call)
        except StoreUnavailableError:
            # A session's browse memory or a kept result could not be read or written: fail
            # closed with the broker's own code (nothing was executed by a read).
            log.warning("gateway %s: the store is unavailable", call.name)
            outcome = MetaOutcome(
                {
                    "error": {
                        "category": CODE_STATUS[Code.STORE_UNAVAILABLE][0].value,
                        "code": Code.STORE_UNAVAILABLE.value,
                        "reason": "the broker cannot reach its state; nothing was executed",
                        "remediation": "RETRY: call again in a second",
                    }
                },
                True,
            )
        except CatalogError as exc:
            # The operator's catalog cannot be browsed (a card over its token cap even with its
            # description cut): fail closed, say so, change nothing.
            log.error("the gateway catalog of route %s cannot be built: %s", principal.route, exc)
            outcome = MetaOutcome(
                {
                    "error": "CATALOG_INVALID",
                    "message": "this route's catalog cannot be browsed; the operator must fix it",
                    "path": "",
                    "details": {},
                },
                True,
            )
        self._counted[call.name, outcome.is_error].inc()
        return outcome

    async def _dispatch(self, principal: Principal, call: MetaCall) -> MetaOutcome:
        catalog = self.catalogs.for_principal(principal)
        validators = self._mcp_validators if call.mcp else self._validators
        problems = validators[call.name].errors(call.args)
        if call.name == EXECUTE:
            return await self._execute(principal, catalog, call, problems)
        if problems:
            return _problem(
                "ARGS_INVALID",
                f"{len(problems)} problem(s) with the arguments of {call.name}",
                details=_args_details(problems),
            )
        if call.name == BROWSE:
            return await self._browse(principal, catalog, call)
        if call.name == HYDRATE:
            return await self._hydrate(principal, catalog, call)
        return await self._view(principal, call)

    # -- reads of the catalog ---------------------------------------------------------------

    def _memory_key(self, principal: Principal, session_id: str) -> str:
        return f"browse\x1f{principal.route}\x1f{session_id}"

    async def _memory(self, principal: Principal, session_id: str | None) -> BrowseMemory | None:
        if session_id is None:  # no session, no memory: every browse ranks afresh
            return None
        from broker.gateway.browsing import BrowseMemory  # with the index (catalog.py)

        raw = await load_aside(
            self._store, principal.tenant or "", self._memory_key(principal, session_id)
        )
        if raw is None:
            return BrowseMemory()
        try:
            return BrowseMemory.loads(raw)
        except ValueError:  # another version's memory: begin afresh (costs cache hits only)
            return BrowseMemory()

    async def _remember(
        self, principal: Principal, session_id: str | None, memory: BrowseMemory | None
    ) -> None:
        if session_id is None or memory is None:
            return
        await keep_aside(
            self._store,
            principal.tenant or "",
            self._memory_key(principal, session_id),
            memory.dumps(),
            ttl_s=BROWSE_MEMORY_TTL_S,
        )

    async def _browse(
        self, principal: Principal, catalog: RouteCatalog, call: MetaCall
    ) -> MetaOutcome:
        query, path = call.args.get("query"), call.args.get("path")
        memory = await self._memory(principal, call.session_id)
        try:
            found = (await catalog.index()).browse(
                query=query, path=path, limit=call.args.get("limit", 10), memory=memory
            )
        except GatewayError as exc:  # both or neither, a bad query, path or limit (§3.4)
            return MetaOutcome(exc.payload(), True)
        await self._remember(principal, call.session_id, memory)
        return MetaOutcome(found.payload(), False)

    async def _hydrate(
        self, principal: Principal, catalog: RouteCatalog, call: MetaCall
    ) -> MetaOutcome:
        tool_id: str = call.args["tool_id"]
        tool = catalog.tool(tool_id)
        if tool is None:
            return _unknown_tool(tool_id)
        memory = await self._memory(principal, call.session_id)
        if memory is not None:  # §5.1: hydrated ids join the session's stable prefix
            memory.note_hydrated(tool_id)
            await self._remember(principal, call.session_id, memory)
        config = tool.config
        return MetaOutcome(
            {
                "tool_id": tool_id,
                "name": tool.name,
                "description": config.description,
                "input_schema": config.input_schema,
                "risk": config.risk,
                "idempotent": config.idempotent,
            },
            False,
        )

    async def _view(self, principal: Principal, call: MetaCall) -> MetaOutcome:
        selector: str = call.args.get("selector", "")
        try:
            part = await self._kept.view(
                principal.tenant or "",
                principal.route or "",
                call.session_id,
                call.args["handle"],
                selector,
            )
        except ViewProblem as exc:
            return _problem(exc.code, exc.message, path=selector, details=exc.details)
        return MetaOutcome(
            {"handle": call.args["handle"], "selector": selector, "value": part}, False
        )

    # -- the one proposal -------------------------------------------------------------------

    async def _execute(
        self,
        principal: Principal,
        catalog: RouteCatalog,
        call: MetaCall,
        problems: list[FieldError],
    ) -> MetaOutcome:
        pipeline = self._pipeline
        if problems:  # not even a proposal: refused and recorded like a malformed one
            refused = await pipeline.refuse(
                principal,
                Code.SCHEMA_INVALID,
                f"{len(problems)} problem(s) with the arguments of {EXECUTE}",
                errors=problems,
                traceparent=call.traceparent,
            )
            outcome = _problem(
                "ARGS_INVALID",
                f"{len(problems)} problem(s) with the arguments of {EXECUTE}",
                details=_args_details(problems),
            )
            return MetaOutcome(outcome.content, True, refused)
        tool_id: str = call.args["tool_id"]
        if catalog.tool(tool_id) is None:
            # Another route's tool, a hidden one and none at all: one answer, one record.
            refused = await pipeline.refuse(
                principal,
                Code.UNKNOWN_TOOL,
                f"unknown tool_id {tool_id!r}",
                errors=[FieldError("/tool_id", f"unknown tool_id {tool_id!r}")],
                traceparent=call.traceparent,
            )
            return MetaOutcome(_unknown_tool(tool_id).content, True, refused)
        request = ProposalRequest(
            tool_id=tool_id,
            args=call.args["args"],
            idempotency_key=call.args.get("idempotency_key") or call.idempotency_key,
            trace_id=call.trace_id,
            session_id=call.session_id,
            dry_run=call.dry_run,
        )
        answer = await pipeline.propose(
            principal, request, traceparent=call.traceparent, via=catalog.mode
        )
        content, is_error = await self._executed(principal, call, answer)
        return MetaOutcome(content, is_error, answer)

    async def _executed(
        self, principal: Principal, call: MetaCall, answer: Answer
    ) -> tuple[dict[str, Any], bool]:
        """A proposal's answer as the model reads it; a large result kept aside."""
        if answer.status == 202:  # held for a person (broker.approvals): nothing ran yet
            return pending_content(msgspec.json.decode(answer.body)), True
        decision = _decision.decode(answer.body)
        execution = decision.execution or _Execution()
        if decision.code == Code.SCHEMA_INVALID.value:
            problem = _problem(
                "ARGS_INVALID",
                decision.reason or "the arguments do not match the tool's schema",
                details={
                    **_args_details(decision.errors, inner=True),
                    "proposal_id": decision.proposal_id,
                },
            )
            return problem.content, True
        if decision.decision == "approved" and execution.status == "succeeded":
            result = execution.result or {}
            kept = await self._kept.answer(
                principal.tenant or "", principal.route or "", call.session_id, result
            )
            return (result if kept is None else kept), False
        if decision.decision == "approved" and execution.status == "dry_run":
            return {"dry_run": True, "preview": execution.result}, False
        error = execution.error or {}
        content: dict[str, Any] = {
            "error": {
                "category": decision.category or error.get("category"),
                "code": decision.code or error.get("code"),
                "reason": decision.reason or error.get("message"),
                "remediation": decision.remediation,
            }
        }
        return content, True


class _Execution(msgspec.Struct):
    status: str | None = None
    result: Any = None
    error: dict[str, Any] | None = None


class _Decision(msgspec.Struct):
    """The members of a proposal's answer that a meta-tool's outcome reads (decoded into a
    struct: the rest of the answer is never built as Python objects)."""

    proposal_id: str | None = None
    decision: str | None = None
    category: str | None = None
    code: str | None = None
    reason: str | None = None
    remediation: str | None = None
    errors: list[FieldError] = []
    execution: _Execution | None = None


_decision = msgspec.json.Decoder(_Decision)


def _unknown_tool(tool_id: str) -> MetaOutcome:
    # Word for word the same whether the id is another route's, hidden, or no tool's at all:
    # PATH_NOT_FOUND, as a leaf path that names no tool (§3.4).
    return _problem(
        "PATH_NOT_FOUND",
        f"no tool {tool_id!r}: use an id from tool_browse",
        details={"field": "tool_id", "tool_id": tool_id},
    )
