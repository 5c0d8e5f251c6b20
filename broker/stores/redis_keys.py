"""Where everything lives in Redis: one ``{tag}`` per tenant, and no client string in a key.

All keys of one script call carry the same ``{tenant}`` hash tag, so each call touches one
Cluster slot. Client-supplied strings never become key material: the idempotency key is a
SHA-256 of ``route \\x1f key``, budget and rate names/scopes are hashed, and a tenant that is not
a plain identifier is hashed into its tag::

    <prefix>:{<tenant>}:idem:<sha256(route \\x1f key)>          hash (see lua/idem.lua)
    <prefix>:{<tenant>}:bud:<sha256(name \\x1f scope)>:<window>  integer counter
    <prefix>:{<tenant>}:rate:<sha256(name \\x1f scope)>          ZSET sliding log
    <prefix>:{<tenant>}:cache:<sha256(tool, canonical args)>    msgpack cached result (PX ttl)
    <prefix>:{d.<sha256(proposal_id)>}:decision                 msgpack DecisionRecord
    <prefix>:{registry}:tools      hash: tool name -> msgpack record (no secret)
    <prefix>:{registry}:secrets    hash: tool name -> signing secret
    <prefix>:{registry}:version    the catalog version, bumped by every registration write

Registered tools share one slot (they are few, and a write must bump the version atomically);
every write also ``PUBLISH``es the new version on ``<prefix>:registry:changed``.

Decision records are read by proposal id alone (``GET /v1/proposals/{id}`` for an admin has no
tenant), so their key is derived from the proposal id only and tagged by its hash: that spreads
them over the cluster and keeps ``load_decision`` one ``GET``.
"""

from __future__ import annotations

import hashlib
import re

from broker.remembered import Remembered
from broker.stores.base import BudgetCharge, ClaimRequest

__all__ = ["KeySpace", "digest"]

_MAX_REMEMBERED_TENANTS = 4096
"""A bound on KeySpace's memory of tenant prefixes, whatever tokens a deployment mints."""

_MAX_REMEMBERED_STEMS = 16_384
"""A bound on KeySpace's memory of budget and rate-limit key stems (scopes may be per customer)."""

_SAFE_TAG = re.compile(r"[A-Za-z0-9_.-]{1,128}")
_SAFE_PREFIX = re.compile(r"[A-Za-z0-9_.:-]{1,64}")


def digest(*parts: str) -> str:
    """SHA-256 hex of the parts joined by ``\\x1f`` (which no name or scope contains)."""
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()


class KeySpace:
    """Builds every key; one ``{tag}`` per tenant, client strings hashed."""

    def __init__(self, prefix: str) -> None:
        if not _SAFE_PREFIX.fullmatch(prefix):
            raise ValueError(f"prefix must match {_SAFE_PREFIX.pattern}, got {prefix!r}")
        self.prefix = prefix
        # Remembered: every proposal builds two or three keys of its tenant, and tenants and
        # (name, scope) pairs are few (from the config and authenticated tokens, never from a
        # request body).
        self._tenant_prefixes: Remembered[str, str] = Remembered(
            self._make_tenant_prefix, _MAX_REMEMBERED_TENANTS
        )
        self._stems: Remembered[tuple[str, str, str, str], str] = Remembered(
            self._make_stem, _MAX_REMEMBERED_STEMS
        )

    def tag(self, tenant: str) -> str:
        """The hash tag: the tenant itself when it is a plain identifier, else its hash."""
        if _SAFE_TAG.fullmatch(tenant):
            return tenant
        return "~" + digest(tenant)[:32]

    def tenant_prefix(self, tenant: str) -> str:
        """``<prefix>:{<tag>}:``, which starts every key of the tenant (remembered)."""
        return self._tenant_prefixes[tenant]

    def _make_tenant_prefix(self, tenant: str) -> str:
        return f"{self.prefix}:{{{self.tag(tenant)}}}:"

    def idem(self, claim: ClaimRequest) -> str:
        return f"{self.tenant_prefix(claim.tenant)}idem:{digest(claim.route, claim.key)}"

    def budget(self, tenant: str, charge: BudgetCharge, window: int) -> str:
        return f"{self._stems['bud', tenant, charge.name, charge.scope]}:{window}"

    def rate(self, tenant: str, name: str, scope: str) -> str:
        return self._stems["rate", tenant, name, scope]

    def _make_stem(self, stem: tuple[str, str, str, str]) -> str:
        """``<tenant prefix><kind>:<sha256(name \\x1f scope)[:32]>``: remembered, since a budget
        is keyed at admission and again at settlement and a rate limit at every admission, so
        a lookup replaces a SHA-256 and three string builds."""
        kind, tenant, name, scope = stem
        return f"{self.tenant_prefix(tenant)}{kind}:{digest(name, scope)[:32]}"

    def expiring(self, tenant: str, key: str) -> str:
        """An expiring value (``broker.stores.expiring``): ``key`` is the caller's, hashed."""
        return f"{self.tenant_prefix(tenant)}exp:{digest(key)}"

    def decision(self, proposal_id: str) -> str:
        return f"{self.prefix}:{{d.{digest(proposal_id)[:32]}}}:decision"

    def registry(self) -> tuple[str, str, str]:
        """The registered tools, their secrets and the catalog version (one slot)."""
        base = f"{self.prefix}:{{registry}}"
        return f"{base}:tools", f"{base}:secrets", f"{base}:version"

    def registry_channel(self) -> str:
        return f"{self.prefix}:registry:changed"
