"""Claims past their lease that a Redis script cannot complete alone, completed from Python.

``lua/idem.lua`` answers ``lapsed`` (leaving the claim untouched) for a claim past its lease that
was never dispatched and holds budget charges (their counters are keys the script was not given)
or, when the store reads outcomes from the ledger, one that was dispatched by a proposal whose
record may say how its call ended. :class:`LapsedClaims` reads the ledger if it should, completes
the claim with ``lua/recover.lua`` (its counters declared, compare-and-set on the owner) and sends
the first script again. Only keys whose process died mid-call take this path.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import msgspec

from broker.stores.base import OutcomeSource, Settlement
from broker.stores.redis_replies import as_str
from broker.stores.redis_scripts import ScriptCall, build_recover, table
from broker.stores.redis_transport import Transport
from broker.taxonomy import StoreUnavailableError

__all__ = ["LapsedClaims"]

_LAPSED = b"lapsed"
_ROUNDS = 4
"""How often one call recovers a lapsed claim and tries again: each round completes the claim it
found (or finds it completed by someone else), so a second round nearly always suffices."""
_COMPLETE_ACTIONS = {
    Settlement.SUCCEEDED: ("complete", False),
    Settlement.DEFINITE_FAILURE: ("complete", True),
    Settlement.TRANSIENT_FAILURE: ("release", True),
}
"""A recorded outcome's recovery: the action of ``lua/recover.lua``, and whether the claim's
charges are refunded (as ``settle`` would have done with that settlement)."""
_charge_list = msgspec.msgpack.Decoder(list[str])
_encode = msgspec.msgpack.Encoder().encode


class LapsedClaims:
    """Recovers lapsed claims for :class:`~broker.stores.redis.RedisStore`.

    Args:
        transport: how scripts reach Redis (the store's).
        index_unknown: adds an idempotency key to the store's ``outcome_unknown`` index.
    """

    def __init__(
        self, transport: Transport, index_unknown: Callable[[str], Awaitable[None]]
    ) -> None:
        self._transport = transport
        self._index_unknown = index_unknown
        self.outcomes: OutcomeSource | None = None
        """Where a dispatched claim's recorded outcome is read (the ledger); ``None``: nowhere."""

    @property
    def consult(self) -> bool:
        """Whether the scripts should leave dispatched lapsed claims to :meth:`recover`."""
        return self.outcomes is not None

    async def run(self, call: ScriptCall, now: float) -> list[Any]:
        """The script's reply, once the lapsed claim it may have found is recovered."""
        for _ in range(_ROUNDS):
            reply = await self._transport.script(call)
            if isinstance(reply, list) and reply and reply[0] == _LAPSED:
                await self.recover(call.keys[0], reply, now)
                continue
            return [reply] if isinstance(reply, bytes | str) else table(reply)
        raise StoreUnavailableError("a lapsed idempotency claim could not be recovered")

    async def recover(self, idem_key: str, lapsed: Sequence[Any], now: float) -> str:
        """Complete a lapsed claim (``lua/idem.lua``'s ``lapsed`` reply): never dispatched, it
        is released and its charges refunded; dispatched, it is settled from its proposal's
        ledger record when there is one, else lapses as the scripts would lapse it. What it
        became (``released``, ``settled``, ``unknown``), or ``''`` if it was not that claim any
        more."""
        owner, dispatched, charges = as_str(lapsed[1]), lapsed[2] == b"1", lapsed[3]
        listed = _charge_list.decode(charges) if charges else []
        refunds = list(zip(listed[0::2], listed[1::2], strict=True))
        action, response, ttl_s = "release", b"", 0
        if dispatched:
            action, refunded = "lapse", False
            proposal_id = as_str(lapsed[4])
            found = None
            if self.outcomes is not None and proposal_id:
                found = await self.outcomes.outcome_of(proposal_id)
            if found is not None and found.settlement in _COMPLETE_ACTIONS:
                action, refunded = _COMPLETE_ACTIONS[found.settlement]
                response, ttl_s = _encode(found.response), found.ttl_s
            if not refunded:
                refunds = []
        call = build_recover(
            idem_key,
            owner=owner,
            action=action,
            refunds=refunds,
            response=response,
            ttl_s=ttl_s,
            now=now,
        )
        done = as_str(await self._transport.script(call))
        if done == "unknown":
            await self._index_unknown(idem_key)
        return done
