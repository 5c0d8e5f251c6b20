"""``X-Broker-Signature``: HMAC-SHA256 over ``"<t>.<body>"``, checked for origin and freshness."""

from __future__ import annotations

import hashlib
import hmac
import re

from adapters.http import sign, traceparent_for, verify_signature

BODY = b'{"tool":"billing.refund","args":{"payment_id":"P-1"}}'


def test_the_signature_is_hmac_sha256_of_timestamp_dot_body() -> None:
    header = sign("s3cret", BODY, timestamp=1_700_000_000)
    expected = hmac.new(b"s3cret", b"1700000000." + BODY, hashlib.sha256).hexdigest()
    assert header == f"t=1700000000,v1={expected}"


def test_verification_checks_key_body_and_age() -> None:
    now = 1_700_000_000
    header = sign("s3cret", BODY, timestamp=now)
    assert verify_signature("s3cret", header, BODY, now=now + 299)
    assert not verify_signature("s3cret", header, BODY, now=now + 301)  # stale
    assert not verify_signature("s3cret", header, BODY, now=now - 301)  # from the future
    assert not verify_signature("other", header, BODY, now=now)
    assert not verify_signature("s3cret", header, BODY.replace(b"P-1", b"P-2"), now=now)
    assert not verify_signature(
        "s3cret", header.replace("t=1700000000", "t=1700000001"), BODY, now=now
    )
    assert not verify_signature("s3cret", None, BODY, now=now)
    assert not verify_signature("s3cret", "garbage", BODY, now=now)
    assert verify_signature(["old", "s3cret"], header, BODY, now=now)  # during a rotation


def test_traceparent_continues_the_trace() -> None:
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    assert re.fullmatch(rf"00-{trace}-[0-9a-f]{{16}}-01", traceparent_for(trace))
    hashed = traceparent_for("trc_01JABC")
    assert re.fullmatch(r"00-[0-9a-f]{32}-[0-9a-f]{16}-01", hashed)
    assert hashed.split("-")[1] == traceparent_for("trc_01JABC").split("-")[1]
