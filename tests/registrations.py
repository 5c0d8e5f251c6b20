"""Configs and bodies for the registration tests: the demo config, opened to loopback backends."""

from __future__ import annotations

import copy
from typing import Any

from broker.auth import hash_token
from broker.config import BrokerConfig, parse_config
from tests.fakes import demo_raw

__all__ = [
    "BACKEND",
    "BACKEND_TOKEN",
    "OTHER_BACKEND",
    "registration",
    "registration_config",
    "registration_raw",
]

BACKEND_TOKEN = "billing-backend-token"
BACKEND = {"Authorization": f"Bearer {BACKEND_TOKEN}"}
OTHER_BACKEND = {"Authorization": "Bearer ops-backend-token"}


def registration_raw(**service: Any) -> dict[str, Any]:
    """The demo config with loopback allowed, and backend tokens for ``billing`` and ``ops``."""
    raw = demo_raw()
    raw["service"].update({"http_allowlist": ["http://127.0.0.1:*"], **service})
    raw["tokens"] += [
        {
            "name": "billing-backend",
            "sha256": hash_token(BACKEND_TOKEN),
            "backend_namespace": "billing",
            "backend_routes": ["billing_help"],
        },
        {
            "name": "ops-backend",
            "sha256": hash_token("ops-backend-token"),
            "backend_namespace": "ops",
        },
    ]
    return raw


def registration_config(**service: Any) -> BrokerConfig:
    return parse_config(registration_raw(**service))


def registration(name: str, url: str, **overrides: Any) -> dict[str, Any]:
    """A valid registration body for an http tool at ``url`` (deep-copied, then overridden)."""
    body: dict[str, Any] = {
        "name": name,
        "description": "Refund a payment of the tenant.",
        "input_schema": {
            "type": "object",
            "additionalProperties": False,
            "required": ["payment_id"],
            "properties": {"payment_id": {"type": "string", "pattern": "^P-[0-9]+$"}},
        },
        "risk": "write",
        "idempotent": False,
        "preconditions": [],
        "routes": ["billing_help"],
        "adapter": {"kind": "http", "url": url, "timeout_s": 2.0},
        "claims": {"verbs": ["refund"], "nouns": ["payment"]},
    }
    body = copy.deepcopy(body)
    body.update(overrides)
    return body
