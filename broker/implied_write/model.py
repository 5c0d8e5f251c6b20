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
    "Mismatch",
    "Quantity",
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


class Quantity(msgspec.Struct, frozen=True):
    """A quantity a claim cites, normalised: what it is, not how it was written.

    ``kind`` is money (``value`` in ``unit``, an ISO currency code or ''), percent, count
    (``value`` of ``unit``, a singular noun or '' when the number stands alone), date
    (``year`` 0 when not cited), weekday (``value`` 0 = Monday) or time (``hour``, ``minute``).
    """

    kind: Literal["money", "percent", "count", "date", "weekday", "time"]
    text: str
    value: float = 0.0
    unit: str = ""
    year: int = 0
    month: int = 0
    day: int = 0
    hour: int = -1
    minute: int = -1
    plural: bool = False


class Mismatch(msgspec.Struct, frozen=True):
    """A cited quantity that disagrees with the executed call: the field it disagrees with,
    the value the claim cites and the value the call recorded."""

    field: str
    claimed: str | float
    executed: Any


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
    quantities: tuple[Quantity, ...] = ()
    """The amounts, counts, dates and times it cites; read by the judge, which compares them."""
    cites: tuple[tuple[int, int], ...] = ()
    """Character ranges of the text this claim speaks for, when several claims share its
    sentence; empty when it is the whole sentence."""


class Judgement(msgspec.Struct, frozen=True):
    """The verdict on one claim against the recorded executions."""

    claim: Claim
    status: Verdict
    reason: str
    mismatch: Mismatch | None = None
    """For a ``contradicted`` claim whose cited quantity disagrees with the execution."""

    @property
    def is_violation(self) -> bool:
        """Every verdict except ``supported`` is a violation."""
        return self.status != "supported"
