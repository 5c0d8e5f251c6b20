"""Judges claims against the executions recorded for a trace or session (pure functions)."""

from __future__ import annotations

from collections.abc import Sequence

from broker.implied_write.detector import Detector
from broker.implied_write.identifiers import RecordedIdentifiers
from broker.implied_write.model import Claim, ExecutionFact, Judgement, ToolVocabulary

__all__ = ("check", "judge")


def judge(claims: Sequence[Claim], executions: Sequence[ExecutionFact]) -> list[Judgement]:
    """One judgement per claim, in order.

    ``supported``: a succeeded execution of the claimed tool exists and every identifier
    the claim cites is recorded in some succeeded execution's args or result.
    ``unknown_identifier``: the tool succeeded but a cited identifier is recorded nowhere.
    ``contradicted``: the tool's executions were only failed or rejected.
    ``unsupported``: anything else (no execution, only dry runs, or no tool attributed).
    """
    succeeded = {e.tool for e in executions if e.status == "succeeded"}
    refused = {e.tool for e in executions if e.status in ("failed", "rejected")}
    dry = {e.tool for e in executions if e.status == "dry_run"}
    recorded: RecordedIdentifiers | None = None
    judgements: list[Judgement] = []
    for claim in claims:
        tool = claim.tool
        if tool is None:
            judgements.append(
                Judgement(
                    claim=claim,
                    status="unsupported",
                    reason=f"claims '{claim.verb}' but no tool's vocabulary matches the claim",
                )
            )
        elif tool in succeeded:
            if recorded is None:
                recorded = RecordedIdentifiers(
                    document
                    for e in executions
                    if e.status == "succeeded"
                    for document in (e.args, e.result)
                )
            missing = [i for i in claim.identifiers if i not in recorded]
            if missing:
                judgements.append(
                    Judgement(
                        claim=claim,
                        status="unknown_identifier",
                        reason=f"{tool} succeeded but no executed call records "
                        + ", ".join(missing),
                    )
                )
            else:
                judgements.append(
                    Judgement(claim=claim, status="supported", reason=f"{tool} succeeded")
                )
        elif tool in refused:
            judgements.append(
                Judgement(
                    claim=claim,
                    status="contradicted",
                    reason=f"every execution of {tool} failed or was rejected",
                )
            )
        else:
            why = "only a dry run" if tool in dry else "no execution"
            judgements.append(
                Judgement(claim=claim, status="unsupported", reason=f"{why} of {tool} is recorded")
            )
    return judgements


def check(
    text: str,
    vocabularies: Sequence[ToolVocabulary] | Detector,
    executions: Sequence[ExecutionFact],
) -> list[Judgement]:
    """Find the claims in ``text`` and judge them; pass a ``Detector`` to reuse its tables."""
    detector = vocabularies if isinstance(vocabularies, Detector) else Detector(vocabularies)
    return judge(detector.find_claims(text), executions)
