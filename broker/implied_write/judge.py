"""Judges claims against the executions recorded for a trace or session (pure functions)."""

from __future__ import annotations

import re
from collections.abc import Sequence, Set

import msgspec

from broker.implied_write.detector import Detector
from broker.implied_write.executed import ExecutedValues
from broker.implied_write.identifiers import RecordedIdentifiers
from broker.implied_write.inflection import singular
from broker.implied_write.model import Claim, ExecutionFact, Judgement, Mismatch, ToolVocabulary
from broker.implied_write.quantities import extract_quantities
from broker.implied_write.text import mask_quotes, normalise

__all__ = ("check", "judge", "with_quantities")

_WORD = re.compile(r"[a-z]+")


class _Facts:
    """The executions of one check, indexed lazily (most claims need little of it)."""

    def __init__(self, executions: Sequence[ExecutionFact]) -> None:
        self.executions = executions
        self.succeeded = {e.tool for e in executions if e.status == "succeeded"}
        self.refused = {e.tool for e in executions if e.status in ("failed", "rejected")}
        self.dry = {e.tool for e in executions if e.status == "dry_run"}
        self._recorded: RecordedIdentifiers | None = None
        self._values: dict[tuple[str | None, bool], ExecutedValues] = {}
        self._tool_identifiers: dict[str, RecordedIdentifiers] = {}

    @property
    def recorded(self) -> RecordedIdentifiers:
        """Identifiers of every succeeded call."""
        if self._recorded is None:
            self._recorded = RecordedIdentifiers(
                d for e in self.executions if e.status == "succeeded" for d in (e.args, e.result)
            )
        return self._recorded

    def identifiers_of(self, tool: str) -> RecordedIdentifiers:
        """Identifiers any call of one tool recorded, whatever its outcome."""
        if tool not in self._tool_identifiers:
            self._tool_identifiers[tool] = RecordedIdentifiers(
                d for e in self.executions if e.tool == tool for d in (e.args, e.result)
            )
        return self._tool_identifiers[tool]

    def values(self, tool: str | None, succeeded_only: bool = True) -> ExecutedValues:
        """Values of one tool's calls (``None``: every tool's)."""
        key = (tool, succeeded_only)
        if key not in self._values:
            self._values[key] = ExecutedValues(
                d
                for e in self.executions
                if (tool is None or e.tool == tool)
                and (e.status == "succeeded" or not succeeded_only)
                for d in (e.args, e.result)
            )
        return self._values[key]


def _words(claim: Claim) -> frozenset[str]:
    return frozenset(singular(w) for w in _WORD.findall(claim.text.lower()))


def _attribute(claim: Claim, facts: _Facts, detector: Detector | None) -> str | None:
    """The executed call a claim with no tool points to: the one tool whose calls record an
    identifier or a quantity the claim cites, or failing that the one whose calls record a
    field of a cited quantity's kind.  Read-only tools back no claim and are never chosen,
    nor is a tool whose vocabulary lacks the claim's verb when that verb names an action."""
    if not claim.identifiers and not claim.quantities:
        return None
    words = _words(claim)
    read_only: Set[str] = detector.read_only_tools if detector is not None else frozenset()
    tools = [
        tool
        for tool in dict.fromkeys(e.tool for e in facts.executions)
        if tool not in read_only and (detector is None or detector.may_back(claim.verb, tool))
    ]
    strong, weak = [], []
    for tool in tools:
        recorded = facts.identifiers_of(tool)
        values = facts.values(tool, succeeded_only=False)
        if any(i in recorded for i in claim.identifiers) or any(
            values.agrees(q, words) for q in claim.quantities
        ):
            strong.append(tool)
        elif any(values.has_kind(q, words) for q in claim.quantities):
            weak.append(tool)
    chosen = strong or weak
    return chosen[0] if len(chosen) == 1 else None


def _disagreement(claim: Claim, tool: str, facts: _Facts) -> Mismatch | None:
    """The first cited quantity that disagrees with the tool's succeeded calls, unless
    another call of the trace recorded that value."""
    if not claim.quantities:
        return None
    words = _words(claim)
    own = facts.values(tool)
    for quantity in claim.quantities:
        mismatch = own.disagreement(quantity, words)
        if mismatch is None:
            continue
        # Another call's amount or date may be cited beside this one ("25 USD of the 120 USD
        # you paid"); a currency, though, belongs to the amount that agreed.
        if isinstance(mismatch.claimed, str) and quantity.kind == "money":
            return mismatch
        if not facts.values(None).contains(quantity):
            return mismatch
    return None


def with_quantities(claim: Claim) -> Claim:
    """The claim with the quantities of the text it speaks for (its sentence, or its part of
    a sentence it shares with other claims); quoted passages are not its words."""
    if claim.quantities:
        return claim
    parts = claim.cites or ((claim.start, claim.end),)
    found = tuple(
        quantity
        for begin, finish in parts
        for quantity in extract_quantities(
            mask_quotes(normalise(claim.text[begin - claim.start : finish - claim.start]))
        )
    )
    return msgspec.structs.replace(claim, quantities=found) if found else claim


def _judge_one(claim: Claim, facts: _Facts, detector: Detector | None) -> Judgement:
    if facts.executions:
        claim = with_quantities(claim)  # nothing to compare them with otherwise
    tool = claim.tool
    via = ""
    if tool is None:
        tool = _attribute(claim, facts, detector)
        if tool is None:
            why = (
                "nothing it cites points to an executed call"
                if (claim.identifiers or claim.quantities)
                else "it cites nothing that points to an executed call"
            )
            return Judgement(
                claim=claim,
                status="unsupported",
                reason=f"claims '{claim.verb}' but no tool's vocabulary matches and {why}",
            )
        claim = msgspec.structs.replace(claim, tool=tool)
        via = " (attributed by what the claim cites)"
    if tool in facts.succeeded:
        missing = [i for i in claim.identifiers if i not in facts.recorded]
        if missing:
            return Judgement(
                claim=claim,
                status="unknown_identifier",
                reason=f"{tool} succeeded{via} but no executed call records " + ", ".join(missing),
            )
        mismatch = _disagreement(claim, tool, facts)
        if mismatch is not None:
            return Judgement(
                claim=claim,
                status="contradicted",
                reason=f"{tool} executed with {mismatch.field} {mismatch.executed}, "
                f"the claim says {mismatch.claimed}{via}",
                mismatch=mismatch,
            )
        return Judgement(claim=claim, status="supported", reason=f"{tool} succeeded{via}")
    if tool in facts.refused:
        return Judgement(
            claim=claim,
            status="contradicted",
            reason=f"every execution of {tool} failed or was rejected{via}",
        )
    why = "only a dry run" if tool in facts.dry else "no execution"
    return Judgement(claim=claim, status="unsupported", reason=f"{why} of {tool} is recorded")


def judge(
    claims: Sequence[Claim],
    executions: Sequence[ExecutionFact],
    detector: Detector | None = None,
) -> list[Judgement]:
    """One judgement per claim, in order.

    A claim with no tool is first attributed to the executed call its identifiers or
    quantities point to (with ``detector``, never a read-only tool nor one whose vocabulary
    lacks the claim's action verb); the judgement's claim then names that tool.

    ``supported``: a succeeded execution of the claimed tool exists, every identifier the
    claim cites is recorded in some succeeded execution's args or result, and every quantity
    it cites agrees with the tool's executed values.
    ``unknown_identifier``: the tool succeeded but a cited identifier is recorded nowhere.
    ``contradicted``: the tool's executions were only failed or rejected, or a cited quantity
    disagrees with what it executed (``mismatch`` names the field).
    ``unsupported``: anything else (no execution, only dry runs, or no tool attributed).
    """
    facts = _Facts(executions)
    return [_judge_one(claim, facts, detector) for claim in claims]


def check(
    text: str,
    vocabularies: Sequence[ToolVocabulary] | Detector,
    executions: Sequence[ExecutionFact],
) -> list[Judgement]:
    """Find the claims in ``text`` and judge them; pass a ``Detector`` to reuse its tables."""
    detector = vocabularies if isinstance(vocabularies, Detector) else Detector(vocabularies)
    return judge(detector.find_claims(text), executions, detector)
