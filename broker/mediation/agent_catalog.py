"""``POST /v1/catalog/mediate``: an agent's own tool declarations, as the route's model may see them.

An agent that talks to its provider itself sends the ``tools`` (and ``tool_choice``) of its
request here first and forwards what comes back. Each declaration is one of three kinds:

- **A broker tool the route offers** (by its own name, its visible name, or the encoded name a
  provider catalog exposes): the broker's mediated declaration replaces the agent's, exactly as
  ``GET /v1/tools?format=`` lists it, since every call is validated against that one and a
  declaration copied from an older catalog would mislead the model.
- **A broker tool the route does not offer**: dropped. ``hidden`` when the route's rules or the
  policy hide it, ``blocked`` when it is not the token's at all; a call would be refused anyway.
- **Anything else** (the agent's own tools, the provider's hosted ones): not the broker's to
  allow. Passed through untouched (``deferred``), or dropped (``blocked``) on a route with
  ``unknown_tools = "drop"``.

``tool_choice`` follows: renamed with the tool it names, dropped when that tool was dropped or no
tool is left. Nothing is recorded: the calls that follow are, each with its receipt.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import msgspec
import rfc8785

from broker.mediation.tool_choice import CHOICE_FIXERS
from broker.mediation.view import Mediated, Mediator, declaration_hash
from broker.model import FieldError, Principal
from broker.native.calls import field_error
from broker.native.catalogs import declare
from broker.native.names import NameTable
from broker.tools.runtime import ToolRuntime

__all__ = [
    "CatalogMediateRequest",
    "DeclarationReceipt",
    "MediatedCatalog",
    "RequestProblem",
    "mediate_request",
]

Format = Literal["openai", "openai-responses", "anthropic"]
MAX_TOOLS = 512
"""Declarations per request: providers take far fewer (OpenAI 128); each is hashed (RFC 8785,
pure Python), so the bound also bounds the work."""


class CatalogMediateRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The tool part of an agent's provider request, and which provider's shape it has."""

    format: Format
    tools: Annotated[list[Any], msgspec.Meta(max_length=MAX_TOOLS)]
    """The request's ``tools``, unchanged."""
    tool_choice: Any = None
    """The request's ``tool_choice``, unchanged (absent or null: none)."""


class DeclarationReceipt(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What became of one declaration of the request (in request order)."""

    declared: str
    """Its name as declared (a nameless hosted tool: its ``type``)."""
    declared_by: str
    """Who wrote what the provider sees: ``agent``, or the broker tool's ``config``, ``backend``
    or ``mcp``."""
    executed_by: str
    """``agent``, ``provider`` (a hosted tool), or the broker adapter kind."""
    policy_state: str
    """A broker tool's state on the route (``allowed``, ``renamed``, ``replaced``, ``wrapped``),
    ``hidden`` or ``blocked`` (dropped), or ``deferred`` (passed through: not the broker's)."""
    fidelity: str | None = None
    """``pass_through`` (as declared), ``normalized`` (the broker's declaration differs) or
    ``emulated`` (a replacement); absent when dropped."""
    tool: str | None = None
    """The broker tool it is."""
    visible_name: str | None = None
    """The name the provider sees, when it is not ``declared``."""
    original_hash: str | None = None
    """SHA-256 of the RFC 8785 form of the declaration ``{name, description, input_schema}`` as
    the agent sent it (a function declaration's)."""
    visible_hash: str | None = None
    """The same of what the provider sees (absent when dropped)."""
    rules: tuple[str, ...] = ()
    """The route's rules that shaped it."""
    dropped: str | None = None
    """Why it is not in ``tools``."""


class MediatedCatalog(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The request's tools as the route's model may see them, in the request's format."""

    format: str
    tools: list[dict[str, Any]]
    names: dict[str, str]
    """Each exposed name that differs from its broker tool's name (as ``GET /v1/tools``)."""
    receipts: list[DeclarationReceipt]
    tool_choice: Any = None
    """The request's ``tool_choice``, fixed up; absent when it was dropped (or not given)."""
    tool_choice_change: Literal["renamed", "dropped"] | None = None
    """What became of ``tool_choice``; absent when it is unchanged."""


class RequestProblem(Exception):
    """The request as a whole cannot be mediated: every problem, located."""

    def __init__(self, errors: list[FieldError]) -> None:
        super().__init__("; ".join(f"{e.path}: {e.message}" for e in errors))
        self.errors = errors


# -- reading declarations ---------------------------------------------------------------------


class _Function(msgspec.Struct):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None


class _ChatTool(msgspec.Struct):
    type: Literal["function"]
    function: _Function


class _ResponsesTool(msgspec.Struct):
    type: Literal["function"]
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None


class _AnthropicTool(msgspec.Struct):
    name: str
    input_schema: dict[str, Any]
    description: str | None = None
    type: Literal["custom"] | None = None


@dataclass(frozen=True, slots=True)
class _Declared:
    at: str
    """Its pointer in the body (``/tools/3``)."""
    name: str
    raw: dict[str, Any]
    function: tuple[str, dict[str, Any]] | None
    """``(description, schema)`` of a function declaration; ``None`` for other kinds."""
    original: str | None = None
    """The function declaration's hash (``declaration_hash``)."""


def _hashed(
    at: str, raw: dict[str, Any], name: str, description: str | None, schema: dict[str, Any]
) -> _Declared:
    try:
        original = declaration_hash(name, description or "", schema)
    except rfc8785.CanonicalizationError as exc:  # an integer past 2**53, say: no exact hash
        problem = f"cannot be hashed as RFC 8785 JSON: {exc}"
        raise RequestProblem([FieldError(at, problem)]) from None
    return _Declared(at, name, raw, (description or "", schema), original)


def _function(format: str, raw: dict[str, Any], at: str) -> _Declared | None:
    """``raw`` as a function declaration, ``None`` when it is another kind of tool."""
    kind = raw.get("type")
    try:
        if format == "openai":
            if kind != "function":
                return None
            fn = msgspec.convert(raw, _ChatTool).function
            return _hashed(at, raw, fn.name, fn.description, fn.parameters or {})
        if format == "openai-responses":
            if kind != "function":
                return None
            item = msgspec.convert(raw, _ResponsesTool)
            return _hashed(at, raw, item.name, item.description, item.parameters or {})
        if "type" in raw and kind != "custom":  # an Anthropic server tool (web_search_…, bash_…)
            return None
        tool = msgspec.convert(raw, _AnthropicTool)
        return _hashed(at, raw, tool.name, tool.description, tool.input_schema)
    except msgspec.ValidationError as exc:
        raise RequestProblem([field_error(exc, at)]) from None


def _declarations(request: CatalogMediateRequest) -> list[_Declared]:
    found: list[_Declared] = []
    errors: list[FieldError] = []
    first: dict[str, str] = {}
    for i, raw in enumerate(request.tools):
        at = f"/tools/{i}"
        if not isinstance(raw, dict):
            errors.append(FieldError(at, "expected a tool declaration (an object)"))
            continue
        try:
            declared = _function(request.format, raw, at)
        except RequestProblem as exc:
            errors.extend(exc.errors)
            continue
        if declared is None:  # another kind: named by its name, else its type
            kind = raw.get("type")
            if not isinstance(kind, str) or not kind:
                errors.append(FieldError(at + "/type", "expected a non-empty string"))
                continue
            own = raw.get("custom") if request.format == "openai" else raw  # chat: {custom: {name}}
            if isinstance(own, dict) and "name" in own:
                name, where = own["name"], at + ("/custom/name" if own is not raw else "/name")
            else:
                name, where = kind, at + "/type"
            if not isinstance(name, str) or not name:
                errors.append(FieldError(where, "expected a non-empty string"))
                continue
            declared = _Declared(at, name, raw, None)
        elif declared.name in first:
            where = at + ("/function/name" if request.format == "openai" else "/name")
            errors.append(FieldError(where, f"declared twice (first at {first[declared.name]})"))
            continue
        if declared.function is not None:
            first.setdefault(declared.name, at)
        found.append(declared)
    if errors:
        raise RequestProblem(errors)
    return found


# -- mediating them ---------------------------------------------------------------------------


@dataclass(slots=True)
class _Outcome:
    receipt: DeclarationReceipt
    declaration: dict[str, Any] | None = None
    """What the provider sees (``None``: dropped)."""
    visible: str | None = None
    """The provider-visible name, for ``tool_choice``."""
    names: dict[str, str] = field(default_factory=dict)
    """Exposed names that differ from their broker tool's (``declare``'s ``names``)."""


def mediate_request(
    mediator: Mediator, names: NameTable, principal: Principal, request: CatalogMediateRequest
) -> MediatedCatalog:
    """The request's tools after the route's rules; :class:`RequestProblem` for a body that
    cannot be read (nothing is mediated then)."""
    declared = _declarations(request)
    route = principal.route or ""
    view = mediator.view(route)
    offered = {view.to_real.get(t.name, t.name): t for t in mediator.visible_to(principal)}
    tokens = {t.name for t in mediator.registry.visible_to(principal)}
    known = mediator.registry.tools
    drop_unknown = mediator.drops_unknown_tools(route)
    exposed_names: dict[str, str] = {}
    outcomes: dict[str, _Outcome] = {}
    taken: dict[str, _Outcome] = {}  # broker tool -> the declaration that got it
    ordered: list[_Outcome] = []
    for item in declared:
        real = _broker_name(item.name, names, view.to_real) if item.function else None
        original = item.original
        entry = view.entry(real) if real is not None and real in offered else None
        if real is not None and entry is not None:
            outcome = _broker_tool(item, original, entry, offered[real], request.format)
            if real in taken:  # two names of one tool: the provider gets it once
                first = taken[real]
                receipt = msgspec.structs.replace(
                    outcome.receipt,
                    fidelity=None,
                    visible_hash=None,
                    dropped=f"the same tool as {first.receipt.declared!r}",
                )
                outcome = _Outcome(receipt, None, first.visible)  # a choice of it follows
            else:
                taken[real] = outcome
                exposed_names.update(outcome.names)
        elif real is not None and real in known:
            state = "hidden" if real in tokens else "blocked"
            why = "hidden on this route" if state == "hidden" else "not a tool of this route"
            outcome = _dropped(item, original, state, why)
        elif drop_unknown:
            outcome = _dropped(item, original, "blocked", "not a broker tool (unknown_tools)")
        else:
            outcome = _deferred(item, original)
        outcomes[item.name] = outcome
        ordered.append(outcome)
    tools = [o.declaration for o in ordered if o.declaration is not None]
    choice, change = _fix_choice(request, outcomes, bool(tools))
    return MediatedCatalog(
        format=request.format,
        tools=tools,
        names=exposed_names,
        receipts=[o.receipt for o in ordered],
        tool_choice=choice,
        tool_choice_change=change,
    )


def _broker_name(declared: str, names: NameTable, to_real: dict[str, str]) -> str:
    """The broker tool a declared name means: a visible name maps to its tool, an exposed
    (encoded) name decodes."""
    if declared in to_real:
        return to_real[declared]
    name = names.resolve(declared)
    return to_real.get(name, name)


def _broker_tool(
    item: _Declared, original: str | None, entry: Mediated, visible: ToolRuntime, format: str
) -> _Outcome:
    """The broker's declaration of the tool in the agent's one's place."""
    listed = declare([visible], format)
    (declaration,) = listed["tools"]
    if format == "anthropic" and "cache_control" in item.raw:
        # The agent's caching breakpoint is its own business; the broker keeps it in place.
        declaration = {**declaration, "cache_control": item.raw["cache_control"]}
    shown = declaration.get("function", declaration)["name"]
    route_receipt = entry.receipt
    fidelity = "pass_through" if original == route_receipt.visible_hash else "normalized"
    if route_receipt.fidelity == "emulated":
        fidelity = "emulated"
    receipt = DeclarationReceipt(
        declared=item.name,
        declared_by=route_receipt.declared_by,
        executed_by=route_receipt.executed_by,
        policy_state=route_receipt.policy_state,
        fidelity=fidelity,
        tool=entry.tool.name,
        visible_name=shown if shown != item.name else None,
        original_hash=original,
        visible_hash=route_receipt.visible_hash,
        rules=route_receipt.rules,
    )
    return _Outcome(receipt, declaration, shown, listed["names"])


def _dropped(item: _Declared, original: str | None, state: str, why: str) -> _Outcome:
    receipt = DeclarationReceipt(
        declared=item.name,
        declared_by="agent",
        executed_by=_executor(item),
        policy_state=state,
        original_hash=original,
        dropped=why,
    )
    return _Outcome(receipt)


def _deferred(item: _Declared, original: str | None) -> _Outcome:
    receipt = DeclarationReceipt(
        declared=item.name,
        declared_by="agent",
        executed_by=_executor(item),
        policy_state="deferred",
        fidelity="pass_through",
        original_hash=original,
        visible_hash=original,
    )
    return _Outcome(receipt, item.raw, item.name)


def _executor(item: _Declared) -> str:
    """Who runs a tool the broker does not have: the agent its functions (and ``custom``
    tools), the provider its hosted ones."""
    if item.function is not None or item.raw.get("type") == "custom":
        return "agent"
    return "provider"


def _fix_choice(
    request: CatalogMediateRequest, outcomes: dict[str, _Outcome], any_left: bool
) -> tuple[Any, Literal["renamed", "dropped"] | None]:
    choice = request.tool_choice
    if choice is None:
        return None, None
    errors: list[FieldError] = []
    renamed = False

    def rename(name: Any, at: str) -> str | None:
        """The visible name of the declaration ``name`` (``None``: it was dropped)."""
        nonlocal renamed
        outcome = outcomes.get(name) if isinstance(name, str) else None
        if outcome is None:
            errors.append(FieldError(at, "names no tool declared in tools"))
            return None
        if outcome.visible is not None and outcome.visible != name:
            renamed = True
        return outcome.visible

    fixed = CHOICE_FIXERS[request.format](choice, rename, errors)
    if errors:
        raise RequestProblem(errors)
    if fixed is None or not any_left:
        return None, "dropped"
    return fixed, "renamed" if renamed else None
