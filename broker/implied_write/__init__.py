"""Implied-write detection: find prose that claims an action happened and judge it.

A pure library (no I/O, no network, no model): ``Detector`` finds claim sentences and
attributes them to tools through their ``ToolVocabulary`` (or, for claims in words no
vocabulary holds, leaves the tool to what the claim cites); ``judge`` compares the claims,
their identifiers and their quantities with the ``ExecutionFact`` records of the trace or
session.
"""

from __future__ import annotations

from broker.implied_write.detector import Detector, find_claims
from broker.implied_write.identifiers import extract_identifiers
from broker.implied_write.inflection import lemmatize
from broker.implied_write.judge import check, judge, with_quantities
from broker.implied_write.model import (
    Claim,
    ExecutionFact,
    ExecutionStatus,
    Judgement,
    Mismatch,
    Quantity,
    ToolVocabulary,
    Verdict,
)
from broker.implied_write.quantities import extract_quantities
from broker.implied_write.vocabulary import default_vocabulary

__all__ = (
    "Claim",
    "Detector",
    "ExecutionFact",
    "ExecutionStatus",
    "Judgement",
    "Mismatch",
    "Quantity",
    "ToolVocabulary",
    "Verdict",
    "check",
    "default_vocabulary",
    "extract_identifiers",
    "extract_quantities",
    "find_claims",
    "judge",
    "lemmatize",
    "with_quantities",
)
