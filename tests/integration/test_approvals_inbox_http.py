"""The approver inbox (``/ui``) over real HTTP: signing in, the session cookie, the pending list,
one approval with its trace, approving and denying through forms, and every refusal (CSRF,
route tokens, expired sessions, unknown ids, a tampered digest) with nothing decided.

What executed is judged by the demo backend's own list of credits and by the ledger read back
and verified, never by the pages alone.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from adapters.demo import DemoBackend
from broker.config import BrokerConfig
from broker.config.model import PolicyConfig
from broker.ledger import JsonlLedgerSink, verify
from broker.plugins import Backend
from broker.stores import MemoryStore
from broker.stores.approvals import ApprovalRow
from broker.taxonomy import StoreUnavailableError
from broker.ui.csrf import csrf_token
from broker.ui.sessions import SessionKeys
from tests.conftest import BILLING, Clock, credit

GUARDED = {"Authorization": "Bearer demo-guarded-token"}
APPROVER = {"Authorization": "Bearer demo-approver-token"}
APPROVER_TOKEN = "demo-approver-token"
SESSION_TTL_S = 600.0

MakeBroker = Callable[..., tuple[str, Mapping[str, Backend]]]


@pytest.fixture(scope="module")
def ingress() -> str:
    """The inbox never reaches the proposal fast path; one ingress is enough here."""
    return "routed"


def inbox_config(demo_config: BrokerConfig) -> BrokerConfig:
    """The demo with guarded_billing's approval alone (its session policy is issue 24's) and a
    session TTL shorter than an approval's expiry, so a test can end the one, not the other."""
    routes = dict(demo_config.routes)
    routes["guarded_billing"] = msgspec.structs.replace(
        routes["guarded_billing"], require_session_id=False
    )
    service = msgspec.structs.replace(demo_config.service, ui_session_ttl_s=SESSION_TTL_S)
    return msgspec.structs.replace(
        demo_config, policy=PolicyConfig(), routes=routes, service=service
    )


@pytest.fixture
def broker(make_broker: MakeBroker, demo_config: BrokerConfig) -> tuple[str, DemoBackend]:
    url, backends = make_broker(inbox_config(demo_config))
    demo = backends["demo"]
    assert isinstance(demo, DemoBackend)
    return url, demo


@pytest.fixture
def demo(broker: tuple[str, DemoBackend]) -> DemoBackend:
    return broker[1]


@pytest.fixture
async def api(broker: tuple[str, DemoBackend]) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=broker[0], timeout=10) as client:
        yield client


@pytest.fixture
async def browser(broker: tuple[str, DemoBackend]) -> AsyncIterator[httpx.AsyncClient]:
    """A cookie-keeping client that does not follow redirects (each answer is checked)."""
    async with httpx.AsyncClient(base_url=broker[0], timeout=10) as client:
        yield client


class _Forms(HTMLParser):
    """Every form of a page: its action and its fields' names and values."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: dict[str, dict[str, str]] = {}
        self._current: dict[str, str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        given = {k: v or "" for k, v in attrs}
        if tag == "form":
            self._current = self.forms.setdefault(given.get("action", ""), {})
        elif tag in ("input", "textarea") and self._current is not None and "name" in given:
            self._current[given["name"]] = given.get("value", "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._current = None


def forms(html: str) -> dict[str, dict[str, str]]:
    parser = _Forms()
    parser.feed(html)
    return parser.forms


async def sign_in(client: httpx.AsyncClient, token: str = APPROVER_TOKEN) -> httpx.Response:
    answer = await client.post("/ui/sign-in", data={"token": token})
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == "/ui/approvals"
    return answer


async def pending(api: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    answer = await api.post("/v1/proposals", json=body, headers=GUARDED)
    assert answer.status_code == 202, answer.text
    decided: dict[str, Any] = answer.json()
    assert decided["decision"] == "pending_approval"
    return decided


async def opened(client: httpx.AsyncClient, approval_id: str) -> dict[str, dict[str, str]]:
    """The detail page's forms (approve and deny), checking the page answered."""
    page = await client.get(f"/ui/approvals/{approval_id}")
    assert page.status_code == 200, page.text
    return forms(page.text)


async def status_of(api: httpx.AsyncClient, approval_id: str) -> str:
    seen = await api.get(f"/v1/approvals/{approval_id}", headers=APPROVER)
    assert seen.status_code == 200, seen.text
    return str(seen.json()["status"])


async def ledger(tmp_path: Path) -> list[dict[str, Any]]:
    sink = JsonlLedgerSink(tmp_path / "ledger.jsonl")
    try:
        assert (await verify(sink)).ok
        return [msgspec.structs.asdict(r) async for r in sink.read()]
    finally:
        await sink.close()


# -- signing in -----------------------------------------------------------------------------------


async def test_sign_in_gives_a_strict_http_only_cookie_for_the_inbox_only(
    browser: httpx.AsyncClient,
) -> None:
    form = await browser.get("/ui/sign-in")
    assert form.status_code == 200
    assert form.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in form.headers["content-security-policy"]
    assert '<label for="token">' in form.text

    answer = await sign_in(browser)
    cookie = answer.headers["set-cookie"]
    attributes = {part.strip().split("=")[0].lower() for part in cookie.split(";")}
    assert {"httponly", "path", "samesite", "max-age"} <= attributes
    assert "Path=/ui" in cookie
    assert "samesite=strict" in cookie.lower()
    assert f"Max-Age={int(SESSION_TTL_S)}" in cookie
    assert "secure" not in attributes  # plain HTTP here; over HTTPS it is Secure
    assert APPROVER_TOKEN not in cookie
    assert APPROVER_TOKEN not in answer.headers["location"]

    listed = await browser.get("/ui/approvals")
    assert listed.status_code == 200, listed.text
    assert "Signed in as <strong>approver:demo-approver</strong>" in listed.text
    assert APPROVER_TOKEN not in listed.text


async def test_over_https_the_cookie_is_secure(browser: httpx.AsyncClient) -> None:
    """Behind a TLS-terminating proxy uvicorn trusts (here: loopback), as in production."""
    answer = await browser.post(
        "/ui/sign-in",
        data={"token": APPROVER_TOKEN},
        headers={
            "X-Forwarded-Proto": "https",
            "Origin": f"https://{browser.base_url.netloc.decode()}",
        },
    )
    assert answer.status_code == 303, answer.text
    attributes = {part.strip().lower() for part in answer.headers["set-cookie"].split(";")}
    assert "secure" in attributes


async def test_without_a_session_the_inbox_sends_you_to_sign_in(
    browser: httpx.AsyncClient, api: httpx.AsyncClient, demo: DemoBackend
) -> None:
    assert (await browser.get("/ui/approvals")).headers["location"] == "/ui/sign-in"
    first = await pending(api, credit("anon-1", amount=150))
    approval = first["approval"]
    posted = await browser.post(
        f"/ui/approvals/{approval['id']}/approve", data={"digest": approval["digest"]}
    )
    assert posted.status_code == 401
    assert "Nothing was decided" in posted.text
    forged = await browser.get(
        "/ui/approvals", headers={"Cookie": "broker_inbox=eyJzdWIiOiJ4In0.bm90LXNpZ25lZA"}
    )
    assert forged.status_code == 303  # a cookie not signed by the broker is no session
    assert await status_of(api, approval["id"]) == "pending"
    assert demo.credits == []


async def test_route_and_unknown_tokens_are_refused_at_sign_in(browser: httpx.AsyncClient) -> None:
    route = await browser.post("/ui/sign-in", data={"token": "demo-guarded-token"})
    assert route.status_code == 403
    assert "route token" in route.text
    assert "set-cookie" not in route.headers
    assert "demo-guarded-token" not in route.text

    unknown = await browser.post("/ui/sign-in", data={"token": "not-a-token"})
    assert unknown.status_code == 401
    assert "not known" in unknown.text
    empty = await browser.post("/ui/sign-in", data={"token": "  "})
    assert empty.status_code == 422
    assert (await browser.get("/ui/approvals")).status_code == 303  # still signed out


async def test_an_admin_token_signs_in_as_the_json_api_lets_it_decide(
    browser: httpx.AsyncClient,
) -> None:
    await sign_in(browser, "demo-admin-token")
    listed = await browser.get("/ui/approvals")
    assert listed.status_code == 200
    assert "admin:demo-admin" in listed.text


async def test_an_expired_session_is_refused_and_decides_nothing(
    browser: httpx.AsyncClient, api: httpx.AsyncClient, demo: DemoBackend, clock: Clock
) -> None:
    first = await pending(api, credit("late-1", amount=150))
    await sign_in(browser)
    approve = (await opened(browser, first["approval"]["id"]))[
        f"/ui/approvals/{first['approval']['id']}/approve"
    ]
    clock.advance(SESSION_TTL_S + 1)  # the session ends; the approval (3600 s) does not

    posted = await browser.post(f"/ui/approvals/{first['approval']['id']}/approve", data=approve)
    assert posted.status_code == 401, posted.text
    assert "session has expired" in posted.text
    assert "Nothing was decided" in posted.text
    assert "Max-Age=0" in posted.headers["set-cookie"]  # the stale cookie is cleared
    assert await status_of(api, first["approval"]["id"]) == "pending"
    assert demo.credits == []


async def test_sign_out_ends_the_session(browser: httpx.AsyncClient) -> None:
    await sign_in(browser)
    page = await browser.get("/ui/approvals")
    out = forms(page.text)["/ui/sign-out"]
    answer = await browser.post("/ui/sign-out", data=out)
    assert answer.status_code == 200
    assert "signed out" in answer.text
    assert "Max-Age=0" in answer.headers["set-cookie"]
    assert (await browser.get("/ui/approvals")).status_code == 303


# -- reading --------------------------------------------------------------------------------------


async def test_the_list_and_the_detail_show_what_a_person_decides_on(
    browser: httpx.AsyncClient, api: httpx.AsyncClient
) -> None:
    await sign_in(browser)
    empty = await browser.get("/ui/approvals")
    assert "Nothing waits for your decision" in empty.text
    first = await pending(api, credit("list-1", amount=150))
    approval = first["approval"]

    listed = await browser.get("/ui/approvals")
    assert listed.status_code == 200
    assert '<th scope="col">Tool</th>' in listed.text
    assert f'href="/ui/approvals/{approval["id"]}"' in listed.text
    for shown in ("issue_credit", "acme", "guarded_billing", "amount: 150 USD", "amount &gt; 100"):
        assert shown in listed.text, shown
    assert 'src="/ui/static/inbox.js"' in listed.text  # the progressive refresh
    script = await browser.get("/ui/static/inbox.js")
    assert script.status_code == 200
    assert script.headers["content-type"].startswith("text/javascript")

    detail = await browser.get(f"/ui/approvals/{approval['id']}")
    assert detail.status_code == 200
    assert approval["digest"] in detail.text
    assert "O-55300" in detail.text  # the (redacted) args
    assert "pending_approval" in detail.text  # the trace's record of the request
    page_forms = forms(detail.text)
    approve = page_forms[f"/ui/approvals/{approval['id']}/approve"]
    assert approve["digest"] == approval["digest"]
    assert approve["csrf"]
    assert page_forms[f"/ui/approvals/{approval['id']}/deny"]["csrf"] == approve["csrf"]
    assert '<label for="deny-comment">' in detail.text


async def test_an_unknown_approval_is_a_404_page_and_approving_it_runs_nothing(
    browser: httpx.AsyncClient, demo: DemoBackend
) -> None:
    await sign_in(browser)
    page = await browser.get("/ui/approvals/apr_nope")
    assert page.status_code == 404
    assert page.headers["content-type"].startswith("text/html")
    csrf = forms((await browser.get("/ui/approvals")).text)["/ui/sign-out"]["csrf"]
    posted = await browser.post(
        "/ui/approvals/apr_nope/approve", data={"csrf": csrf, "digest": "sha256:" + "0" * 64}
    )
    assert posted.status_code == 404
    assert "apr_nope" in posted.text
    assert demo.credits == []


# -- deciding -------------------------------------------------------------------------------------


async def test_approve_with_a_comment_executes_and_the_agents_retry_gets_the_result(
    browser: httpx.AsyncClient, api: httpx.AsyncClient, demo: DemoBackend, tmp_path: Path
) -> None:
    body = credit("ok-1", amount=150)
    first = await pending(api, body)
    approval_id = first["approval"]["id"]
    await sign_in(browser)
    approve = (await opened(browser, approval_id))[f"/ui/approvals/{approval_id}/approve"]

    done = await browser.post(
        f"/ui/approvals/{approval_id}/approve",
        data={**approve, "comment": "checked the order with the customer"},
    )
    assert done.status_code == 200, done.text
    assert "Approved and executed" in done.text
    assert "succeeded" in done.text
    assert [c["amount"] for c in demo.credits] == [150]

    retry = await api.post("/v1/proposals", json=body, headers=GUARDED)
    assert retry.status_code == 200, retry.text
    assert retry.json()["replayed"] is True
    assert retry.json()["execution"]["status"] == "succeeded"
    seen = (await api.get(f"/v1/approvals/{approval_id}", headers=APPROVER)).json()
    assert seen["comment"] == "checked the order with the customer"
    assert seen["decided_by"] == "approver:demo-approver"

    again = await browser.post(f"/ui/approvals/{approval_id}/approve", data=approve)
    assert again.status_code == 200  # a second click: the same state, nothing runs again
    assert len(demo.credits) == 1
    listed = await browser.get("/ui/approvals")
    assert approval_id not in listed.text

    records = [r for r in await ledger(tmp_path) if r["trace_id"] == first["trace_id"]]
    decided = [r for r in records if r["decision"] == "approval_approved"]
    assert [(r["service_account"], r["reason"]) for r in decided] == [
        ("approver:demo-approver", "checked the order with the customer")
    ]
    assert [r["execution_status"] for r in records if r["execution_status"]] == ["succeeded"]


async def test_deny_needs_a_comment_and_the_agent_reads_it(
    browser: httpx.AsyncClient, api: httpx.AsyncClient, demo: DemoBackend
) -> None:
    body = credit("no-1", amount=150)
    first = await pending(api, body)
    approval_id = first["approval"]["id"]
    await sign_in(browser)
    deny = (await opened(browser, approval_id))[f"/ui/approvals/{approval_id}/deny"]

    bare = await browser.post(f"/ui/approvals/{approval_id}/deny", data=deny)
    assert bare.status_code == 422
    assert "needs a comment" in bare.text
    assert await status_of(api, approval_id) == "pending"

    denied = await browser.post(
        f"/ui/approvals/{approval_id}/deny", data={**deny, "comment": "order was refunded"}
    )
    assert denied.status_code == 200, denied.text
    assert "Denied" in denied.text
    assert demo.credits == []
    retry = await api.post("/v1/proposals", json=body, headers=GUARDED)
    assert retry.status_code == 403
    assert retry.json()["code"] == "approval_denied"
    assert "order was refunded" in retry.json()["reason"]

    approve = {"csrf": deny["csrf"], "digest": first["approval"]["digest"]}
    late = await browser.post(f"/ui/approvals/{approval_id}/approve", data=approve)
    assert late.status_code == 409  # the other decision: explained, not taken
    assert "Already denied" in late.text
    assert "order was refunded" in late.text
    assert demo.credits == []


async def test_approved_but_the_precondition_failed_meanwhile_says_so(
    browser: httpx.AsyncClient, api: httpx.AsyncClient, demo: DemoBackend
) -> None:
    first = await pending(api, credit("pre-1", amount=150))
    approval_id = first["approval"]["id"]
    await sign_in(browser)
    approve = (await opened(browser, approval_id))[f"/ui/approvals/{approval_id}/approve"]
    order = credit()["args"]["order_id"]
    demo._order("acme", order).paid = False  # type: ignore[union-attr]  # the world moved

    answer = await browser.post(f"/ui/approvals/{approval_id}/approve", data=approve)
    assert answer.status_code == 200, answer.text
    assert "did not execute" in answer.text
    assert "precondition_failed" in answer.text
    assert demo.credits == []


async def test_an_expired_approval_cannot_be_approved_from_a_page_left_open(
    browser: httpx.AsyncClient, api: httpx.AsyncClient, demo: DemoBackend, clock: Clock
) -> None:
    first = await pending(api, credit("exp-1", amount=150))
    approval_id = first["approval"]["id"]
    await sign_in(browser)
    approve = (await opened(browser, approval_id))[f"/ui/approvals/{approval_id}/approve"]
    clock.advance(3601)  # past expires_s (3600); the session ended too: sign in again
    await sign_in(browser)
    csrf = forms((await browser.get("/ui/approvals")).text)["/ui/sign-out"]["csrf"]

    late = await browser.post(
        f"/ui/approvals/{approval_id}/approve", data={**approve, "csrf": csrf}
    )
    assert late.status_code == 409
    assert "expired" in late.text
    assert demo.credits == []


# -- forged and tampered forms --------------------------------------------------------------------


async def test_forged_or_missing_csrf_tokens_decide_nothing(
    broker: tuple[str, DemoBackend], api: httpx.AsyncClient, demo: DemoBackend
) -> None:
    first = await pending(api, credit("csrf-1", amount=150))
    approval_id = first["approval"]["id"]
    path = f"/ui/approvals/{approval_id}/approve"
    async with (
        httpx.AsyncClient(base_url=broker[0]) as mine,
        httpx.AsyncClient(base_url=broker[0]) as other,
    ):
        await sign_in(mine)
        await sign_in(other)
        form = (await opened(mine, approval_id))[path]
        others = (await opened(other, approval_id))[path]
        assert others["csrf"] != form["csrf"]  # bound to each session

        attempts = [
            {"digest": form["digest"]},  # missing
            {**form, "csrf": "forged"},
            {**form, "csrf": others["csrf"]},  # another session's
        ]
        for data in attempts:
            refused = await mine.post(path, data=data)
            assert refused.status_code == 403, data
            assert "CSRF" in refused.text
        deny = f"/ui/approvals/{approval_id}/deny"
        refused = await mine.post(deny, data={"comment": "x"})
        assert refused.status_code == 403

        for header in ({"Origin": "https://evil.example"}, {"Sec-Fetch-Site": "cross-site"}):
            cross = await mine.post(path, data=form, headers=header)
            assert cross.status_code == 403, header
            assert "Nothing was decided" in cross.text

    assert await status_of(api, approval_id) == "pending"
    assert demo.credits == []


async def test_a_tampered_digest_approves_nothing(
    browser: httpx.AsyncClient, api: httpx.AsyncClient, demo: DemoBackend, tmp_path: Path
) -> None:
    first = await pending(api, credit("dig-1", amount=150))
    approval_id = first["approval"]["id"]
    await sign_in(browser)
    form = (await opened(browser, approval_id))[f"/ui/approvals/{approval_id}/approve"]
    for digest in ("sha256:" + "a" * 64, "nonsense"):
        refused = await browser.post(
            f"/ui/approvals/{approval_id}/approve", data={**form, "digest": digest}
        )
        assert refused.status_code == 409, refused.text
        assert "not the one shown" in refused.text
    twice = await browser.post(
        f"/ui/approvals/{approval_id}/approve",
        content=f"csrf={form['csrf']}&digest={form['digest']}&digest=x",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert twice.status_code == 400
    assert await status_of(api, approval_id) == "pending"
    assert demo.credits == []
    decisions = [
        r["decision"] for r in await ledger(tmp_path) if r["trace_id"] == first["trace_id"]
    ]
    assert decisions == ["pending_approval"]
    small = await api.post("/v1/proposals", json=credit("b-1", amount=5), headers=BILLING)
    assert small.status_code == 200  # the JSON API is untouched by the inbox


async def test_without_a_session_key_the_inbox_says_so_and_the_api_works(
    make_broker: MakeBroker, demo_config: BrokerConfig
) -> None:
    url, _ = make_broker(inbox_config(demo_config), secrets={})
    async with httpx.AsyncClient(base_url=url) as client:
        page = await client.get("/ui/sign-in")
        assert page.status_code == 503
        assert "BROKER_UI_SESSION_KEY" in page.text
        refused = await client.post("/ui/sign-in", data={"token": APPROVER_TOKEN})
        assert refused.status_code == 503
        assert "set-cookie" not in refused.headers
        listed = await client.get("/v1/approvals", headers=APPROVER)
        assert listed.status_code == 200


class _ApprovalsDown(MemoryStore):
    """A store that cannot read approvals (the rest works): the inbox must fail closed."""

    async def get_approval(self, approval_id: str) -> ApprovalRow | None:
        raise StoreUnavailableError("approvals unreachable")

    async def list_approvals(self, status: str | None) -> list[ApprovalRow]:
        raise StoreUnavailableError("approvals unreachable")


async def test_an_unreachable_store_is_a_503_page_and_decides_nothing(
    make_broker: MakeBroker, demo_config: BrokerConfig, clock: Clock
) -> None:
    config = inbox_config(demo_config)
    secrets = {"BROKER_TOKEN_SIGNING_KEY": "test-signing-key-0123456789abcdef"}
    url, backends = make_broker(config, store=_ApprovalsDown(), secrets=secrets)
    async with httpx.AsyncClient(base_url=url) as client:
        await sign_in(client)
        listed = await client.get("/ui/approvals")
        assert listed.status_code == 503
        assert listed.headers["content-type"].startswith("text/html")
        assert "cannot reach its state" in listed.text
        # No page can show the form's token while the store is down: derive it as the broker
        # does, so the post reaches the store rather than stopping at the CSRF check.
        keys = SessionKeys.from_config(config, secrets, clock)
        assert keys is not None
        session = keys.read(client.cookies["broker_inbox"])
        assert session is not None
        csrf = csrf_token(keys, session)
        posted = await client.post(
            "/ui/approvals/apr_x/approve", data={"csrf": csrf, "digest": "sha256:" + "0" * 64}
        )
        assert posted.status_code == 503
        assert "Nothing was decided" in posted.text
    demo = backends["demo"]
    assert isinstance(demo, DemoBackend)
    assert demo.credits == []


async def test_other_addresses_under_ui_are_html_pages_too(browser: httpx.AsyncClient) -> None:
    missing = await browser.get("/ui/nothing/here")
    assert missing.status_code == 404
    assert missing.headers["content-type"].startswith("text/html")
    assert "/ui/nothing/here" in missing.text
    assert (await browser.get("/ui")).headers["location"] == "/ui/approvals"
    css = await browser.get("/ui/static/inbox.css")
    assert css.status_code == 200
    assert css.headers["content-type"].startswith("text/css")
