"""The inbox's signed session cookie and the CSRF token bound to it, and what the pages show of
an approval's arguments (amounts as a person reads them, redacted values never)."""

from __future__ import annotations

import base64

import msgspec
import pytest

from broker.config import BrokerConfig
from broker.taxonomy import ConfigError
from broker.ui.csrf import csrf_token, valid_csrf
from broker.ui.sessions import MIN_KEY_BYTES, SessionKeys
from broker.ui.views import amount_fields, duration
from tests.conftest import Clock

DIGEST = "13398dbc5ccc9670af6606f261884ed54db3b3a773eae74d7e140a6b6e4abc3c"


@pytest.fixture
def keys(clock: Clock) -> SessionKeys:
    return SessionKeys(key=b"k" * MIN_KEY_BYTES, ttl_s=60, clock=clock)


def test_a_cookie_reads_back_until_it_expires(keys: SessionKeys, clock: Clock) -> None:
    cookie, session = keys.issue(DIGEST)
    assert DIGEST in base64.urlsafe_b64decode(cookie.split(".")[0] + "==").decode()
    assert keys.read(cookie) == session
    clock.advance(59)
    assert keys.read(cookie) == session
    clock.advance(1)
    assert keys.read(cookie) is None
    assert keys.expired(cookie)


@pytest.mark.parametrize(
    "tamper",
    [
        lambda c: c[:-2] + ("AA" if not c.endswith("AA") else "BB"),  # signature
        lambda c: "e30" + c[3:],  # payload
        lambda c: c.replace(".", ""),
        lambda c: c + ".x",
        lambda c: "",
        lambda c: "é." + c.split(".")[1],  # not ASCII
    ],
)
def test_a_tampered_cookie_is_no_session(keys: SessionKeys, tamper: object) -> None:
    cookie, _ = keys.issue(DIGEST)
    changed = tamper(cookie)  # type: ignore[operator]
    assert keys.read(changed) is None
    assert not keys.expired(changed)


def test_a_cookie_signed_with_another_key_is_no_session(keys: SessionKeys, clock: Clock) -> None:
    cookie, _ = keys.issue(DIGEST)
    other = SessionKeys(key=b"o" * MIN_KEY_BYTES, ttl_s=60, clock=clock)
    assert other.read(cookie) is None


def test_the_csrf_token_is_bound_to_one_session(keys: SessionKeys) -> None:
    _, mine = keys.issue(DIGEST)
    _, theirs = keys.issue(DIGEST)  # the same approver signed in twice
    assert valid_csrf(keys, mine, csrf_token(keys, mine))
    assert not valid_csrf(keys, mine, csrf_token(keys, theirs))
    assert not valid_csrf(keys, mine, None)
    assert not valid_csrf(keys, mine, "")
    assert not valid_csrf(keys, mine, "ü")


def test_the_key_comes_from_its_variable_else_from_the_token_signing_key(
    demo_config: BrokerConfig, clock: Clock
) -> None:
    own = SessionKeys.from_config(demo_config, {"BROKER_UI_SESSION_KEY": "s" * 32}, clock)
    assert own is not None
    assert own.key == b"s" * 32
    assert own.ttl_s == demo_config.service.ui_session_ttl_s
    signing = "t" * 40
    derived = SessionKeys.from_config(demo_config, {"BROKER_TOKEN_SIGNING_KEY": signing}, clock)
    assert derived is not None
    assert derived.key != signing.encode()  # a key of its own, never the token key itself
    again = SessionKeys.from_config(demo_config, {"BROKER_TOKEN_SIGNING_KEY": signing}, clock)
    assert again is not None
    assert again.key == derived.key  # every process derives the same
    assert SessionKeys.from_config(demo_config, {}, clock) is None
    with pytest.raises(ConfigError, match="at least 32 bytes"):
        SessionKeys.from_config(demo_config, {"BROKER_UI_SESSION_KEY": "short"}, clock)
    renamed = msgspec.structs.replace(demo_config.service, ui_session_key_env="INBOX_KEY")
    config = msgspec.structs.replace(demo_config, service=renamed)
    named = SessionKeys.from_config(config, {"INBOX_KEY": "n" * 32}, clock)
    assert named is not None
    assert named.key == b"n" * 32


def test_amounts_are_the_top_level_numbers_with_their_currency() -> None:
    args = {"order_id": "O-1", "amount": 150, "currency": "USD", "rush": True}
    assert amount_fields(args) == [("amount", "150 USD")]
    assert amount_fields({"amount": 1234.5, "fee": 2}) == [("amount", "1,234.50"), ("fee", "2")]
    assert amount_fields({"amount": "[REDACTED]", "currency": "EUR"}) == [("currency", "EUR")]
    assert amount_fields({"nested": {"amount": 5}}) == []
    assert amount_fields(["not", "an", "object"]) == []


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (-3, "0 s"),
        (45, "45 s"),
        (60, "1 min"),
        (3600, "1 h"),
        (3900, "1 h 5 min"),
        (90000, "1 d 1 h"),
    ],
)
def test_durations_read_as_a_person_says_them(seconds: float, shown: str) -> None:
    assert duration(seconds) == shown
