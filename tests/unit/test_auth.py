"""Bearer tokens to principals: static (hashed) tokens, their expiry, and signed tokens."""

from __future__ import annotations

import hmac
import warnings
from datetime import UTC, datetime
from typing import Any

import jwt
import pytest

from broker import auth as auth_module
from broker.auth import Authenticator, hash_token, mint_token
from broker.config import BrokerConfig, parse_config
from broker.taxonomy import AuthError, Code
from tests.conftest import Clock
from tests.fakes import demo_raw

KEY = b"unit-test-signing-key-0123456789abcdef"
NOW = 1_800_000_000.0


@pytest.fixture
def config() -> BrokerConfig:
    return parse_config(demo_raw())


@pytest.fixture
def clock() -> Clock:
    return Clock(NOW)


@pytest.fixture
def authenticator(config: BrokerConfig, clock: Clock) -> Authenticator:
    return Authenticator(config, signing_key=KEY, clock=clock)


def refused(authenticator: Authenticator, header: str | None) -> Code:
    with pytest.raises(AuthError) as caught:
        authenticator.authenticate(header)
    assert caught.value.detail
    return caught.value.code


def claims(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "iss": "action-broker",
        "aud": "action-broker",
        "sub": "route-billing-help@bots",
        "route": "billing_help",
        "tenant": "acme",
        "iat": int(NOW),
        "exp": int(NOW) + 600,
    }
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not None}


def bearer(token: str) -> str:
    return f"Bearer {token}"


# -- static tokens ---------------------------------------------------------------------------------


def test_static_tokens_resolve_to_their_principal(authenticator: Authenticator) -> None:
    billing = authenticator.authenticate("Bearer demo-billing-token")
    assert (billing.route, billing.tenant, billing.admin) == ("billing_help", "acme", False)
    assert billing.tools == {"lookup_order", "create_support_ticket", "issue_credit"}
    globex = authenticator.authenticate("bearer demo-globex-token")
    assert (globex.route, globex.tenant) == ("billing_help", "globex")
    scheduling = authenticator.authenticate("Bearer demo-scheduling-token")
    assert scheduling.tools == {"lookup_order"}
    admin = authenticator.authenticate("Bearer demo-admin-token")
    assert admin.admin and admin.route is None and admin.tenant is None and not admin.tools


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "Bearer",
        "Bearer    ",
        "Basic demo-billing-token",
        "demo-billing-token",
        "Bearer demo-billing-token2",
        "Bearer DEMO-BILLING-TOKEN",
        f"Bearer {hash_token('demo-billing-token')}",
    ],
)
def test_unknown_or_malformed_tokens_are_unauthenticated(
    authenticator: Authenticator, header: str | None
) -> None:
    assert refused(authenticator, header) is Code.UNAUTHENTICATED


def test_static_tokens_are_confirmed_in_constant_time(
    authenticator: Authenticator, monkeypatch: pytest.MonkeyPatch
) -> None:
    compared: list[tuple[str, str]] = []
    original = hmac.compare_digest

    def spy(a: str, b: str) -> bool:
        compared.append((a, b))
        return original(a, b)

    monkeypatch.setattr(auth_module.hmac, "compare_digest", spy)
    authenticator.authenticate("Bearer demo-billing-token")
    digest = hash_token("demo-billing-token")
    assert compared == [(digest, digest)]
    assert "demo-billing-token" not in repr(compared)  # only digests are ever compared


def test_the_config_never_holds_a_token_in_clear(config: BrokerConfig) -> None:
    assert all(len(token.sha256) == 64 for token in config.tokens)
    assert "demo-billing-token" not in repr(config)


def _with_expiring_token(expires_at: str) -> BrokerConfig:
    raw = demo_raw()
    raw["tokens"].append(
        {
            "name": "temporary",
            "sha256": hash_token("temporary-token"),
            "service_account": "route-billing-help@bots",
            "tenant": "acme",
            "expires_at": expires_at,
        }
    )
    return parse_config(raw)


def test_static_tokens_expire_at_expires_at(clock: Clock) -> None:
    expires = datetime.fromtimestamp(NOW + 60, tz=UTC).isoformat()
    authenticator = Authenticator(_with_expiring_token(expires), signing_key=KEY, clock=clock)
    assert authenticator.authenticate("Bearer temporary-token").tenant == "acme"
    clock.advance(59)
    authenticator.authenticate("Bearer temporary-token")
    clock.advance(1)
    assert refused(authenticator, "Bearer temporary-token") is Code.TOKEN_EXPIRED
    clock.advance(3600)
    assert refused(authenticator, "Bearer temporary-token") is Code.TOKEN_EXPIRED
    assert authenticator.authenticate("Bearer demo-billing-token").tenant == "acme"


def test_a_narrowed_static_token_gets_only_its_tools() -> None:
    raw = demo_raw()
    raw["tokens"].append(
        {
            "name": "narrow",
            "sha256": hash_token("narrow-token"),
            "service_account": "route-billing-help@bots",
            "tenant": "acme",
            "tools": ["lookup_order"],
        }
    )
    authenticator = Authenticator(parse_config(raw), signing_key=KEY)
    assert authenticator.authenticate("Bearer narrow-token").tools == {"lookup_order"}


# -- signed tokens ---------------------------------------------------------------------------------


def test_a_minted_token_round_trips(config: BrokerConfig, authenticator: Authenticator) -> None:
    token = mint_token(config, KEY, route="billing_help", tenant="globex", ttl_s=600, now=NOW)
    principal = authenticator.authenticate(bearer(token))
    assert (principal.route, principal.tenant) == ("billing_help", "globex")
    assert principal.tools == {"lookup_order", "create_support_ticket", "issue_credit"}
    assert principal.expires_at == NOW + 600


def test_a_minted_token_expires_by_the_injected_clock(
    config: BrokerConfig, authenticator: Authenticator, clock: Clock
) -> None:
    token = mint_token(config, KEY, route="billing_help", tenant="acme", ttl_s=60, now=clock.now)
    authenticator.authenticate(bearer(token))
    clock.advance(3600)
    assert refused(authenticator, bearer(token)) is Code.TOKEN_EXPIRED


@pytest.mark.parametrize(
    ("token_claims", "expected"),
    [
        (claims(aud="someone-else"), Code.UNAUTHENTICATED),
        (claims(iss="someone-else"), Code.UNAUTHENTICATED),
        (claims(exp=None), Code.UNAUTHENTICATED),
        (claims(sub=None), Code.UNAUTHENTICATED),
        (claims(sub="ghost@bots"), Code.UNAUTHENTICATED),
        (claims(route="ghost_route"), Code.UNAUTHENTICATED),
        # a scheduling account cannot claim the billing route
        (claims(sub="route-scheduling@bots", route="billing_help"), Code.UNAUTHENTICATED),
        (claims(tenant="initech"), Code.TENANT_MISMATCH),
        (
            claims(sub="route-scheduling@bots", route="scheduling", tenant="globex"),
            Code.TENANT_MISMATCH,
        ),
        (claims(exp=int(NOW) - 3600), Code.TOKEN_EXPIRED),
    ],
    ids=[
        "wrong-aud",
        "wrong-iss",
        "no-exp",
        "no-sub",
        "unknown-account",
        "unknown-route",
        "account-route-mismatch",
        "unserved-tenant",
        "unserved-tenant-2",
        "expired",
    ],
)
def test_bad_signed_tokens_are_refused(
    authenticator: Authenticator, token_claims: dict[str, Any], expected: Code
) -> None:
    token = jwt.encode(token_claims, KEY, algorithm="HS256")
    assert refused(authenticator, bearer(token)) is expected


def test_alg_none_is_refused(authenticator: Authenticator) -> None:
    token = jwt.encode(claims(), None, algorithm="none")
    assert refused(authenticator, bearer(token)) is Code.UNAUTHENTICATED
    # and the same claims with an empty signature
    header, payload, _ = jwt.encode(claims(), KEY, algorithm="HS256").split(".")
    assert refused(authenticator, bearer(f"{header}.{payload}.")) is Code.UNAUTHENTICATED


@pytest.mark.parametrize("algorithm", ["HS384", "HS512"])
def test_other_algorithms_are_refused(authenticator: Authenticator, algorithm: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyJWT warns that the key is short for HS384/HS512
        token = jwt.encode(claims(), KEY, algorithm=algorithm)
    assert refused(authenticator, bearer(token)) is Code.UNAUTHENTICATED


def test_a_token_signed_with_another_key_is_refused(authenticator: Authenticator) -> None:
    token = jwt.encode(claims(), b"another-key-0123456789abcdef-0000", algorithm="HS256")
    assert refused(authenticator, bearer(token)) is Code.UNAUTHENTICATED


def test_a_tampered_payload_is_refused(authenticator: Authenticator) -> None:
    good = jwt.encode(claims(), KEY, algorithm="HS256")
    forged = jwt.encode(claims(tenant="globex"), b"x" * 32, algorithm="HS256")
    header, _, signature = good.split(".")
    _, payload, _ = forged.split(".")
    assert refused(authenticator, bearer(f"{header}.{payload}.{signature}")) is Code.UNAUTHENTICATED


def test_signed_tokens_need_a_signing_key(config: BrokerConfig) -> None:
    without = Authenticator(config, signing_key=None)
    token = jwt.encode(claims(), KEY, algorithm="HS256")
    assert refused(without, bearer(token)) is Code.UNAUTHENTICATED


@pytest.mark.parametrize(
    ("route", "requested", "granted"),
    [
        ("billing_help", ["lookup_order"], {"lookup_order"}),
        ("billing_help", ["lookup_order", "drop_database"], {"lookup_order"}),
        ("scheduling", ["issue_credit", "lookup_order"], {"lookup_order"}),
        ("scheduling", ["issue_credit"], set()),
        ("billing_help", [], set()),
    ],
)
def test_a_tools_claim_only_narrows(
    authenticator: Authenticator, route: str, requested: list[str], granted: set[str]
) -> None:
    account = "route-billing-help@bots" if route == "billing_help" else "route-scheduling@bots"
    token = jwt.encode(claims(sub=account, route=route, tools=requested), KEY, algorithm="HS256")
    principal = authenticator.authenticate(bearer(token))
    assert principal.tools == granted


@pytest.mark.parametrize("tools", ["issue_credit", {"issue_credit": True}, 7])
def test_a_malformed_tools_claim_never_widens(authenticator: Authenticator, tools: Any) -> None:
    account = "route-scheduling@bots"
    token = jwt.encode(claims(sub=account, route="scheduling", tools=tools), KEY, algorithm="HS256")
    try:
        principal = authenticator.authenticate(bearer(token))
    except AuthError:
        return
    assert principal.tools <= {"lookup_order"}


def test_mint_refuses_what_the_config_does_not_allow(config: BrokerConfig) -> None:
    with pytest.raises(ValueError, match="globex"):
        mint_token(config, KEY, route="scheduling", tenant="globex", ttl_s=60)
    with pytest.raises(ValueError, match="route"):
        mint_token(config, KEY, route="ghost", tenant="acme", ttl_s=60)
    with pytest.raises(ValueError, match="issue_credit"):
        mint_token(config, KEY, route="scheduling", tenant="acme", ttl_s=60, tools=["issue_credit"])


def test_a_token_minted_for_tools_gets_exactly_those(
    config: BrokerConfig, authenticator: Authenticator
) -> None:
    token = mint_token(
        config, KEY, route="billing_help", tenant="acme", ttl_s=60, tools=["lookup_order"], now=NOW
    )
    assert authenticator.authenticate(bearer(token)).tools == {"lookup_order"}
