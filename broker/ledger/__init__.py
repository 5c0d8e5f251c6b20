"""The tamper-evident audit ledger: one hash-chained, redacted record per proposal.

The pipeline builds a ``LedgerEntry`` and awaits ``sink.append(entry)`` (an ``AuditRef``) before
answering; a ``LedgerUnavailableError`` means nothing was recorded and the broker fails closed
(503). A ``Checkpointer`` signs the head periodically; ``verify`` walks chain and checkpoints.
"""

from __future__ import annotations

from broker.ledger.canonical import canonical_json
from broker.ledger.checkpointer import Checkpointer, utc_now
from broker.ledger.checkpoints import (
    Checkpoint,
    CheckpointFormatError,
    CheckpointStore,
    JsonlCheckpointStore,
    RedisCheckpointStore,
    checkpoint_path_for,
    checkpoint_signature_ok,
    sign_checkpoint,
)
from broker.ledger.errors import LedgerCorruptError, LedgerUnavailableError
from broker.ledger.export import export_jsonl
from broker.ledger.jsonl import FsyncPolicy, JsonlLedgerSink
from broker.ledger.keys import (
    export_public_key,
    key_id,
    load_or_create_signing_key,
    load_public_key,
    load_signing_key,
)
from broker.ledger.model import (
    GENESIS_HASH,
    AuditRef,
    LedgerEntry,
    LedgerRecord,
    RecordedError,
    ValidatorVerdict,
)
from broker.ledger.redaction import REDACTED, redact, sensitive_key_set
from broker.ledger.redis_sink import RedisLedgerSink
from broker.ledger.sink import LedgerSink, RawBatchSource, RawRecordSource, SupportsSync
from broker.ledger.verify import VerifyReport, verify

__all__ = (
    "GENESIS_HASH",
    "REDACTED",
    "AuditRef",
    "Checkpoint",
    "CheckpointFormatError",
    "CheckpointStore",
    "Checkpointer",
    "FsyncPolicy",
    "JsonlCheckpointStore",
    "JsonlLedgerSink",
    "LedgerCorruptError",
    "LedgerEntry",
    "LedgerRecord",
    "LedgerSink",
    "LedgerUnavailableError",
    "RawBatchSource",
    "RawRecordSource",
    "RecordedError",
    "RedisCheckpointStore",
    "RedisLedgerSink",
    "SupportsSync",
    "ValidatorVerdict",
    "VerifyReport",
    "canonical_json",
    "checkpoint_path_for",
    "checkpoint_signature_ok",
    "export_jsonl",
    "export_public_key",
    "key_id",
    "load_or_create_signing_key",
    "load_public_key",
    "load_signing_key",
    "redact",
    "sensitive_key_set",
    "sign_checkpoint",
    "utc_now",
    "verify",
)
