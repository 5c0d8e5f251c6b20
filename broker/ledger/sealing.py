"""Sealing an entry into its stored line: the stored shape (``StoredRecord``, which
``broker.ledger.line_check`` re-checks a stored line against) and the view an index decodes."""

from __future__ import annotations

import hashlib
from typing import Annotated, Any

import msgspec

from broker.ledger.canonical import MAX_SAFE_INT, digest
from broker.ledger.model import (
    GENESIS_HASH,
    AuditRef,
    LedgerEntry,
    MediationReceipt,
    RecordedCheck,
    RecordedError,
    RecordedRepair,
    ValidatorVerdict,
)
from broker.ledger.redaction import REDACTED, redacted_canonical_json, sensitive_key_set

__all__ = [
    "SeqView",
    "StoredRecord",
    "decode_seq",
    "seal",
]

_Hash = Annotated[str, msgspec.Meta(pattern=r"^sha256:[0-9a-f]{64}$")]
_Int = Annotated[int, msgspec.Meta(ge=-MAX_SAFE_INT, le=MAX_SAFE_INT)]
_Seq = Annotated[int, msgspec.Meta(ge=1, le=MAX_SAFE_INT)]


class StoredRecord(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True,
                   forbid_unknown_fields=True):  # fmt: skip
    """The exact stored shape, fields in JCS (sorted) order; args/result kept as raw JSON.

    ``hash`` defaults to "" and defaults are omitted, so encoding a copy with ``hash=""`` yields
    the canonical body the hash is computed over.
    """

    args_hash: _Hash
    args_redacted: msgspec.Raw
    attempt_outcomes: tuple[str, ...] = ()
    attempts: _Int
    cache: str | None = None
    category: str | None
    code: str | None
    config_hash: str
    decision: str
    decision_us: _Int
    dry_run: bool
    ended_at: str | None = None
    errors: tuple[RecordedError, ...] = ()
    execution_status: str | None
    execution_us: _Int | None
    failed_check: RecordedCheck | None = None
    hash: str = ""
    idempotency_key_hash: str | None
    phase: str | None = None
    preconditions: tuple[str, ...] = ()
    prev_hash: _Hash
    proposal_id: str
    proposal_reason: str | None = None
    reason: str | None
    receipt: MediationReceipt | None = None
    remediation: str | None = None
    repairs: tuple[RecordedRepair, ...] = ()
    replayed: bool
    result_hash: _Hash | None
    result_redacted: msgspec.Raw
    route: str
    seq: _Seq
    service_account: str
    session_id: str | None
    started_at: str | None = None
    tenant: str
    time: str
    tool: str
    tool_id: str | None
    trace_id: str
    validators: tuple[ValidatorVerdict, ...]


class SeqView(msgspec.Struct, frozen=True):
    """The fields an index needs; msgspec skips the rest without building them."""

    seq: int
    hash: str
    trace_id: str
    proposal_id: str
    session_id: str | None = None
    """``None`` when the record has no session (every stored line carries the field)."""


_REDACTED_JSON = msgspec.json.encode(REDACTED).decode()
# Writes struct fields in the order they are declared: JCS order already for _Body and the
# checked verdicts and errors it holds.
_IN_ORDER = msgspec.json.Encoder()
_SEQ_VIEW = msgspec.json.Decoder(SeqView)


class _CheckedVerdict(msgspec.Struct, gc=False):
    """A ValidatorVerdict as checked and sealed: its fields bounded and in JCS order."""

    elapsed_us: _Int
    name: str
    verdict: str


class _CheckedError(msgspec.Struct, gc=False):
    """A RecordedError as checked and sealed (a type of its own, see _EntryFields)."""

    message: str
    path: str


class _CheckedCheck(msgspec.Struct, gc=False):
    """A RecordedCheck as checked and sealed (a type of its own, see _EntryFields)."""

    kind: str
    name: str | None


class _CheckedReceipt(msgspec.Struct, gc=False, kw_only=True, omit_defaults=True):
    """A MediationReceipt as checked and sealed (a type of its own, see _EntryFields)."""

    declared_by: str
    dry_run_argument: bool = False
    executed_by: str
    fidelity: str
    original_hash: str
    policy_state: str
    redacted: tuple[str, ...] = ()
    rules: tuple[str, ...] = ()
    visible_hash: str
    visible_name: str | None = None


class _CheckedRepair(msgspec.Struct, gc=False):
    """A RecordedRepair as checked and sealed (a type of its own, see _EntryFields)."""

    from_: str = msgspec.field(name="from")
    kind: str
    path: str
    to: str


_CHECKED_TYPES: dict[str, Any] = {
    "repairs": tuple[_CheckedRepair, ...],
    "receipt": _CheckedReceipt | None,
    "validators": tuple[_CheckedVerdict, ...],
    "errors": tuple[_CheckedError, ...],
    "failed_check": _CheckedCheck | None,
}

# The entry's own fields, typed and bounded exactly as the stored record declares them: what
# converting an entry to this accepts, the verifier accepts once sealed (a microsecond, where
# decoding the sealed line again cost several). Verdicts and errors convert to types of their
# own because msgspec passes instances of the declared struct type through unchecked.
_ENTRY_FIELDS: Any = msgspec.defstruct(
    "_EntryFields",
    [
        (field.name, _CHECKED_TYPES.get(field.name, field.type))
        for field in msgspec.structs.fields(StoredRecord)
        if field.name in LedgerEntry.__struct_fields__ and field.type is not msgspec.Raw
    ],
    kw_only=True,
    gc=False,  # holds no cycles; spares the collector tracking one object per record
)


# What seal encodes: StoredRecord's fields but "hash", in the same (JCS) order, filled
# positionally (keywords cost two microseconds more) and written in declaration order (sorting
# them cost another half). Nothing here is checked or defaulted: _ENTRY_FIELDS checked the
# entry's part, and a field left out of the JCS form when empty (errors, remediation and the
# newer fields that older records lack) is passed UNSET.
_Body = msgspec.defstruct(
    "_Body",
    [(field.name, Any) for field in msgspec.structs.fields(StoredRecord) if field.name != "hash"],
    gc=False,
)


def decode_seq(line: bytes) -> SeqView:
    """Seq, hash, trace, proposal and session id of a stored line (``msgspec.DecodeError`` if bad)."""
    return _SEQ_VIEW.decode(line)


def seal(entry: LedgerEntry, head: AuditRef | None) -> tuple[bytes, AuditRef]:
    """Redact, hash and chain ``entry`` after ``head``: the stored line (with "\\n") and its ref.

    Raises:
        ValueError: the entry has fields of the wrong type or out of JCS range (a caller bug).
    """
    try:
        checked = msgspec.convert(entry, _ENTRY_FIELDS, from_attributes=True)
    except msgspec.ValidationError as exc:
        raise ValueError(f"ledger entry {entry.proposal_id!r} cannot be sealed: {exc}") from exc
    sensitive = sensitive_key_set(entry.sensitive_keys)
    args_canonical = redacted_canonical_json(entry.args, sensitive)
    if entry.result is None:
        result_canonical, result_hash = b"null", None
    else:
        result_canonical = redacted_canonical_json(entry.result, sensitive)
        result_hash = digest(result_canonical)
    seq = 1 if head is None else head.seq + 1
    body = _Body(
        digest(args_canonical),  # args_hash
        msgspec.Raw(args_canonical),  # args_redacted
        checked.attempt_outcomes or msgspec.UNSET,
        checked.attempts,
        msgspec.UNSET if checked.cache is None else checked.cache,
        checked.category,
        checked.code,
        checked.config_hash,
        checked.decision,
        checked.decision_us,
        checked.dry_run,
        msgspec.UNSET if checked.ended_at is None else checked.ended_at,
        checked.errors or msgspec.UNSET,
        checked.execution_status,
        checked.execution_us,
        msgspec.UNSET if checked.failed_check is None else checked.failed_check,
        checked.idempotency_key_hash,
        msgspec.UNSET if checked.phase is None else checked.phase,
        checked.preconditions or msgspec.UNSET,
        GENESIS_HASH if head is None else head.hash,  # prev_hash
        checked.proposal_id,
        msgspec.UNSET if checked.proposal_reason is None else checked.proposal_reason,
        checked.reason,
        msgspec.UNSET if checked.receipt is None else checked.receipt,
        msgspec.UNSET if checked.remediation is None else checked.remediation,
        _redacted_repairs(checked.repairs, sensitive) if checked.repairs else msgspec.UNSET,
        checked.replayed,
        result_hash,
        msgspec.Raw(result_canonical),  # result_redacted
        checked.route,
        seq,
        checked.service_account,
        checked.session_id,
        msgspec.UNSET if checked.started_at is None else checked.started_at,
        checked.tenant,
        checked.time,
        checked.tool,
        checked.tool_id,
        checked.trace_id,
        checked.validators,
    )
    canonical = _IN_ORDER.encode(body)
    record_hash = "sha256:" + hashlib.sha256(canonical).hexdigest()
    line = b"".join((canonical[:-1], b',"hash":"', record_hash.encode(), b'"}\n'))
    return line, AuditRef(seq, record_hash)


def _redacted_repairs(
    repairs: tuple[_CheckedRepair, ...], sensitive: frozenset[str]
) -> tuple[_CheckedRepair, ...]:
    """The repairs, their values redacted where the path crosses a sensitive key (as in args)."""
    if not sensitive:
        return repairs
    kept = []
    for repair in repairs:
        parts = repair.path.split("/")[2:]  # "", "args", then the keys and indexes
        names = {p.replace("~1", "/").replace("~0", "~").casefold() for p in parts}
        if names & sensitive:
            repair = _CheckedRepair(_REDACTED_JSON, repair.kind, repair.path, _REDACTED_JSON)
        kept.append(repair)
    return tuple(kept)
