"""The Lua scripts and the KEYS/ARGV of each call: what the store asks Redis, not how it is sent.

Time: every decision uses the caller's ``now`` (an exact 17-digit decimal, so Lua's ``tonumber``
gives back the same double) against timestamps stored in the values; the scripts derive every
other instant from it (``now`` plus a lease or TTL, added in the same double arithmetic as
Python's, see ``lua/clock.lua``). Redis TTLs (``PEXPIRE``, relative, plus a margin for clock skew
between brokers) only collect garbage.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import msgspec

from broker.stores.base import (
    UNKNOWN_HOLD_S,
    Admission,
    BudgetCharge,
    ClaimRequest,
    Resolution,
    Settlement,
    Ticket,
)
from broker.stores.redis_keys import KeySpace
from broker.taxonomy import StoreUnavailableError

__all__ = [
    "ScriptCall",
    "build_admit",
    "build_dispatch",
    "build_lookup",
    "build_recover",
    "build_resolve",
    "build_settle",
    "script_sources",
    "table",
]

GC_MARGIN_S = 60
"""Added to every PEXPIRE. Decisions use timestamps stored in the values, TTLs only collect
garbage; the margin keeps a key alive for brokers whose clocks lag the writer's by up to this."""


class ScriptCall(msgspec.Struct, frozen=True):
    """One script invocation: which script, with which KEYS and ARGV."""

    script: str
    keys: tuple[str, ...]
    args: tuple[str | bytes, ...]


def _lua(name: str) -> str:
    return (resources.files("broker.stores") / "lua" / name).read_text(encoding="utf-8")


def script_sources() -> dict[str, str]:
    """Each script's whole source, by name (the names :class:`ScriptCall` uses)."""
    # The scripts' constants come from here, so that Python and Lua cannot disagree on them.
    constants = f"local GC_MARGIN_S, UNKNOWN_HOLD_S = {GC_MARGIN_S}, {UNKNOWN_HOLD_S}\n"
    clock = constants + _lua("clock.lua")
    idem = clock + "\n" + _lua("idem.lua")
    return {
        "admit": idem + "\n" + _lua("admit.lua"),
        "lookup": idem + "\n" + _lua("lookup.lua"),
        "settle": clock + "\n" + _lua("settle.lua"),
        "resolve": idem + "\n" + _lua("resolve.lua"),
        "complete": idem + "\n" + _lua("complete.lua"),
        "dispatch": _lua("dispatch.lua"),
        "recover": clock + "\n" + _lua("recover.lua"),
        "tool_put": _lua("tool_put.lua"),
        "tool_delete": _lua("tool_delete.lua"),
        "tool_list": _lua("tool_list.lua"),
    }


_pack = msgspec.msgpack.Encoder().encode


def packed(args: list[str]) -> bytes:
    """Script arguments as one msgpack array, which the script unpacks (``cmsgpack.unpack``).

    Each argument a client sends costs it more than the whole array does: redis-py packs a
    command in Python, one argument at a time. Strings only (Redis' ``cmsgpack`` reads str,
    not bin), so the script sees exactly the strings it would have seen as separate ARGV.
    """
    return _pack(args)


def num(value: float) -> str:
    """An exact decimal for a float: Lua's ``tonumber`` and Redis' ``strtod`` read it back bit-exact.

    Seventeen significant digits identify every double; ``repr``'s shortest such decimal costs
    half as much again (bignum digit generation). Each call sends ``now`` this way and its script
    derives every other instant from it (``lua/clock.lua``): one costly conversion per call.
    """
    return format(value, ".17g")


def _check_charge(charge: BudgetCharge) -> None:
    """Counters are Redis integers: refuse what would be truncated rather than round it."""
    if not (
        isinstance(charge.amount, int)
        and isinstance(charge.limit, int)
        and isinstance(charge.window_s, int)
        and charge.window_s >= 1
    ):
        raise ValueError(
            f"budget {charge.name!r}: amount and limit must be integers (micro-units) and "
            "window_s an integer >= 1"
        )


def build_admit(
    keys: KeySpace,
    admission: Admission,
    *,
    now: float,
    dry_run: bool,
    owner: str,
    consult: bool = False,
) -> tuple[ScriptCall, tuple[tuple[BudgetCharge, int], ...]]:
    """The admit script call, and each charge with the window it would be taken in."""
    claim = admission.claim
    if claim is not None and claim.tenant != admission.tenant:
        raise ValueError("admission.claim.tenant must equal admission.tenant (one slot per call)")
    tenant = admission.tenant
    now_s = num(now)  # the one decimal conversion, reused in every rate-limit entry's name
    dry = "1" if dry_run else "0"
    counts = (str(len(admission.charges)), str(len(admission.hits)))
    key_list: list[str]
    args: list[str]
    if claim is not None:
        key_list = [keys.idem(claim)]
        idempotent = "1" if claim.idempotent else "0"
        lease_s = num(claim.lease_s)
        args = [now_s, dry, "1", claim.fingerprint, owner, lease_s, idempotent, *counts]
    else:
        key_list = []
        args = [now_s, dry, "0", "", "", "0", "0", *counts]
    args.append("1" if consult else "0")

    windows: list[tuple[BudgetCharge, int]] = []
    for charge in admission.charges:
        _check_charge(charge)
        window = int(now // charge.window_s)
        windows.append((charge, window))
        key_list.append(keys.budget(tenant, charge, window))
        end = (window + 1) * charge.window_s
        args += [str(charge.amount), str(charge.limit), str(end)]
    for i, hit in enumerate(admission.hits):
        if not (isinstance(hit.limit, int) and hit.limit >= 1 and hit.window_s > 0):
            raise ValueError(f"rate limit {hit.name!r}: limit must be an int >= 1, window_s > 0")
        key_list.append(keys.rate(tenant, hit.name, hit.scope))
        args += [num(hit.window_s), str(hit.limit), f"{owner}:{i}:{now_s}"]
    return ScriptCall("admit", tuple(key_list), (packed(args),)), tuple(windows)


def build_settle(
    keys: KeySpace,
    ticket: Ticket,
    settlement: Settlement,
    *,
    response: bytes,
    ttl_s: int,
    now: float,
    record: tuple[str, bytes] | None = None,
    approval: tuple[tuple[str, ...], tuple[str | bytes, ...]] | None = None,
) -> ScriptCall:
    """The settle script call; with ``record`` (its key and value, on a standalone Redis only:
    the key is in another slot) the script also stores the decision record, and with
    ``approval`` (its keys and create arguments, ``RedisApprovals.creation``; with ``record``
    only) first creates that approval."""
    claim = ticket.claim
    if claim is not None and claim.tenant != ticket.tenant:
        raise ValueError("ticket.claim.tenant must equal ticket.tenant (one slot per call)")
    key_list: list[str] = [] if claim is None else [keys.idem(claim)]
    key_list += [keys.budget(ticket.tenant, charge, window) for charge, window in ticket.charges]
    args = [
        settlement.value,
        "0" if claim is None else "1",
        ticket.owner or "",
        num(now),
        str(ttl_s),
        str(len(ticket.charges)),
    ]
    for charge, _ in ticket.charges:
        _check_charge(charge)
        args.append(str(charge.amount))
    if record is None:
        if approval is not None:
            raise ValueError("an approval is created with the decision record (standalone)")
        return ScriptCall("settle", tuple(key_list), (packed(args), response))
    record_key, record_value = record
    if approval is None:
        return ScriptCall("settle", (*key_list, record_key), (packed(args), response, record_value))
    approval_keys, approval_args = approval
    return ScriptCall(
        "settle",
        (*key_list, record_key, *approval_keys),
        (packed(args), response, record_value, *approval_args),
    )


def table(reply: Any) -> list[Any]:
    """A script's reply as a list: most answer with a table, settle and tool_delete with one
    integer (a Lua table of one would say the same at more cost)."""
    if isinstance(reply, int) and not isinstance(reply, bool):
        return [reply]
    if isinstance(reply, list):
        return reply
    raise StoreUnavailableError(f"unexpected script reply from Redis: {reply!r:.80}")


def build_resolve(
    keys: KeySpace,
    claim: ClaimRequest,
    resolution: Resolution,
    *,
    response: bytes,
    ttl_s: int,
    now: float,
    consult: bool = False,
) -> ScriptCall:
    args = [num(now), claim.fingerprint, resolution.value, str(ttl_s), "1" if consult else "0"]
    return ScriptCall("resolve", (keys.idem(claim),), (packed(args), response))


def build_lookup(
    keys: KeySpace, claim: ClaimRequest, *, now: float, consult: bool = False
) -> ScriptCall:
    flag = "1" if consult else "0"
    return ScriptCall("lookup", (keys.idem(claim),), (num(now), claim.fingerprint, flag))


def build_dispatch(keys: KeySpace, ticket: Ticket, *, proposal_id: str) -> ScriptCall | None:
    """The dispatch mark's call; ``None`` for a ticket without a claim (nothing to mark)."""
    if ticket.claim is None:
        return None
    return ScriptCall("dispatch", (keys.idem(ticket.claim),), (ticket.owner or "", proposal_id))


def build_recover(
    idem_key: str,
    *,
    owner: str,
    action: str,
    refunds: list[tuple[str, str]],
    response: bytes,
    ttl_s: int,
    now: float,
) -> ScriptCall:
    """Complete one lapsed claim (``lua/recover.lua``): ``action`` is release, complete or
    lapse; ``refunds`` the (counter key, amount) pairs given back."""
    args = [num(now), owner, action, str(ttl_s), str(len(refunds))]
    args += [amount for _, amount in refunds]
    key_list = (idem_key, *(counter for counter, _ in refunds))
    return ScriptCall("recover", key_list, (packed(args), response))
