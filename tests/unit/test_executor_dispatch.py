"""The executor's dispatch mark: written once, after the backend's guard let the call through and
before the first attempt leaves; a mark that cannot be written stops the call unsent."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker.execution.executor import dispatcher, execute
from broker.stores import Admission, Admitted, ClaimRequest, MemoryStore, Settlement, SqliteStore
from broker.stores.base import AdmissionStore, Ticket
from broker.taxonomy import Code
from tests.fakes import FakeBackend, SleepRecorder
from tests.unit.test_executor import RETRY, context, runtime

T0 = 1_700_006_400.0


def claim(key: str = "k", *, idempotent: bool = False, lease_s: float = 30.0) -> ClaimRequest:
    return ClaimRequest(
        tenant="acme",
        route="ops",
        key=key,
        fingerprint="fp",
        lease_s=lease_s,
        idempotent=idempotent,
    )


async def admitted(store: AdmissionStore, c: ClaimRequest, at: float = T0) -> Ticket:
    result = await store.admit(Admission(tenant="acme", claim=c), now=at, dry_run=False)
    assert isinstance(result, Admitted), result
    return result.ticket


class CountingStore(MemoryStore):
    """The memory store, counting dispatch marks."""

    def __init__(self) -> None:
        super().__init__(clock=lambda: T0)
        self.marks: list[str] = []

    async def dispatch(self, ticket: Ticket, *, proposal_id: str, now: float) -> bool:
        self.marks.append(proposal_id)
        return await super().dispatch(ticket, proposal_id=proposal_id, now=now)


async def test_the_claim_is_marked_once_before_the_first_attempt_and_not_for_retries() -> None:
    fake = FakeBackend(transient_failures=2)
    tool = runtime(fake, "transient", idempotent=True, retry=RETRY)
    store = CountingStore()
    c = claim(idempotent=True)
    ticket = await admitted(store, c)
    mark = dispatcher(store, ticket, "prp_unit", lambda: T0 + 1)
    assert mark is not None
    report = await execute(tool, {"n": 1}, context(tool), sleep=SleepRecorder(), dispatch=mark)
    assert report.settlement is Settlement.SUCCEEDED and report.execution.attempts == 3
    assert store.marks == ["prp_unit"]
    # Marked: were this process to die now, the claim would be one that may have been sent.
    assert await store.lookup(c, now=T0 + 31) is None  # idempotent: released (not refunded)


async def test_a_ticket_without_a_claim_needs_no_mark() -> None:
    store = CountingStore()
    result = await store.admit(Admission(tenant="acme", claim=None), now=T0, dry_run=False)
    assert isinstance(result, Admitted)
    assert dispatcher(store, result.ticket, "prp_unit", lambda: T0) is None


async def test_a_store_that_cannot_write_the_mark_stops_the_call_unsent(tmp_path: Path) -> None:
    fake = FakeBackend()
    tool = runtime(fake, "ok", idempotent=False)
    store = SqliteStore(tmp_path / "s.db", clock=lambda: T0)
    ticket = await admitted(store, claim())
    await store.close()  # every call now raises StoreUnavailableError
    mark = dispatcher(store, ticket, "prp_unit", lambda: T0)
    report = await execute(tool, {"n": 1}, context(tool), dispatch=mark)
    assert report.code is Code.STORE_UNAVAILABLE
    assert report.settlement is Settlement.TRANSIENT_FAILURE  # the key is given back
    assert report.execution.attempts == 0 and report.retry_after_s == 1.0
    assert fake.count("ok") == 0


async def test_a_claim_lost_before_the_mark_is_never_sent() -> None:
    fake = FakeBackend()
    tool = runtime(fake, "ok", idempotent=True)
    store = MemoryStore(clock=lambda: T0)
    stale = await admitted(store, claim(idempotent=True))
    await admitted(store, claim(idempotent=True), T0 + 31)  # its lease lapsed: taken over
    mark = dispatcher(store, stale, "prp_stale", lambda: T0 + 32)
    report = await execute(tool, {"n": 1}, context(tool), dispatch=mark)
    assert report.code is Code.IDEMPOTENCY_IN_PROGRESS
    assert report.settlement is Settlement.TRANSIENT_FAILURE and report.execution.attempts == 0
    assert fake.count("ok") == 0


async def test_a_call_its_guard_refuses_is_never_marked() -> None:
    fake = FakeBackend()
    tool = runtime(fake, "ok", idempotent=False)
    assert tool.guard is not None and tool.guard.breaker is not None
    for _ in range(tool.guard.breaker.failures):  # five transient failures: the breaker opens
        tool.guard.breaker.failed()
    store = CountingStore()
    c = claim()
    ticket = await admitted(store, c)
    report = await execute(
        tool, {"n": 1}, context(tool), dispatch=dispatcher(store, ticket, "prp_unit", lambda: T0)
    )
    assert report.code is Code.PROVIDER_UNAVAILABLE and report.execution.attempts == 0
    assert store.marks == [] and fake.count("ok") == 0
    assert await store.lookup(c, now=T0 + 31) is None  # never marked: released on recovery


async def test_a_deadline_that_passes_during_the_mark_leaves_the_call_unsent() -> None:
    fake = FakeBackend()
    tool = runtime(fake, "ok", idempotent=False, timeout_s=0.05)

    async def stuck_mark() -> None:
        await asyncio.sleep(10)

    report = await execute(tool, {"n": 1}, context(tool), dispatch=stuck_mark)
    assert report.code is Code.TIMEOUT
    # Not outcome_unknown: the call never left, so the key is given back.
    assert report.settlement is Settlement.TRANSIENT_FAILURE
    assert fake.count("ok") == 0
