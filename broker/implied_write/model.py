"""Value types of the implied-write detector: vocabularies, executions, claims and judgements."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

import msgspec

__all__ = (
    "Claim",
    "ExecutionFact",
    "ExecutionStatus",
    "Judgement",
    "ToolVocabulary",
    "Verdict",
)

ExecutionStatus: TypeAlias = Literal["succeeded", "failed", "rejected", "dry_run"]
Verdict: TypeAlias = Literal["supported", "unsupported", "contradicted", "unknown_identifier"]


class ToolVocabulary(msgspec.Struct, frozen=True):
    """The words prose uses to claim that one tool ran.

    ``verbs`` and ``nouns`` hold lemmas ("issue", "credit"); inflected forms
    ("issued", "credits") are derived when a ``Detector`` is built.
    """

    name: str
    verbs: frozenset[str]
    nouns: frozenset[str]


class ExecutionFact(msgspec.Struct, frozen=True):
    """One recorded outcome of a tool call in the trace or session being checked."""

    tool: str
    status: ExecutionStatus
    args: Mapping[str, Any] = msgspec.field(default_factory=dict)
    result: Mapping[str, Any] | None = None


class Claim(msgspec.Struct, frozen=True):
    """A sentence stating that a world-changing action has happened.

    ``start``/``end`` are character offsets of the sentence in the checked text,
    ``tool`` is the attributed tool (``None`` when no vocabulary matches) and
    ``verb`` the lemma of the action word that made it a claim.
    """

    text: str
    start: int
    end: int
    tool: str | None
    verb: str
    identifiers: tuple[str, ...] = ()


class Judgement(msgspec.Struct, frozen=True):
    """The verdict on one claim against the recorded executions."""

    claim: Claim
    status: Verdict
    reason: str

    @property
    def is_violation(self) -> bool:
        """Every verdict except ``supported`` is a violation."""
        return self.status != "supported"
