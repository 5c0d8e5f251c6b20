"""The approver inbox on two real broker processes behind one Redis: a person signed in on one
decides on the other (the session is signed, not kept in a process), and processes that do not
share the session key do not accept each other's cookies.

What executed is judged by the demo backend's effects file (shared by both processes)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.procs import REDIS_URL, Launcher, credit, launcher_for, redis_reachable
from tests.redis_helpers import missing_redis

pytestmark = pytest.mark.redis

GUARDED = {"Authorization": "Bearer demo-guarded-token"}
SIGNING_KEY = "inbox-processes-token-signing-key-0123456789"


def approval_only(data: dict[str, Any]) -> None:
    """The demo without guarded_billing's policy (issue 24's): these tests are about the inbox."""
    data.pop("policy", None)
    data["routes"]["guarded_billing"].pop("require_session_id", None)


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    if not redis_reachable(REDIS_URL):
        missing_redis(f"no Redis at {REDIS_URL}")
    yield from launcher_for(tmp_path)


def hidden(html: str, name: str) -> str:
    found = re.search(rf'name="{name}" value="([^"]+)"', html)
    assert found, f"no {name} field in the page"
    return found.group(1)


async def test_signed_in_on_one_process_approved_on_the_other_executes_once(
    launcher: Launcher,
) -> None:
    setup = launcher.config(edit=approval_only)
    # No inbox key of its own: both derive it from the shared token signing key.
    first, second = launcher.start(setup, 2, env={"BROKER_TOKEN_SIGNING_KEY": SIGNING_KEY})
    async with httpx.AsyncClient(timeout=15) as http:
        body = credit("inbox-procs-1", amount=150)
        waiting = await http.post(first.url + "/v1/proposals", json=body, headers=GUARDED)
        assert waiting.status_code == 202, waiting.text
        approval_id = waiting.json()["approval"]["id"]

        signed = await http.post(first.url + "/ui/sign-in", data={"token": "demo-approver-token"})
        assert signed.status_code == 303, signed.text
        page = await http.get(f"{second.url}/ui/approvals/{approval_id}")
        assert page.status_code == 200, page.text
        form = {"csrf": hidden(page.text, "csrf"), "digest": hidden(page.text, "digest")}
        done = await http.post(
            f"{second.url}/ui/approvals/{approval_id}/approve", data={**form, "comment": "ok"}
        )
        assert done.status_code == 200, done.text
        assert "Approved and executed" in done.text
        again = await http.post(f"{first.url}/ui/approvals/{approval_id}/approve", data=form)
        assert again.status_code == 200  # the other process, the same click: no second run

        retry = await http.post(first.url + "/v1/proposals", json=body, headers=GUARDED)
        assert retry.status_code == 200, retry.text
        assert retry.json()["execution"]["status"] == "succeeded"
    assert setup.effects_per_key() == {("acme", "inbox-procs-1"): 1}


async def test_a_process_with_another_session_key_refuses_the_cookie(launcher: Launcher) -> None:
    setup = launcher.config(edit=approval_only)
    (mine,) = launcher.start(setup, 1, env={"BROKER_UI_SESSION_KEY": "a" * 40})
    (other,) = launcher.start(setup, 1, env={"BROKER_UI_SESSION_KEY": "b" * 40})
    async with httpx.AsyncClient(timeout=15) as http:
        signed = await http.post(mine.url + "/ui/sign-in", data={"token": "demo-approver-token"})
        assert signed.status_code == 303
        assert (await http.get(mine.url + "/ui/approvals")).status_code == 200
        refused = await http.get(other.url + "/ui/approvals")
        assert refused.status_code == 303
        assert refused.headers["location"] == "/ui/sign-in"
