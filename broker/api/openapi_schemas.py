"""``components.schemas`` of the OpenAPI document: msgspec's schemas of the very structs the
handlers decode and encode, refined where the handlers check more than the structs' types.

Output structs list every field as ``required`` (msgspec encodes defaults), except where the
struct omits defaults. A few documentation-only structs below mirror the answers the handlers
build as dicts.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any, Literal

import msgspec

from broker.api.approvals import ApprovalList, ApproveRequest, DenyRequest
from broker.api.openapi_catalog import CATALOG_INPUTS, CATALOG_OUTPUTS
from broker.api.openapi_catalog import refine as refine_catalog
from broker.api.openapi_native import NATIVE_INPUTS, NATIVE_OUTPUTS
from broker.api.openapi_native import refine as refine_native
from broker.api.openapi_responses import REF
from broker.approvals.model import ApprovalView
from broker.approvals.records import PendingDecision
from broker.config import REGISTERED_NAME
from broker.ledger.model import LedgerRecord
from broker.ledger.verify import VerifyReport
from broker.model import Decision, Problem, ProblemDetails, ProposalRequest, Risk
from broker.prose_audit import CheckRequest, CheckResult
from broker.resolution import ResolutionAnswer, ResolutionRequest
from broker.taxonomy import Category, Code
from broker.tool_id import MAX_TOOL_ID_LENGTH, TOOL_ID_PATTERN
from broker.tools.registration import Registration
from broker.tools.registration_views import ConfigToolView, RegistrationAnswer
from broker.validators.checks import CHECK_KINDS

__all__ = ["schemas"]

# -- documentation-only structs: the answers the handlers build as dicts --------------------------


class ToolDescription(msgspec.Struct, kw_only=True):
    """A tool as an agent runtime needs it; never adapters or credentials."""

    name: str
    tool_id: str
    description: str
    input_schema: dict[str, Any]
    risk: Risk
    preconditions: list[str]
    idempotent: bool


class ToolList(msgspec.Struct, kw_only=True):
    """The tools the caller's route may call (every tool, for an admin)."""

    tools: list[ToolDescription]


class TraceRecords(msgspec.Struct, kw_only=True):
    """The ledger records of one trace, in chain order: proposal, decision, execution."""

    trace_id: str
    records: list[LedgerRecord]


class Liveness(msgspec.Struct, kw_only=True):
    """The process is alive."""

    status: Literal["ok"]


class ReadinessChecks(msgspec.Struct, kw_only=True, omit_defaults=True):
    config: Literal["ok"]
    store: Literal["ok", "unavailable"]
    ledger: Literal["ok", "unavailable"]
    load: Literal["ok", "overloaded", "draining"]
    redis_durability: Literal["ok", "volatile_allowed", "volatile", "unchecked"] | None = None
    """The Redis store only: whether it could lose idempotency records (``broker.redis_durability``)."""


class Readiness(msgspec.Struct, kw_only=True):
    """Whether the store and the ledger are reachable (the config is loaded by construction)."""

    status: Literal["ok", "unavailable"]
    checks: ReadinessChecks


_INPUT_STRUCTS: tuple[type[msgspec.Struct], ...] = (
    ProposalRequest,
    CheckRequest,
    Registration,
    ResolutionRequest,
    ApproveRequest,
    DenyRequest,
    *NATIVE_INPUTS,
    *CATALOG_INPUTS,
)
_OUTPUT_STRUCTS: tuple[type[msgspec.Struct], ...] = (
    RegistrationAnswer,
    ConfigToolView,
    Decision,
    Problem,
    ProblemDetails,
    ToolList,
    TraceRecords,
    VerifyReport,
    CheckResult,
    Liveness,
    Readiness,
    ResolutionAnswer,
    PendingDecision,
    ApprovalView,
    ApprovalList,
    *NATIVE_OUTPUTS,
    *CATALOG_OUTPUTS,
)

_FIELD_DOCS: dict[str, dict[str, str]] = {
    "ProposalRequest": {
        "tool": (
            "The tool to run, as listed by GET /v1/tools. Exactly one of tool and tool_id names "
            "the tool."
        ),
        "tool_id": (
            "The tool's stable id (namespace:name@version or namespace:name#hash8), as listed by "
            "GET /v1/tools; instead of tool."
        ),
        "args": "The tool's arguments; checked against its input_schema.",
        "preconditions": (
            "What the model believes holds. The broker always checks the tool's own declared "
            "preconditions whatever is listed; a name the broker does not know is a SCHEMA "
            "rejection (unknown_precondition)."
        ),
        "idempotency_key": (
            "Required for every tool whose risk is not read: 1-255 printable ASCII characters, "
            "scoped to (tenant, route). Same key, same tool and equal args replays the stored "
            "answer; different tool or args is 422 idempotency_key_reused. May be sent as the "
            "Idempotency-Key header instead; if both are given they must be equal."
        ),
        "reason": "Why the model proposes this, for the audit trail.",
        "trace_id": (
            "1-128 printable ASCII characters without spaces; when absent or not of that form, "
            "taken from traceparent or generated, and returned."
        ),
        "session_id": "The conversation this proposal belongs to.",
        "dry_run": (
            "Run the whole chain but execute nothing and spend no budget, rate or idempotency "
            "state; a dry run never satisfies a later real run with the same key."
        ),
    },
    "Decision": {
        "proposal_id": "prp_ followed by a ULID.",
        "decision": "approved or rejected; a failed execution of an approved proposal is approved.",
        "category": "The failure category (null when the proposal succeeded).",
        "code": "The failure code (null when the proposal succeeded).",
        "remediation": "What the agent should do next, in one line (e.g. ASK_FOR_MORE: ...).",
        "errors": "For SCHEMA failures: each problem located by an RFC 6901 JSON Pointer.",
        "replayed": "true when this is the stored answer to an earlier request with the same key.",
        "execution": "The adapter call; null when nothing was executed.",
        "audit": "Where the proposal landed in the ledger's hash chain.",
        "repairs": (
            "Only when the route's argument repair changed the arguments: each coercion, located "
            "by an RFC 6901 JSON Pointer (the tool received the repaired arguments)."
        ),
        "cached": "Only on an answer served from the read cache (the backend was not called).",
    },
    "LedgerRecord": {
        "failed_check": "Which check refused (rejections and failed executions); null otherwise.",
        "preconditions": "The preconditions the proposal listed.",
        "proposal_reason": "The proposal's own reason (reason is the broker's, for a refusal).",
        "started_at": "When the execution started (RFC 3339 UTC); null when nothing executed.",
        "ended_at": "When the execution ended (RFC 3339 UTC); null when nothing executed.",
        "attempt_outcomes": (
            "How each call to the backend ended, in order: succeeded, or the failure's code."
        ),
        "receipt": (
            "What the route's model was offered of the tool (its mediation rules); absent on "
            "older records."
        ),
        "repairs": "What argument repair changed in args (values as JSON text).",
        "cache": "For tools with read_cache: hit, miss or stored; null otherwise.",
    },
    "Execution": {
        "status": "succeeded, failed (then error is set and the HTTP status is 502/504), dry_run.",
        "result": "The adapter's result (or its preview for a dry run).",
        "started_at": "RFC 3339 UTC with milliseconds.",
        "ended_at": "RFC 3339 UTC with milliseconds.",
        "redacted": (
            "The result's keys the tool's redact_result took out (at any depth); absent when "
            "none was."
        ),
    },
}


def _struct_types(roots: Iterable[type[msgspec.Struct]]) -> dict[str, type[msgspec.Struct]]:
    """Every struct reachable from ``roots``, by the name msgspec gives its component."""
    found: dict[str, type[msgspec.Struct]] = {}
    for info in msgspec.inspect.multi_type_info(list(roots)):
        _collect(info, found)
    return found


def _collect(info: msgspec.inspect.Type, found: dict[str, type[msgspec.Struct]]) -> None:
    if isinstance(info, msgspec.inspect.StructType):
        if info.cls.__name__ in found:
            return
        found[info.cls.__name__] = info.cls
        for item in info.fields:
            _collect(item.type, found)
        return
    for attr in ("item_type", "key_type", "value_type"):
        inner = getattr(info, attr, None)
        if isinstance(inner, msgspec.inspect.Type):
            _collect(inner, found)
    for inner in getattr(info, "types", None) or getattr(info, "item_types", None) or ():
        if isinstance(inner, msgspec.inspect.Type):
            _collect(inner, found)


def schemas() -> dict[str, Any]:
    _, schemas = msgspec.json.schema_components(
        [*_INPUT_STRUCTS, *_OUTPUT_STRUCTS], ref_template=REF
    )
    for schema in schemas.values():
        # msgspec releases differ in whether a struct's docstring keeps its indentation; cleaned
        # here, the document (committed, and checked for drift) is the same under either.
        if isinstance(schema.get("description"), str):
            schema["description"] = inspect.cleandoc(schema["description"])
    inputs = {cls.__name__ for cls in _INPUT_STRUCTS}
    for name, cls in _struct_types(_OUTPUT_STRUCTS).items():
        if name in inputs or cls.__struct_config__.omit_defaults:
            continue
        # msgspec encodes every field of these, defaults included: a client may rely on them.
        # Fields that default to UNSET are the exception: they appear only when they say something.
        schema = schemas[name]
        unset = {f.encode_name for f in msgspec.structs.fields(cls) if f.default is msgspec.UNSET}
        schema["required"] = [p for p in schema.get("properties", {}) if p not in unset]
    for name, docs in _FIELD_DOCS.items():
        for prop, text in docs.items():
            schemas[name]["properties"][prop]["description"] = text
    schemas["ProposalRequest"]["properties"]["idempotency_key"]["anyOf"][0].update(
        {"minLength": 1, "maxLength": 255, "pattern": "^[\\x20-\\x7e]+$"}
    )
    # What the handlers check beyond the structs' types, so that a body the document allows is
    # one the broker accepts: a registered tool's name, and the trace or session a check names.
    schemas["Registration"]["properties"]["name"]["pattern"] = REGISTERED_NAME.pattern
    schemas["CheckRequest"]["anyOf"] = [
        {"required": [key], "properties": {key: {"type": "string", "minLength": 1}}}
        for key in ("trace_id", "session_id")
    ]
    categories = [category.value for category in Category]
    codes = [code.value for code in Code]
    for name in ("Problem", "ProblemDetails"):
        properties = schemas[name]["properties"]
        properties["category"] = {"enum": categories, "description": "The failure category."}
        properties["code"] = {"enum": codes, "description": "The failure code."}
        properties["type"]["description"] = "urn:action-broker:problem:<code>"
        properties["status"].update({"minimum": 400, "maximum": 599})
    # Exactly one of the two names the tool (checked on decoding, with a pointer when not), and
    # an id follows the grammar, with a version or a hash (seeds/004 §1).
    schemas["ProposalRequest"]["oneOf"] = [{"required": ["tool"]}, {"required": ["tool_id"]}]
    schemas["ProposalRequest"]["properties"]["tool_id"]["anyOf"][0].update(
        {"maxLength": MAX_TOOL_ID_LENGTH, "pattern": TOOL_ID_PATTERN}
    )
    problem = schemas["Problem"]["properties"]
    problem["failed_check"] = {
        "anyOf": [{"$ref": REF.format(name="FailedCheck")}, {"type": "null"}],
        "description": (
            "Which check refused, for programs (reason is for people); set on every rejection "
            "and failed execution."
        ),
    }
    schemas["FailedCheck"]["properties"]["kind"] = {
        "enum": list(CHECK_KINDS),
        "description": "The kind of check that refused.",
    }
    schemas["FailedCheck"]["properties"]["name"]["description"] = (
        "The config name of what refused (precondition, budget, rate limit, rule, route, tool); "
        "null where nothing has a name."
    )
    schemas["ToolDescription"]["properties"]["input_schema"]["description"] = (
        "The JSON Schema the tool's args are checked against."
    )
    refine_native(schemas)
    refine_catalog(schemas)
    return schemas
