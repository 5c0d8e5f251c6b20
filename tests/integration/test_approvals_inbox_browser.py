"""The approver inbox in a real browser: Debian's Chromium, headless, driven by Playwright, against
two real ``broker serve`` processes on one Redis (the demo config as it ships, policy and all).

A person signs in, sees the agent's pending credit, opens it, approves it with a comment, and
the agent's retry returns the executed result; a form posted without its CSRF token decides
nothing. What executed is judged by the demo backend's effects file.

``BROKER_CHROMIUM`` names the browser (``scripts/with-chromium`` sets it). Set
``BROKER_INBOX_SCREENSHOT=docs/approvals-inbox.png`` to regenerate the committed screenshot;
otherwise the screenshot goes to the test's own directory.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.procs import REDIS_URL, Launcher, credit, launcher_for, redis_reachable
from tests.redis_helpers import missing_redis

pytestmark = pytest.mark.redis

GUARDED = {"Authorization": "Bearer demo-guarded-token"}
APPROVER = {"Authorization": "Bearer demo-approver-token"}
SESSION_KEY = "browser-test-inbox-session-key-0123456789abcdef"
PNG = b"\x89PNG\r\n\x1a\n"


def _unavailable(reason: str) -> None:
    """Skip on a developer's machine without the browser; in CI the test must run."""
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture
def chromium() -> str:
    path = os.environ.get("BROKER_CHROMIUM", "")
    if not path or not os.access(path, os.X_OK):
        _unavailable(
            "no Chromium: run under scripts/with-chromium (it installs Debian's chromium "
            "package and sets BROKER_CHROMIUM)"
        )
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        _unavailable("the playwright package is not installed (pip install -e '.[dev]')")
    return path


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    if not redis_reachable(REDIS_URL):
        missing_redis(f"no Redis at {REDIS_URL}")
    yield from launcher_for(tmp_path)


async def pending_credit(http: httpx.AsyncClient, url: str, key: str) -> dict[str, Any]:
    """What the demo's guarded route asks of an agent: a session, the order looked up first,
    then a credit above 100, which waits for a person."""
    body = {**credit(key, amount=150), "session_id": f"chat-{key}"}
    lookup = {
        "tool": "lookup_order",
        "args": {"order_id": body["args"]["order_id"]},
        "session_id": body["session_id"],
    }
    looked = await http.post(url + "/v1/proposals", json=lookup, headers=GUARDED)
    assert looked.status_code == 200, looked.text
    waiting = await http.post(url + "/v1/proposals", json=body, headers=GUARDED)
    assert waiting.status_code == 202, waiting.text
    return {"body": body, **waiting.json()}


async def test_a_person_approves_a_pending_credit_in_the_browser(
    chromium: str, launcher: Launcher, tmp_path: Path
) -> None:
    from playwright.async_api import async_playwright

    setup = launcher.config()
    first, second = launcher.start(setup, 2, env={"BROKER_UI_SESSION_KEY": SESSION_KEY})
    async with httpx.AsyncClient(timeout=15) as http:
        waiting = await pending_credit(http, first.url, "browser-1")
        approval = waiting["approval"]
        assert setup.effects() == []

        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=chromium, headless=True)
            try:
                context = await browser.new_context(viewport={"width": 1180, "height": 560})
                page = await context.new_page()

                await page.goto(first.url + "/ui/approvals")
                assert page.url == first.url + "/ui/sign-in"  # not signed in yet
                await page.get_by_label("Approver token").fill("demo-approver-token")
                await page.get_by_role("button", name="Sign in").click()
                await page.wait_for_url(first.url + "/ui/approvals")
                assert "demo-approver-token" not in page.url
                cookies = await context.cookies()
                assert [(c["name"], c["httpOnly"], c["sameSite"], c["path"]) for c in cookies] == [
                    ("broker_inbox", True, "Strict", "/ui")
                ]

                # The session is the broker's, not one process's: the other one lists it too.
                await page.goto(second.url + "/ui/approvals")
                row = page.get_by_role("row").filter(has_text="issue_credit")
                await row.wait_for()
                for shown in ("acme", "guarded_billing", "amount: 150 USD", "amount > 100"):
                    assert shown in await row.inner_text(), shown
                shot = await page.screenshot(full_page=True)
                assert shot.startswith(PNG)
                target = os.environ.get("BROKER_INBOX_SCREENSHOT")
                (Path(target) if target else tmp_path / "approvals-inbox.png").write_bytes(shot)

                await row.get_by_role("link", name="issue_credit", exact=True).click()
                await page.wait_for_url(f"{second.url}/ui/approvals/{approval['id']}")
                assert approval["digest"] in await page.content()
                assert await page.get_by_role("heading", name="Trace").is_visible()

                # A form posted without its CSRF token: refused, nothing decided.
                await page.eval_on_selector_all(
                    "input[name=csrf]", "els => els.forEach(e => e.remove())"
                )
                await page.get_by_label("Comment (optional)").fill("no token")
                async with page.expect_response(lambda r: r.request.method == "POST") as posted:
                    await page.get_by_role("button", name="Approve and execute").click()
                assert (await posted.value).status == 403
                assert "CSRF" in await page.inner_text("main")
                assert setup.effects() == []
                seen = await http.get(
                    f"{first.url}/v1/approvals/{approval['id']}", headers=APPROVER
                )
                assert seen.json()["status"] == "pending"

                await page.goto(f"{second.url}/ui/approvals/{approval['id']}")
                await page.get_by_label("Comment (optional)").fill("checked with the customer")
                async with page.expect_response(lambda r: r.request.method == "POST") as posted:
                    await page.get_by_role("button", name="Approve and execute").click()
                assert (await posted.value).status == 200
                assert "Approved and executed" in await page.inner_text("main")
            finally:
                await browser.close()

        retry = await http.post(first.url + "/v1/proposals", json=waiting["body"], headers=GUARDED)
        assert retry.status_code == 200, retry.text
        assert retry.json()["replayed"] is True
        assert retry.json()["execution"]["status"] == "succeeded"
        assert setup.effects_per_key() == {("acme", "browser-1"): 1}
        seen = await http.get(f"{first.url}/v1/approvals/{approval['id']}", headers=APPROVER)
        assert seen.json()["comment"] == "checked with the customer"
        assert seen.json()["decided_by"] == "approver:demo-approver"
