"""Judging an agent's prose against what the ledger says the broker executed.

The detector (``broker.implied_write``) is pure; this module brings it the facts: the ledger
records of the trace or session, as the caller is allowed to see them, and it records and
counts every check.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from broker.config import ToolConfig
from broker.ids import new_ulid
from broker.implied_write import (
    Detector,
    ExecutionFact,
    ExecutionStatus,
    Judgement,
    Mismatch,
    ToolVocabulary,
    check,
    default_vocabulary,
)
from broker.model import Principal, TraceId
from broker.taxonomy import IMPLIED_WRITE_VIOLATION, POLICY

if TYPE_CHECKING:
    from broker.ledger import LedgerRecord, LedgerSink
    from broker.metrics import BrokerMetrics

__all__ = [
    "CHECK_TOOL",
    "CheckRequest",
    "CheckResult",
    "ImpliedWriteChecker",
    "TranscriptLine",
    "lint_transcript",
    "vocabularies",
]

_EXECUTED = frozenset(("succeeded", "failed"))

CHECK_TOOL = "_implied_write_check"
"""The ``tool`` of ledger records that note an implied-write check (never a real tool)."""


class CheckRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    text: str
    trace_id: TraceId | None = None
    session_id: TraceId | None = None


class ClaimVerdict(msgspec.Struct, kw_only=True):
    text: str
    start: int
    end: int
    tool: str | None
    verb: str
    identifiers: list[str]
    status: Literal["supported", "unsupported", "contradicted", "unknown_identifier"]
    reason: str
    mismatch: Mismatch | None = None
    """For a claim contradicted by a quantity it cites: the executed field it disagrees with."""


class CheckResult(msgspec.Struct, kw_only=True):
    violations: list[ClaimVerdict]
    claims: list[ClaimVerdict]
    trace_id: str | None
    session_id: str | None
    executions: int
    """How many executions (calls that reached the tool, succeeded or failed) the trace or
    session holds; its refusals, replays and dry runs are not executions."""


def vocabularies(tools: Mapping[str, ToolConfig]) -> list[ToolVocabulary]:
    """Each tool's declared claim words, or a default derived from its name and description."""
    found = []
    for name, tool in tools.items():
        claims = tool.claims
        if claims and (claims.verbs or claims.nouns):
            found.append(ToolVocabulary(name, frozenset(claims.verbs), frozenset(claims.nouns)))
        else:
            found.append(default_vocabulary(name, tool.description))
    return found


class ImpliedWriteChecker:
    """Checks messages for a set of tools against a ledger; built once per app."""

    def __init__(
        self,
        tools: Callable[[], tuple[int, Mapping[str, ToolConfig]]],
        ledger: LedgerSink,
        metrics: BrokerMetrics | None = None,
        *,
        config_hash: str,
    ) -> None:
        """``tools`` returns the catalog version and the tools, so that the detector is rebuilt
        (once) when a registration adds or removes claim words."""
        self._tools = tools
        self._version = -1
        self._detector = Detector([])
        self._ledger = ledger
        self._metrics = metrics
        self._config_hash = config_hash

    async def facts(self, principal: Principal, request: CheckRequest) -> list[ExecutionFact]:
        """The executions the caller may see for that trace or session, oldest first."""
        records: list[LedgerRecord] = []
        if request.trace_id:
            records = await self._ledger.by_trace(request.trace_id)
        elif request.session_id:
            records = await self._ledger.by_session(request.session_id)
        return [
            _fact(r)
            for r in records
            if r.tool != CHECK_TOOL
            and (principal.admin or (r.route == principal.route and r.tenant == principal.tenant))
        ]

    async def judge(self, principal: Principal, request: CheckRequest) -> CheckResult:
        """Judge the text's claims; nothing is counted or recorded (the linter uses this)."""
        facts = await self.facts(principal, request)
        claims = [_verdict(j) for j in check(request.text, self._current_detector(), facts)]
        return CheckResult(
            violations=[c for c in claims if c.status != "supported"],
            claims=claims,
            trace_id=request.trace_id,
            session_id=request.session_id,
            # Calls that reached an adapter; refusals, replays and dry runs are records, not
            # executions.
            executions=sum(1 for fact in facts if fact.status in _EXECUTED),
        )

    def _current_detector(self) -> Detector:
        version, tools = self._tools()
        if version != self._version:
            self._detector, self._version = Detector(vocabularies(tools)), version
        return self._detector

    async def check(self, principal: Principal, request: CheckRequest) -> CheckResult:
        """Judge, count and record the check in the ledger."""
        started = time.perf_counter()
        result = await self.judge(principal, request)
        if self._metrics is not None:
            self._metrics.implied_write_checks.inc()
            for claim in result.violations:
                label = self._metrics.tool(claim.tool)
                self._metrics.implied_write_violations.labels(label, claim.status).inc()
        await self._record(principal, request, result, started)
        return result

    async def _record(
        self, principal: Principal, request: CheckRequest, result: CheckResult, started: float
    ) -> None:
        from broker.ledger import LedgerEntry, utc_now

        ulid = new_ulid()
        digest = hashlib.sha256(request.text.encode()).hexdigest()
        await self._ledger.append(
            LedgerEntry(
                time=utc_now(),
                trace_id=request.trace_id or f"trc_{ulid}",
                session_id=request.session_id,
                proposal_id=f"iwc_{ulid}",
                route=principal.route or "",
                tenant=principal.tenant or "",
                service_account=principal.service_account,
                tool=CHECK_TOOL,
                config_hash=self._config_hash,
                # The message itself is not kept (it may quote the user); its hash is.
                args={"text_sha256": f"sha256:{digest}", "length": len(request.text)},
                result=msgspec.to_builtins(result.violations),
                decision="rejected" if result.violations else "approved",
                category=POLICY if result.violations else None,
                code=IMPLIED_WRITE_VIOLATION if result.violations else None,
                reason=f"{len(result.violations)} claim(s) without a backing execution"
                if result.violations
                else None,
                decision_us=int((time.perf_counter() - started) * 1_000_000),
            )
        )


def _fact(record: LedgerRecord) -> ExecutionFact:
    status: ExecutionStatus
    if record.execution_status in ("succeeded", "failed", "dry_run"):
        status = record.execution_status  # type: ignore[assignment]
    else:
        status = "rejected"
    args: Any = record.args_redacted if isinstance(record.args_redacted, dict) else {}
    result: Any = record.result_redacted if isinstance(record.result_redacted, dict) else None
    return ExecutionFact(tool=record.tool, status=status, args=args, result=result)


def _verdict(judgement: Judgement) -> ClaimVerdict:
    claim = judgement.claim
    return ClaimVerdict(
        text=claim.text,
        start=claim.start,
        end=claim.end,
        tool=claim.tool,
        verb=claim.verb,
        identifiers=list(claim.identifiers),
        status=judgement.status,
        reason=judgement.reason,
        mismatch=judgement.mismatch,
    )


class TranscriptLine(CheckRequest, kw_only=True):
    """One message of a JSONL transcript, as ``broker implied-writes lint`` reads it."""

    role: str | None = None


async def lint_transcript(
    lines: Iterable[bytes], checker: ImpliedWriteChecker
) -> AsyncIterator[tuple[int, CheckResult | str]]:
    """Judge each message line (1-based numbers); yields a result, or why a line is unreadable."""
    reader = msgspec.json.Decoder(TranscriptLine)
    linter = Principal(
        service_account="lint", route=None, tenant=None, tools=frozenset(), admin=True
    )
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            line = reader.decode(raw)
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            yield number, f"not a transcript line: {exc}"
            continue
        if line.role not in (None, "assistant"):
            continue  # only what the agent said can claim what the agent did
        yield number, await checker.judge(linter, line)
