"""The decision webhook over real HTTP: a broker served on a port posts to a real receiver (an
``http.server`` in a thread) that checks each Standard Webhooks signature with the secret.

Approve, deny and expiry each deliver exactly one message; a receiver that keeps failing gets
the configured attempts, then a counted failure logged whole; a URL outside the allowlist is a
config error.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import threading
import time
import tomllib
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import msgspec
import pytest

from adapters.demo import DemoBackend
from broker.app import create_app
from broker.config import BrokerConfig
from broker.config.loading import parse_config
from broker.config.model import ApprovalSettings, PolicyConfig, WebhookConfig
from broker.plugins import Backend
from broker.taxonomy import ConfigError
from tests.conftest import ROOT, Clock, credit

GUARDED = {"Authorization": "Bearer demo-guarded-token"}
APPROVER = {"Authorization": "Bearer demo-approver-token"}
KEY = b"approval-webhook-test-key-32-byt"
SECRET = "whsec_" + base64.b64encode(KEY).decode()

MakeBroker = Callable[..., tuple[str, Mapping[str, Backend]]]


class Receiver:
    """A backend's webhook endpoint: answers each POST with the next status of ``statuses``
    (the last one repeats) and keeps what it received, signature checked or not."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = statuses
        self.received: list[tuple[dict[str, str], bytes]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                outer.received.append(({k.lower(): v for k, v in self.headers.items()}, body))
                status = outer.statuses[min(len(outer.received), len(outer.statuses)) - 1]
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/approvals"

    def verified(self) -> list[dict[str, Any]]:
        """Each message received, after checking its signature the way the spec says."""
        messages = []
        for headers, body in self.received:
            message_id, timestamp = headers["webhook-id"], headers["webhook-timestamp"]
            signed = f"{message_id}.{timestamp}.".encode() + body
            expected = base64.b64encode(hmac.digest(KEY, signed, hashlib.sha256)).decode()
            sent = [s.partition(",")[2] for s in headers["webhook-signature"].split()]
            assert any(hmac.compare_digest(expected, s) for s in sent), headers
            assert headers["content-type"] == "application/json"
            messages.append({"id": message_id, **json.loads(body)})
        return messages


@pytest.fixture
def receiver_statuses() -> list[int]:
    return [204]


@pytest.fixture
def receiver(receiver_statuses: list[int]) -> Iterator[Receiver]:
    receiver = Receiver(receiver_statuses)
    thread = threading.Thread(target=receiver.server.serve_forever, daemon=True)
    thread.start()
    yield receiver
    receiver.server.shutdown()
    receiver.server.server_close()


def with_webhook(config: BrokerConfig, url: str, **settings: Any) -> BrokerConfig:
    """The demo, approval alone (no guarded_billing policy), sending decisions to ``url``."""
    routes = dict(config.routes)
    routes["guarded_billing"] = msgspec.structs.replace(
        routes["guarded_billing"], require_session_id=False
    )
    service = msgspec.structs.replace(config.service, http_allowlist=["http://127.0.0.1:*"])
    webhook = WebhookConfig(
        url=url,
        signing_secret="env:APPROVAL_WEBHOOK_SECRET",
        initial_backoff_s=0.01,
        max_backoff_s=0.05,
        **settings,
    )
    return msgspec.structs.replace(
        config,
        routes=routes,
        policy=PolicyConfig(),
        service=service,
        approvals=ApprovalSettings(webhook=webhook),
    )


def start(make_broker: MakeBroker, config: BrokerConfig) -> str:
    secrets = {
        "BROKER_TOKEN_SIGNING_KEY": "test-signing-key-0123456789abcdef",
        "APPROVAL_WEBHOOK_SECRET": SECRET,
    }
    url, _ = make_broker(config, backends={"demo": DemoBackend()}, secrets=secrets)
    return url


async def wait_for(receiver: Receiver, count: int, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while len(receiver.received) < count:
        assert time.monotonic() < deadline, f"{len(receiver.received)} of {count} received"
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.2)  # and nothing more arrives


async def pending(http: httpx.AsyncClient, key: str, amount: int = 150) -> dict[str, Any]:
    answer = await http.post("/v1/proposals", json=credit(key, amount=amount), headers=GUARDED)
    assert answer.status_code == 202, answer.text
    return dict(answer.json()["approval"])


async def test_approve_deny_and_expiry_each_deliver_one_signed_message(
    make_broker: MakeBroker, demo_config: BrokerConfig, receiver: Receiver, clock: Clock
) -> None:
    url = start(make_broker, with_webhook(demo_config, receiver.url))
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        approved = await pending(http, "hook-approve")
        answer = await http.post(
            f"/v1/approvals/{approved['id']}/approve",
            json={"digest": approved["digest"], "comment": "checked"},
            headers=APPROVER,
        )
        assert answer.status_code == 200, answer.text
        await wait_for(receiver, 1)
        again = await http.post(  # a second click decides nothing: nothing is sent
            f"/v1/approvals/{approved['id']}/approve",
            json={"digest": approved["digest"]},
            headers=APPROVER,
        )
        assert again.status_code == 200

        denied = await pending(http, "hook-deny", amount=120)
        answer = await http.post(
            f"/v1/approvals/{denied['id']}/deny", json={"comment": "too large"}, headers=APPROVER
        )
        assert answer.status_code == 200, answer.text
        await wait_for(receiver, 2)

        expired = await pending(http, "hook-expire", amount=110)
        clock.advance(3601)  # past expires_s: the next read expires it
        seen = await http.get(f"/v1/approvals/{expired['id']}", headers=APPROVER)
        assert seen.json()["status"] == "expired"
        await wait_for(receiver, 3)
        metrics = (await http.get("/metrics")).text

    messages = receiver.verified()
    assert len({m["id"] for m in messages}) == 3
    assert all(m["type"] == "approval.decided" for m in messages)
    first, second, third = (m["data"] for m in messages)
    assert first["approval_id"] == approved["id"]
    assert first["decision"] == "approved"
    assert first["decided_by"] == "approver:demo-approver"
    assert first["comment"] == "checked"
    assert first["digest"] == approved["digest"]
    assert (first["tool"], first["tenant"], first["route"]) == (
        "issue_credit",
        "acme",
        "guarded_billing",
    )
    assert first["execution"]["http_status"] == 200
    assert first["execution"]["execution_status"] == "succeeded"
    assert second["approval_id"] == denied["id"]
    assert second["decision"] == "denied"
    assert second["comment"] == "too large"
    assert second["execution"] is None
    assert third["approval_id"] == expired["id"]
    assert third["decision"] == "expired"
    assert third["decided_by"] == "broker"
    assert 'broker_approval_webhook_total{outcome="delivered"} 3.0' in metrics
    assert 'broker_approval_webhook_total{outcome="failed"} 0.0' in metrics


@pytest.mark.parametrize("receiver_statuses", [[503]])
async def test_a_failing_receiver_gets_the_attempts_then_a_counted_logged_failure(
    make_broker: MakeBroker,
    demo_config: BrokerConfig,
    receiver: Receiver,
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = start(make_broker, with_webhook(demo_config, receiver.url, attempts=3))
    caplog.set_level(logging.INFO, logger="broker.approvals.webhook")
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        approval = await pending(http, "hook-fail")
        answer = await http.post(
            f"/v1/approvals/{approval['id']}/deny", json={"comment": "no"}, headers=APPROVER
        )
        # The decision is the approver's answer, whatever the receiver does.
        assert answer.status_code == 200 and answer.json()["status"] == "denied"
        await wait_for(receiver, 3)
        for _ in range(100):  # the failure is logged just after the last answer
            if 'outcome="failed"} 1.0' in (metrics := (await http.get("/metrics")).text):
                break
            await asyncio.sleep(0.02)

    ids = {headers["webhook-id"] for headers, _ in receiver.received}
    assert len(ids) == 1  # one message, three attempts: the receiver can drop duplicates
    assert [m["data"]["decision"] for m in receiver.verified()] == ["denied"] * 3
    assert 'broker_approval_webhook_total{outcome="retried"} 2.0' in metrics
    assert 'broker_approval_webhook_total{outcome="failed"} 1.0' in metrics
    assert 'broker_approval_webhook_total{outcome="delivered"} 0.0' in metrics
    failed = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(failed) == 1
    assert ids.pop() in failed[0].getMessage()
    assert approval["id"] in failed[0].getMessage()  # the whole message, to replay by hand


@pytest.mark.parametrize("receiver_statuses", [[400, 204]])
async def test_a_definite_refusal_is_not_retried(
    make_broker: MakeBroker, demo_config: BrokerConfig, receiver: Receiver
) -> None:
    url = start(make_broker, with_webhook(demo_config, receiver.url, attempts=3))
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        approval = await pending(http, "hook-400")
        await http.post(
            f"/v1/approvals/{approval['id']}/deny", json={"comment": "no"}, headers=APPROVER
        )
        await wait_for(receiver, 1)
        for _ in range(100):
            if 'outcome="failed"} 1.0' in (metrics := (await http.get("/metrics")).text):
                break
            await asyncio.sleep(0.02)
    assert len(receiver.received) == 1
    assert 'broker_approval_webhook_total{outcome="retried"} 0.0' in metrics
    assert 'broker_approval_webhook_total{outcome="failed"} 1.0' in metrics


def test_the_webhook_is_checked_at_start() -> None:
    raw = tomllib.loads((ROOT / "deploy" / "demo.toml").read_text(encoding="utf-8"))
    raw.setdefault("service", {})["http_allowlist"] = ["http://127.0.0.1:*"]
    raw["approvals"] = {
        "webhook": {
            "url": "https://hooks.example.com/approvals",
            "signing_secret": "plain-text-secret",
            "tenants": ["acme", "initech"],
        }
    }
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    found = dict(caught.value.problems)
    assert "not in the broker's http_allowlist" in found["approvals.webhook.url"]
    assert "env:" in found["approvals.webhook.signing_secret"]
    assert "unknown tenant 'initech'" in found["approvals.webhook.tenants[1]"]

    raw["approvals"]["webhook"].update(
        url="http://127.0.0.1:9/approvals", signing_secret="env:HOOK", tenants=["acme"]
    )
    assert parse_config(raw).approvals.webhook is not None


def test_a_webhook_secret_that_cannot_be_read_stops_the_start(demo_config: BrokerConfig) -> None:
    config = with_webhook(demo_config, "http://127.0.0.1:9/hooks")
    for secret in ({}, {"APPROVAL_WEBHOOK_SECRET": "whsec_not base64!"}):
        with pytest.raises(ConfigError) as caught:
            create_app(config, backends={"demo": DemoBackend()}, secrets=secret)
        assert "approvals.webhook.signing_secret" in dict(caught.value.problems)
