"""``broker policy simulate`` on a ledger made by a scripted run over HTTP: the printed
differences are exactly the proposals the tightened rule would now block."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ROOT
from tests.fakes import demo_raw
from tests.integration.policy_helpers import (
    GUARDED,
    PROPOSALS,
    Started,
    credit,
    lookup,
    policy_brokers,
)
from tests.integration.procs import toml_dumps


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Started]]:
    yield from policy_brokers(tmp_path)


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=10) as client:
        yield client


def simulate(candidate: dict[str, Any], ledger: Path, tmp_path: Path) -> tuple[int, str]:
    candidate["service"]["ledger_path"] = str(ledger)
    path = tmp_path / f"candidate-{len(list(tmp_path.glob('candidate-*')))}.toml"
    path.write_text(toml_dumps(candidate), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "broker", "policy", "simulate", "--config", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, done.stdout


def listed(out: str, heading: str) -> set[str]:
    """The proposal ids printed under ``heading``."""
    block = out.split(heading, 1)[1] if heading in out else ""
    ids: set[str] = set()
    for line in block.splitlines()[1:]:
        if not line.startswith("  "):
            break
        ids.add(line.split()[0])
    return ids


async def test_simulate_prints_exactly_what_a_tightened_rule_would_block(
    start: Callable[..., Started], http: httpx.AsyncClient, tmp_path: Path
) -> None:
    url, _, ledger = start()

    async def post(body: dict[str, Any]) -> str:
        answer = await http.post(url + PROPOSALS, json=body, headers=GUARDED)
        assert answer.status_code in (200, 409), answer.text
        return str(answer.json()["proposal_id"])

    lookups = [await post(lookup("s-a")) for _ in range(4)]  # the fourth: demo.loop_guard
    small = await post(credit("s-a", "k1", amount=10))
    big = await post(credit("s-a", "k2", amount=60))  # both within the order's 120
    await post(credit("s-b", "k3"))  # demo.lookup_first
    await post(lookup("s-b", "O-60000"))

    code, out = simulate(demo_raw(), ledger, tmp_path)
    assert code == 0 and "0 decided differently" in out, out

    tighter = demo_raw()
    tighter["policy"]["rules"][0]["loop"]["max_calls"] = 1
    code, out = simulate(tighter, ledger, tmp_path)
    assert code == 1, out
    assert listed(out, "rule demo.loop_guard: would now block") == set(lookups[1:3]), out
    assert len(re.findall(r"^  prp_", out, re.M)) == 2, out

    with_big = demo_raw()
    with_big["policy"]["rules"].append(
        {
            "id": "ops.big_credits",
            "action": "block",
            "tools": ["issue_credit"],
            "args": [{"arg": "amount", "op": "gt", "value": 50}],
        }
    )
    code, out = simulate(with_big, ledger, tmp_path)
    assert code == 1, out
    assert listed(out, "rule ops.big_credits: would now block") == {big}, out
    assert small not in out

    looser = demo_raw()
    looser["policy"]["rules"] = looser["policy"]["rules"][:1]  # lookup_first dropped
    code, out = simulate(looser, ledger, tmp_path)
    assert "rule demo.lookup_first: would no longer block 1" in out, out

    with_states = demo_raw()
    with_states["policy"]["rules"].append(
        {
            "id": "ops.one_credit",
            "action": "block",
            "routes": ["guarded_billing"],
            "states": {
                "initial": "identify",
                "allowed": {
                    "identify": ["lookup_order"],
                    "act": ["lookup_order", "issue_credit"],
                    "done": ["lookup_order"],
                },
                "final": ["done"],
                "moves": [
                    {"from": "identify", "tool": "lookup_order", "to": "act"},
                    {"from": "act", "tool": "issue_credit", "to": "done"},
                ],
            },
        }
    )
    code, out = simulate(with_states, ledger, tmp_path)
    assert listed(out, "rule ops.one_credit: would now block") == {big}, out
    assert len(re.findall(r"^  prp_", out, re.M)) == 1, out


async def test_simulate_matches_a_phase_rule_on_the_recorded_phases(
    start: Callable[..., Started], http: httpx.AsyncClient, tmp_path: Path
) -> None:
    url, _, ledger = start()

    async def post(body: dict[str, Any]) -> str:
        answer = await http.post(url + PROPOSALS, json=body, headers=GUARDED)
        assert answer.status_code == 200, answer.text
        return str(answer.json()["proposal_id"])

    await post(lookup("s-p"))
    preview = await post(credit("s-p", "kp1", amount=10) | {"dry_run": True})
    done = await post(credit("s-p", "kp2", amount=10))

    no_previews = demo_raw()
    no_previews["policy"]["rules"].append(
        {"id": "ops.no_previews", "action": "block", "tools": ["issue_credit"],
         "phases": ["planning"]}
    )  # fmt: skip
    code, out = simulate(no_previews, ledger, tmp_path)
    assert code == 1, out
    assert listed(out, "rule ops.no_previews: would now block") == {preview}, out
    assert done not in out
