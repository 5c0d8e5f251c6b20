"""The proposal pipeline: the validator chain, composed once per route, and the orchestrator
that runs it and carries an approved proposal through execute ▸ ledger ▸ settle.

``orchestrator`` holds :class:`Pipeline` (and ``unexecuted`` its answers that execute nothing);
``chain`` the order of the steps and ``steps`` the steps themselves; ``context`` the
per-proposal :class:`Decided`; ``answers`` and ``ledger_entry`` shape what the caller and the
ledger receive, and ``recorder`` appends to the ledger.
"""

from __future__ import annotations

from broker.pipeline.chain import Chain, Chains, Step, Verdict, build_chains
from broker.pipeline.context import Decided

__all__ = ["Chain", "Chains", "Decided", "Step", "Verdict", "build_chains"]
