"""Bearer tokens to principals: static tokens stored hashed, and short-lived signed tokens.

Three kinds of static token: a route token (service account, tenant, the route's tools), an
admin token, and a backend token (``backend_namespace``), which may only manage the registered
tools of its own namespace and grant them to the routes listed in ``backend_routes``.

Static tokens are looked up by the SHA-256 of what was presented, then confirmed with
``hmac.compare_digest``, so neither the lookup nor the comparison runs on the secret itself.
Minted tokens are HS256 JWTs (PyJWT) with the algorithm pinned and ``exp``, ``iss``, ``aud``
required; their claims are re-checked against the config so a token can never grant more
than its route has today.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable, Mapping
from typing import Any

import jwt
import msgspec

from broker.config import BrokerConfig, TokenConfig
from broker.model import Principal
from broker.taxonomy import AuthError, Code

__all__ = ["Authenticator", "hash_token", "mint_token"]

TOKEN_LEEWAY_S = 5.0
"""Seconds a signed token is still accepted after its ``exp`` (clocks differ a little)."""
_LEEWAY_S = TOKEN_LEEWAY_S


class _Claims(msgspec.Struct, frozen=True):
    """The claims the broker reads, each of its one type (``bool`` is not a number here).

    PyJWT checks ``exp`` only as far as ``int()`` accepts it, so a correctly signed ``"exp":
    "9999999999"`` would otherwise reach arithmetic; a minted token is refused whole (401) when
    any claim it names has another type. Claims the broker does not read (``nbf``, ``jti``...)
    are left to PyJWT.
    """

    exp: int | float
    iat: int | float
    iss: str
    aud: str | list[str]
    sub: str
    route: str
    tenant: str
    tools: list[str] | None = None


def _typed_claims(claims: dict[str, Any]) -> _Claims:
    try:
        return msgspec.convert(claims, _Claims, strict=True)
    except msgspec.ValidationError as exc:
        # msgspec names the claim: "Expected `int | float`, got `str` - at `$.exp`".
        raise AuthError(Code.UNAUTHENTICATED, f"invalid signed token: {exc}") from exc


def hash_token(token: str) -> str:
    """The form in which static tokens are written into the config."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def mint_token(
    config: BrokerConfig,
    signing_key: bytes,
    *,
    route: str,
    tenant: str,
    ttl_s: int,
    tools: list[str] | None = None,
    now: float | None = None,
) -> str:
    """Sign a short-lived token for one route and tenant (``broker token mint``)."""
    account = next((n for n, a in config.service_accounts.items() if a.route == route), None)
    if route not in config.routes or account is None:
        raise ValueError(f"unknown route {route!r} (or it has no service account)")
    if tenant not in config.routes[route].tenants:
        raise ValueError(f"route {route!r} does not serve tenant {tenant!r}")
    if tools and not set(tools) <= set(config.routes[route].tools):
        raise ValueError(
            f"tools {sorted(set(tools) - set(config.routes[route].tools))} are not on the route"
        )
    issued = int(now if now is not None else time.time())
    claims: dict[str, Any] = {
        "iss": config.service.token_issuer,
        "aud": config.service.token_issuer,
        "sub": account,
        "route": route,
        "tenant": tenant,
        "iat": issued,
        "exp": issued + ttl_s,
    }
    if tools:
        claims["tools"] = tools
    return jwt.encode(claims, signing_key, algorithm="HS256")


class Authenticator:
    """Turns an ``Authorization`` header into a :class:`Principal`, or raises :class:`AuthError`."""

    def __init__(
        self,
        config: BrokerConfig,
        *,
        signing_key: bytes | None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._config = config
        self._signing_key = signing_key
        self._clock = clock
        self._static: Mapping[str, tuple[TokenConfig, Principal]] = {
            token.sha256: (token, self._principal_for(token)) for token in config.tokens
        }

    def authenticate(self, authorization: str | None) -> Principal:
        if not authorization:
            raise AuthError(Code.UNAUTHENTICATED, "missing Authorization: Bearer <token> header")
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise AuthError(Code.UNAUTHENTICATED, "use Authorization: Bearer <token>")
        if token.count(".") == 2:
            return self._from_jwt(token)
        return self.static_principal(hash_token(token))

    def static_principal(self, digest: str) -> Principal:
        """The principal of the static token whose SHA-256 is ``digest``, as the config has it
        today (the approver inbox's sessions carry this digest, never the token)."""
        found = self._static.get(digest)
        if found is None or not hmac.compare_digest(found[0].sha256, digest):
            raise AuthError(Code.UNAUTHENTICATED, "unknown bearer token")
        principal = found[1]
        if principal.expires_at is not None and principal.expires_at <= self._clock():
            raise AuthError(Code.TOKEN_EXPIRED, "the bearer token has expired")
        return principal

    def _principal_for(self, token: TokenConfig) -> Principal:
        expires = token.expires_at.timestamp() if token.expires_at else None
        if token.backend_namespace:
            return Principal(
                service_account=f"backend:{token.name}",
                route=None,
                tenant=None,
                tools=frozenset(),
                expires_at=expires,
                namespace=token.backend_namespace,
                grants=frozenset(token.backend_routes),
            )
        if token.admin:
            return Principal(
                service_account=f"admin:{token.name}",
                route=None,
                tenant=None,
                tools=frozenset(),
                expires_at=expires,
                admin=True,
            )
        if token.approver_tenants:
            return Principal(
                service_account=f"approver:{token.name}",
                route=None,
                tenant=None,
                tools=frozenset(),
                expires_at=expires,
                approver_tenants=frozenset(token.approver_tenants),
            )
        account = self._config.service_accounts[token.service_account or ""]
        route_tools = self._config.routes[account.route].tools
        tools = frozenset(token.tools) & frozenset(route_tools) if token.tools else route_tools
        return Principal(
            service_account=token.service_account or "",
            route=account.route,
            tenant=token.tenant,
            tools=frozenset(tools),
            expires_at=expires,
            narrowed=bool(token.tools),
        )

    def _from_jwt(self, token: str) -> Principal:
        if self._signing_key is None:
            raise AuthError(Code.UNAUTHENTICATED, "signed tokens are not enabled on this broker")
        issuer = self._config.service.token_issuer
        try:
            claims = jwt.decode(
                token,
                self._signing_key,
                algorithms=["HS256"],
                audience=issuer,
                issuer=issuer,
                leeway=_LEEWAY_S,
                options={"require": ["exp", "iat", "iss", "aud", "sub"], "verify_iat": False},
            )
        except jwt.ExpiredSignatureError as exc:
            raise AuthError(Code.TOKEN_EXPIRED, "the bearer token has expired") from exc
        except jwt.PyJWTError as exc:
            raise AuthError(Code.UNAUTHENTICATED, "invalid signed token") from exc
        typed = _typed_claims(claims)
        if typed.exp + _LEEWAY_S <= self._clock():  # the injected clock is authoritative
            raise AuthError(Code.TOKEN_EXPIRED, "the bearer token has expired")
        account = self._config.service_accounts.get(typed.sub)
        route = self._config.routes.get(typed.route)
        if account is None or route is None or account.route != typed.route:
            raise AuthError(Code.UNAUTHENTICATED, "the token's service account or route is unknown")
        tenant = typed.tenant
        if tenant not in route.tenants:
            raise AuthError(Code.TENANT_MISMATCH, f"route does not serve tenant {tenant!r}")
        requested = typed.tools
        tools = frozenset(route.tools)
        if requested is not None:
            tools &= frozenset(requested)
        return Principal(
            service_account=typed.sub,
            route=typed.route,
            tenant=tenant,
            tools=tools,
            expires_at=float(typed.exp),
            narrowed=requested is not None,
        )
