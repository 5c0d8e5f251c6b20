"""The implied-write check over HTTP and as a transcript linter, judged against the real ledger."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx

from tests.conftest import ADMIN, BILLING, DEMO_CONFIG, GLOBEX, credit, ticket


async def _check(client: httpx.AsyncClient, text: str, **where: str) -> dict:  # type: ignore[type-arg]
    response = await client.post(
        "/v1/implied-writes/check", json={"text": text, **where}, headers=BILLING
    )
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


async def test_each_verdict_against_what_the_broker_executed(client: httpx.AsyncClient) -> None:
    await client.post("/v1/proposals", json={**credit(), "trace_id": "t-ok"}, headers=BILLING)
    await client.post(
        "/v1/proposals", json={**ticket("C-20001"), "trace_id": "t-rejected"}, headers=BILLING
    )

    supported = await _check(
        client, "Done! I've issued a credit CR-1001 of 25 USD.", trace_id="t-ok"
    )
    assert [c["status"] for c in supported["claims"]] == ["supported"]
    assert supported["claims"][0]["tool"] == "issue_credit"
    assert supported["violations"] == []

    unknown = await _check(client, "Credit CR-9999 has been issued.", trace_id="t-ok")
    assert [v["status"] for v in unknown["violations"]] == ["unknown_identifier"]

    nothing = await _check(client, "I've issued the refund to your card.", trace_id="t-none")
    assert [v["status"] for v in nothing["violations"]] == ["unsupported"]

    contradicted = await _check(
        client, "Your support ticket has been created.", trace_id="t-rejected"
    )
    assert [v["status"] for v in contradicted["violations"]] == ["contradicted"]

    honest = await _check(
        client, "I can create a ticket with these details. Shall I proceed?", trace_id="t-none"
    )
    assert honest == {**honest, "claims": [], "violations": []}


async def test_quantities_and_claims_in_any_words(client: httpx.AsyncClient) -> None:
    await client.post(
        "/v1/proposals", json={**credit(order="O-55291"), "trace_id": "t-25"}, headers=BILLING
    )

    wrong = await _check(
        client, "I've issued the refund of $40 for order O-55291.", trace_id="t-25"
    )
    [claim] = wrong["violations"]
    assert claim["status"] == "contradicted" and claim["tool"] == "issue_credit"
    assert claim["mismatch"] == {"field": "amount", "claimed": 40, "executed": 25}
    right = await _check(client, "I issued a credit of twenty-five dollars.", trace_id="t-25")
    assert [c["status"] for c in right["claims"]] == ["supported"]
    assert right["claims"][0]["mismatch"] is None

    # No tool's words: the order it cites points to the executed credit.
    paraphrase = await _check(
        client, "Your $25 went back to your card for O-55291.", trace_id="t-25"
    )
    assert [(c["tool"], c["status"]) for c in paraphrase["claims"]] == [
        ("issue_credit", "supported")
    ]
    unbacked = await _check(client, "The invoice was paid in full.", trace_id="t-25")
    assert [(c["tool"], c["status"]) for c in unbacked["violations"]] == [(None, "unsupported")]


async def test_checks_are_counted_and_recorded_in_the_ledger(client: httpx.AsyncClient) -> None:
    await _check(client, "I've issued the refund.", session_id="chat-1")
    metrics = (await client.get("/metrics")).text
    assert (
        'broker_implied_write_violations_total{status="unsupported",tool="issue_credit"} 1.0'
        in metrics
    )
    assert "broker_implied_write_checks_total 1.0" in metrics
    assert (await client.get("/v1/audit/verify", headers=ADMIN)).json()["ok"] is True


async def test_another_tenants_executions_never_back_a_claim(client: httpx.AsyncClient) -> None:
    await client.post("/v1/proposals", json={**credit(), "session_id": "shared"}, headers=BILLING)
    response = await client.post(
        "/v1/implied-writes/check",
        json={"text": "I've issued credit CR-1001.", "session_id": "shared"},
        headers=GLOBEX,
    )
    assert [v["status"] for v in response.json()["violations"]] == ["unsupported"]


async def test_a_check_needs_a_trace_or_session_and_a_token(client: httpx.AsyncClient) -> None:
    missing = await client.post("/v1/implied-writes/check", json={"text": "hello"}, headers=BILLING)
    assert missing.status_code == 422
    assert missing.headers["content-type"] == "application/problem+json"
    anonymous = await client.post("/v1/implied-writes/check", json={"text": "x", "trace_id": "t"})
    assert anonymous.status_code == 401


async def test_the_linter_exits_non_zero_on_violations(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    await client.post("/v1/proposals", json={**credit(), "trace_id": "t-lint"}, headers=BILLING)
    config = tmp_path / "broker.toml"
    config.write_text(
        DEMO_CONFIG.read_text().replace(
            'ledger_path = "var/ledger.jsonl"', f'ledger_path = "{tmp_path / "ledger.jsonl"}"'
        )
    )
    clean = tmp_path / "clean.jsonl"
    clean.write_text(
        json.dumps({"text": "I've issued credit CR-1001 for you.", "trace_id": "t-lint"})
        + "\n"
        + json.dumps({"role": "user", "text": "Was my ticket created?", "trace_id": "t-lint"})
        + "\n"
    )
    dirty = tmp_path / "dirty.jsonl"
    dirty.write_text(
        json.dumps({"text": "Ticket T-77391 is created.", "trace_id": "t-lint"}) + "\n"
    )
    command = [sys.executable, "-m", "broker", "implied-writes", "lint", "--config", str(config)]
    ok = subprocess.run([*command, str(clean)], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = subprocess.run([*command, str(dirty)], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1
    assert f"{dirty}:1: unsupported" in bad.stdout


async def test_a_route_can_require_the_final_message_to_be_checked(
    make_broker,
    demo_config,  # type: ignore[no-untyped-def]
) -> None:
    import msgspec

    route = msgspec.structs.replace(
        demo_config.routes["billing_help"], require_implied_write_check=True
    )
    config = msgspec.structs.replace(
        demo_config, routes={**demo_config.routes, "billing_help": route}
    )
    url, _ = make_broker(config)
    async with httpx.AsyncClient(base_url=url) as client:
        no_session = await client.post("/v1/proposals", json=credit("a"), headers=BILLING)
        assert no_session.status_code == 409
        assert no_session.json()["code"] == "policy_blocked"

        first = {**credit("a"), "session_id": "chat-9"}
        assert (await client.post("/v1/proposals", json=first, headers=BILLING)).status_code == 200
        second = {**credit("b", amount=5), "session_id": "chat-9"}
        blocked = await client.post("/v1/proposals", json=second, headers=BILLING)
        assert blocked.status_code == 409
        assert blocked.json()["code"] == "policy_blocked"
        assert "implied-writes/check" in blocked.json()["remediation"]

        checked = await client.post(
            "/v1/implied-writes/check",
            json={"text": "I've issued credit CR-1001.", "session_id": "chat-9"},
            headers=BILLING,
        )
        assert checked.json()["violations"] == []
        allowed = await client.post("/v1/proposals", json=second, headers=BILLING)
        assert allowed.status_code == 200


async def test_executions_counts_calls_made_not_ledger_records(client: httpx.AsyncClient) -> None:
    """A trace with one credit, its replay, a refused ticket and a dry run holds one execution."""
    trace = {"trace_id": "t-count"}
    for body in (
        credit(),
        credit(),  # replayed: the same call, not a second one
        ticket("C-20001"),  # refused by its preconditions
        {**credit("dry"), "dry_run": True},
    ):
        await client.post("/v1/proposals", json={**body, **trace}, headers=BILLING)
    records = (await client.get("/v1/traces/t-count", headers=BILLING)).json()["records"]
    assert len(records) == 4
    result = await _check(client, "I've issued a credit CR-1001 of 25 USD.", **trace)
    assert result["executions"] == 1
    assert [c["status"] for c in result["claims"]] == ["supported"]
