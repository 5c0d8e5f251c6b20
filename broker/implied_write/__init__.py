"""Implied-write detection: find prose that claims an action happened and judge it.

A pure library (no I/O, no network, no model): ``Detector`` finds claim sentences and
attributes them to tools through their ``ToolVocabulary``; ``judge`` compares the claims
with the ``ExecutionFact`` records of the trace or session.
"""

from __future__ import annotations

from broker.implied_write.detector import Detector, find_claims
from broker.implied_write.identifiers import extract_identifiers
from broker.implied_write.inflection import lemmatize
from broker.implied_write.judge import check, judge
from broker.implied_write.model import (
    Claim,
    ExecutionFact,
    ExecutionStatus,
    Judgement,
    ToolVocabulary,
    Verdict,
)
from broker.implied_write.vocabulary import default_vocabulary

__all__ = (
    "Claim",
    "Detector",
    "ExecutionFact",
    "ExecutionStatus",
    "Judgement",
    "ToolVocabulary",
    "Verdict",
    "check",
    "default_vocabulary",
    "extract_identifiers",
    "find_claims",
    "judge",
    "lemmatize",
)
