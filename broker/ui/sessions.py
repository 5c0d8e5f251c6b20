"""Inbox sessions: a signed cookie naming the approver's token by its SHA-256, never the token.

Sessions are stateless, so any broker process behind one address reads a cookie another one
issued, provided they share the key (``[service] ui_session_key_env``, else one derived from
the token signing key). The cookie carries the digest the config stores, when it was issued,
when it ends, and a random nonce the CSRF token is derived from (``broker.ui.csrf``). Every
request maps the digest back to the token's principal as the config has it *now*, so a token
removed from the config or past its ``expires_at`` ends its sessions at once.

Signing out deletes the cookie in the browser; a copy taken before stays valid until its
``exp`` (no server-side state to revoke it), which is why sessions are short by default.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import msgspec

from broker.config import BrokerConfig
from broker.taxonomy import ConfigError

__all__ = ["COOKIE_NAME", "COOKIE_PATH", "MIN_KEY_BYTES", "Session", "SessionKeys"]

COOKIE_NAME = "broker_inbox"
COOKIE_PATH = "/ui"
MIN_KEY_BYTES = 32
_DERIVATION_LABEL = b"action-broker approver inbox sessions v1"


class Session(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What the cookie says, once its signature checks out."""

    sub: str
    """SHA-256 hex of the approver's static token (what ``[[tokens]] sha256`` holds)."""
    iat: float
    exp: float
    nonce: str
    """Random per session; the CSRF token is an HMAC of it (``broker.ui.csrf``)."""


_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(Session).decode


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True, slots=True)
class SessionKeys:
    """Issues and reads inbox session cookies with one HMAC-SHA256 key."""

    key: bytes
    ttl_s: float
    clock: Callable[[], float]

    @classmethod
    def from_config(
        cls, config: BrokerConfig, secrets_: Mapping[str, str], clock: Callable[[], float]
    ) -> SessionKeys | None:
        """The configured key, else one derived from the token signing key, else ``None``
        (the inbox then refuses to sign anyone in rather than invent a per-process key that
        the broker's other processes would not know).

        Raises:
            ConfigError: when the configured key is shorter than ``MIN_KEY_BYTES``.
        """
        service = config.service
        own = secrets_.get(service.ui_session_key_env)
        if own:
            key = own.encode("utf-8")
            if len(key) < MIN_KEY_BYTES:
                raise ConfigError(
                    [
                        (
                            "service.ui_session_key_env",
                            f"{service.ui_session_key_env} must hold at least "
                            f"{MIN_KEY_BYTES} bytes",
                        )
                    ]
                )
        else:
            signing = secrets_.get(service.token_signing_key_env)
            if not signing:
                return None
            # A key of its own, so an inbox cookie can never pass for a signed token.
            key = hmac.digest(signing.encode("utf-8"), _DERIVATION_LABEL, "sha256")
        return cls(key=key, ttl_s=service.ui_session_ttl_s, clock=clock)

    def issue(self, token_sha256: str) -> tuple[str, Session]:
        """A new session for the token with this digest: the cookie value and what it says."""
        now = self.clock()
        session = Session(
            sub=token_sha256, iat=now, exp=now + self.ttl_s, nonce=_b64(secrets.token_bytes(16))
        )
        payload = _b64(_encode(session))
        return f"{payload}.{self._sign(payload)}", session

    def read(self, cookie: str | None) -> Session | None:
        """The session of a cookie whose signature checks and which has not expired."""
        session = self._verified(cookie)
        if session is None or session.exp <= self.clock():
            return None
        return session

    def expired(self, cookie: str | None) -> bool:
        """Whether a correctly signed cookie is past its end (to say so, not just sign in)."""
        session = self._verified(cookie)
        return session is not None and session.exp <= self.clock()

    def _verified(self, cookie: str | None) -> Session | None:
        if not cookie or cookie.count(".") != 1:
            return None
        payload, signature = cookie.split(".")
        expected = self._sign(payload).encode("ascii")
        if not hmac.compare_digest(expected, signature.encode("utf-8", "replace")):
            return None
        try:
            return _decode(_unb64(payload))
        except (msgspec.DecodeError, binascii.Error, ValueError):
            return None

    def mac(self, label: str, value: str) -> str:
        """An HMAC under the session key, for values bound to a session (CSRF tokens)."""
        return _b64(hmac.digest(self.key, f"{label}\x00{value}".encode(), hashlib.sha256))

    def _sign(self, payload: str) -> str:
        return self.mac("session", payload)
