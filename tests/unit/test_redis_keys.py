"""Every Redis call of RedisStore touches one Cluster slot, and no client string is key material.

The store runs over a recording client: each script call and each plain command records the
keys it was given (exactly what a real call would send), then fails like an unreachable Redis.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from redis.crc import key_slot
from redis.exceptions import ConnectionError as RedisConnectionError

from broker.stores import (
    Admission,
    BudgetCharge,
    ClaimRequest,
    DecisionRecord,
    RateHit,
    Settlement,
    StoredResponse,
    Ticket,
)
from broker.stores.redis import RedisStore
from broker.stores.redis_keys import _MAX_REMEMBERED_STEMS, KeySpace
from broker.stores.redis_scripts import build_admit, build_lookup, build_settle
from broker.taxonomy import StoreUnavailableError

NOW = 1_700_003_333.25
ODD_TENANTS = ["acme", "globex-eu.2", "te{n}ant", "}{", "t:x", "", "テナント", "a" * 300]
CLIENT_KEY = "client{key}:*?[x]\x00\n" + "k" * 200


class _Encoder:
    def __init__(self, decode_responses: bool) -> None:
        self.decode_responses = decode_responses


class RecordingClient:
    """Stands in for ``redis.asyncio.Redis``: records every call's keys, then fails."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[str, ...]]] = []
        self.scripts: dict[str, str] = {}

    def get_encoder(self) -> _Encoder:
        return _Encoder(decode_responses=False)

    def register_script(self, source: str) -> Any:
        known = ("settle", "lookup", "admit", "tool_put", "tool_delete", "tool_list")
        name = next((n for n in known if f"-- {n}.lua" in source), "unknown")

        async def run(
            keys: Sequence[str] | None = None,
            args: Sequence[Any] | None = None,
            client: Any = None,
        ) -> Any:
            self.calls.append((name, tuple(keys or ())))
            raise RedisConnectionError("recorded")

        run.sha = name  # type: ignore[attr-defined]
        self.scripts[name] = name
        return run

    def _command(self, name: str, key: str) -> Any:
        self.calls.append((name, (key,)))
        raise RedisConnectionError("recorded")

    async def get(self, key: str) -> Any:
        return self._command("GET", key)

    async def set(self, key: str, value: bytes, **kwargs: Any) -> Any:
        return self._command("SET", key)

    async def delete(self, key: str) -> Any:
        return self._command("DEL", key)


def _claim(tenant: str) -> ClaimRequest:
    return ClaimRequest(
        tenant=tenant,
        route="billing",
        key=CLIENT_KEY,
        fingerprint="fp",
        lease_s=2.5,
        idempotent=False,
    )


def _admission(tenant: str, *, with_claim: bool = True) -> Admission:
    charges = tuple(
        BudgetCharge(
            name=f"b{i}",
            scope=f"tenant:{tenant}|tool:{i}",
            amount=i + 1,
            limit=100,
            window_s=window,
        )
        for i, window in enumerate((60, 3600, 86_400, 7))
    )
    hits = tuple(
        RateHit(name=f"r{i}", scope=f"route:{i}", limit=5, window_s=w)
        for i, w in enumerate((1.5, 60.0))
    )
    claim = _claim(tenant) if with_claim else None
    return Admission(tenant=tenant, claim=claim, charges=charges, hits=hits)


def _one_slot(keys: Sequence[str]) -> int:
    slots = {key_slot(key.encode()) for key in keys}
    assert len(slots) == 1, f"keys span slots {slots}: {keys}"
    return slots.pop()


def _no_client_strings(keys: Sequence[str]) -> None:
    for key in keys:
        assert "client" not in key and "\x00" not in key and "\n" not in key, key
        assert key.count("{") == 1 and key.count("}") == 1, key
        assert len(key) < 160, key


@pytest.mark.parametrize("tenant", ODD_TENANTS)
@pytest.mark.parametrize("with_claim", [True, False], ids=["claim", "no-claim"])
@pytest.mark.parametrize("dry_run", [False, True], ids=["real", "dry"])
async def test_every_call_of_one_tenant_touches_one_slot(
    tenant: str, with_claim: bool, dry_run: bool
) -> None:
    client = RecordingClient()
    store = RedisStore(client, prefix="brk")  # type: ignore[arg-type]
    admission = _admission(tenant, with_claim=with_claim)

    with pytest.raises(StoreUnavailableError):
        await store.admit(admission, now=NOW, dry_run=dry_run)
    if with_claim:
        with pytest.raises(StoreUnavailableError):
            await store.lookup(_claim(tenant), now=NOW)
    _, windows = build_admit(store.keys, admission, now=NOW, dry_run=False, owner="o")
    ticket = Ticket(tenant=tenant, claim=admission.claim, owner="o", charges=windows)
    record = DecisionRecord(
        proposal_id="prp_01J{x}", tenant=tenant, route="billing", response=StoredResponse(200, b"")
    )
    for how in Settlement:
        with pytest.raises(StoreUnavailableError):
            await store.settle(
                ticket, how, response=StoredResponse(200, b""), record=record, ttl_s=60, now=NOW
            )
    with pytest.raises(StoreUnavailableError):
        await store.save_decision(record, ttl_s=60)
    with pytest.raises(StoreUnavailableError):
        await store.load_decision("prp_01J{x}")

    scripts = [(name, keys) for name, keys in client.calls if name in ("admit", "lookup", "settle")]
    assert {name for name, _ in scripts} == (
        {"admit", "lookup", "settle"} if with_claim else {"admit", "settle"}
    )
    tenant_slots = set()
    for name, keys in client.calls:
        assert keys, name
        _no_client_strings(keys)
        slot = _one_slot(keys)
        if name in ("admit", "lookup", "settle"):
            tenant_slots.add(slot)
    assert len(tenant_slots) == 1  # admit, lookup and settle of a tenant share its slot
    admit_keys = next(keys for name, keys in scripts if name == "admit")
    assert len(admit_keys) == len(set(admit_keys)) == 6 + with_claim


def test_builders_match_the_keyspace() -> None:
    keys = KeySpace("brk")
    admission = _admission("acme")
    call, windows = build_admit(keys, admission, now=NOW, dry_run=False, owner="o")
    assert (
        call.keys[0]
        == keys.idem(_claim("acme"))
        == build_lookup(keys, _claim("acme"), now=NOW).keys[0]
    )
    ticket = Ticket(tenant="acme", claim=admission.claim, owner="o", charges=windows)
    settle = build_settle(keys, ticket, Settlement.SUCCEEDED, response=b"", ttl_s=1, now=NOW)
    assert settle.keys == call.keys[: 1 + len(windows)]
    assert [w for _, w in windows] == [int(NOW // c.window_s) for c in admission.charges]


def test_remembered_key_stems_equal_fresh_ones_past_the_bound() -> None:
    """Budget and rate-limit keys are remembered per (tenant, name, scope); once more pairs than
    the bound have passed, every key must still be the one a fresh KeySpace builds."""
    seen, fresh = KeySpace("brk"), KeySpace("brk")
    charge = BudgetCharge(name="b", scope="s", amount=1, limit=10, window_s=60)
    first = (seen.budget("acme", charge, 7), seen.rate("acme", "b", "s"))
    for i in range(_MAX_REMEMBERED_STEMS + 10):
        seen.rate("acme", "r", f"customer:{i}")
    assert (seen.budget("acme", charge, 7), seen.rate("acme", "b", "s")) == first
    assert first == (fresh.budget("acme", charge, 7), fresh.rate("acme", "b", "s"))
    assert seen.rate("acme", "r", "customer:3") == fresh.rate("acme", "r", "customer:3")
    assert len(seen._stems) <= _MAX_REMEMBERED_STEMS  # the memory stays bounded
    # the same (name, scope) never yields one key for two tenants or for a budget and a rate
    assert seen.rate("globex", "b", "s") != first[1]
    assert first[0].rsplit(":", 1)[0].replace(":bud:", ":rate:") == first[1]
    assert first[0].rsplit(":", 1)[0] != first[1]


def test_tenant_tags_are_distinct_and_hashed_when_odd() -> None:
    keys = KeySpace("brk")
    tags = [keys.tag(tenant) for tenant in ODD_TENANTS]
    assert len(set(tags)) == len(tags)
    assert keys.tag("acme") == "acme"
    for tenant, tag in zip(ODD_TENANTS, tags, strict=True):
        assert "{" not in tag and "}" not in tag
        if tenant not in ("acme", "globex-eu.2"):
            assert tag.startswith("~") and len(tag) == 33


def test_decisions_are_spread_by_proposal_id() -> None:
    keys = KeySpace("brk")
    slots = {key_slot(keys.decision(f"prp_01J{i:05d}").encode()) for i in range(200)}
    assert len(slots) > 150


def test_a_claim_of_another_tenant_is_refused() -> None:
    keys = KeySpace("brk")
    admission = Admission(tenant="acme", claim=_claim("globex"))
    with pytest.raises(ValueError, match="one slot"):
        build_admit(keys, admission, now=NOW, dry_run=False, owner="o")


@pytest.mark.parametrize("prefix", ["", "a{b}", "a b", "x" * 65])
def test_unsafe_prefixes_are_refused(prefix: str) -> None:
    with pytest.raises(ValueError, match="prefix"):
        KeySpace(prefix)


def test_a_decoding_client_is_refused() -> None:
    client = RecordingClient()
    client.get_encoder = lambda: _Encoder(decode_responses=True)  # type: ignore[method-assign]
    with pytest.raises(ValueError, match="decode_responses"):
        RedisStore(client)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "charge",
    [
        BudgetCharge(name="b", scope="s", amount=2.5, limit=10, window_s=60),  # type: ignore[arg-type]
        BudgetCharge(name="b", scope="s", amount=1, limit=10.0, window_s=60),  # type: ignore[arg-type]
        BudgetCharge(name="b", scope="s", amount=1, limit=10, window_s=0),
    ],
    ids=["float-amount", "float-limit", "zero-window"],
)
def test_budget_charges_that_redis_would_truncate_are_refused(charge: BudgetCharge) -> None:
    with pytest.raises(ValueError, match="budget"):
        build_admit(
            KeySpace("brk"),
            Admission(tenant="acme", claim=None, charges=(charge,)),
            now=NOW,
            dry_run=False,
            owner="o",
        )


def test_a_rate_limit_below_one_is_refused() -> None:
    hit = RateHit(name="r", scope="s", limit=0, window_s=60)
    with pytest.raises(ValueError, match="rate limit"):
        build_admit(
            KeySpace("brk"),
            Admission(tenant="acme", claim=None, hits=(hit,)),
            now=NOW,
            dry_run=False,
            owner="o",
        )


def test_the_registry_keys_share_one_slot() -> None:
    keys = KeySpace("brk")
    _one_slot(keys.registry())
    _no_client_strings(keys.registry())
