"""The executor: retries only where safe, never for definite errors, bounded by the deadline."""

from __future__ import annotations

import asyncio
import copy
import time
from typing import Any

import pytest

from broker.execution import execute, preview
from broker.plugins import AdapterContext
from broker.stores import Settlement
from broker.taxonomy import Code
from broker.tools.runtime import ToolRuntime, build_registry
from tests.fakes import FakeBackend, SleepRecorder, fake_config, fake_tools

RETRY = {"attempts": 3, "initial_backoff_s": 0.05, "max_backoff_s": 1.0}


def runtime(
    fake: FakeBackend,
    operation: str,
    *,
    idempotent: bool,
    service: dict[str, Any] | None = None,
    **overrides: Any,
) -> ToolRuntime:
    tools = fake_tools()
    tool = copy.deepcopy(tools["ok"])
    tool["adapter"]["operation"] = operation
    tool["idempotent"] = idempotent
    tool.update(overrides)
    tools["subject"] = tool
    config = fake_config(tools, **({"service": service} if service else {}))
    registry = build_registry(config, secrets={}, backends={"fake": fake})
    return registry.tools["subject"]


def context(tool: ToolRuntime, key: str | None = "key-1") -> AdapterContext:
    return AdapterContext(
        tenant="acme",
        route="ops",
        tool=tool.name,
        proposal_id="prp_unit",
        trace_id="trace-unit",
        idempotency_key=key,
        deadline=time.monotonic() + tool.config.timeout_s,
        credentials={},
    )


async def run(
    tool: ToolRuntime, *, key: str | None = "key-1", sleep: Any = None
) -> tuple[Any, SleepRecorder]:
    recorder = sleep if sleep is not None else SleepRecorder()
    report = await execute(tool, {"n": 1}, context(tool, key), sleep=recorder)
    return report, recorder


async def test_a_success_is_one_attempt() -> None:
    fake = FakeBackend()
    tool = runtime(fake, "ok", idempotent=False)
    report, sleep = await run(tool)
    assert report.code is None
    assert report.settlement is Settlement.SUCCEEDED
    assert report.execution.status == "succeeded"
    assert report.execution.attempts == 1
    assert report.execution.result == {"done": True, "call": 1, "args": {"n": 1}}
    assert report.execution.started_at and report.execution.ended_at
    assert sleep.calls == []


async def test_an_idempotent_tool_is_retried_after_transient_faults() -> None:
    fake = FakeBackend(transient_failures=2)
    tool = runtime(fake, "transient", idempotent=True, retry=RETRY)
    report, sleep = await run(tool)
    assert report.code is None
    assert report.settlement is Settlement.SUCCEEDED
    assert report.execution.attempts == 3
    assert fake.count("transient") == 3
    assert [ctx.attempt for _, ctx in fake.calls["transient"]] == [1, 2, 3]
    assert len(sleep.calls) == 2
    for i, seconds in enumerate(sleep.calls):
        assert 0 <= seconds <= min(1.0, 0.05 * 2**i)


async def test_retries_stop_after_the_configured_attempts() -> None:
    fake = FakeBackend(transient_failures=None)
    tool = runtime(fake, "transient", idempotent=True, retry={**RETRY, "attempts": 4})
    report, sleep = await run(tool)
    assert report.code is Code.PROVIDER_ERROR
    assert report.settlement is Settlement.TRANSIENT_FAILURE
    assert report.execution.status == "failed"
    assert report.execution.attempts == 4
    assert report.execution.error is not None
    assert report.execution.error.category == "PROVIDER"
    assert fake.count("transient") == 4
    assert len(sleep.calls) == 3


async def test_an_unavailable_backend_is_retried_then_reported_unavailable() -> None:
    fake = FakeBackend()
    tool = runtime(fake, "unavailable", idempotent=True, retry=RETRY)
    report, _ = await run(tool)
    assert report.code is Code.PROVIDER_UNAVAILABLE
    assert report.settlement is Settlement.TRANSIENT_FAILURE
    assert report.execution.attempts == 3


async def test_a_non_idempotent_tool_is_never_retried() -> None:
    fake = FakeBackend(transient_failures=1)
    tool = runtime(fake, "transient", idempotent=False, retry=RETRY)
    report, sleep = await run(tool)
    assert report.code is Code.PROVIDER_ERROR
    assert report.settlement is Settlement.TRANSIENT_FAILURE
    assert report.execution.attempts == 1
    assert fake.count("transient") == 1
    assert sleep.calls == []


async def test_an_adapter_that_forwards_the_key_may_be_retried() -> None:
    fake = FakeBackend(transient_failures=1, forwards_idempotency_key=True)
    tool = runtime(fake, "transient", idempotent=False, retry=RETRY)
    report, sleep = await run(tool, key="key-1")
    assert report.code is None
    assert report.execution.attempts == 2
    assert [ctx.idempotency_key for _, ctx in fake.calls["transient"]] == ["key-1", "key-1"]
    assert len(sleep.calls) == 1


async def test_forwarding_the_key_is_no_licence_to_retry_without_a_key() -> None:
    fake = FakeBackend(transient_failures=1, forwards_idempotency_key=True)
    tool = runtime(fake, "transient", idempotent=False, retry=RETRY)
    report, sleep = await run(tool, key=None)
    assert report.code is Code.PROVIDER_ERROR
    assert report.execution.attempts == 1
    assert sleep.calls == []


@pytest.mark.parametrize("idempotent", [True, False])
async def test_a_definite_failure_is_never_retried(idempotent: bool) -> None:
    fake = FakeBackend(forwards_idempotency_key=True)
    tool = runtime(fake, "definite", idempotent=idempotent, retry=RETRY)
    report, sleep = await run(tool)
    assert report.code is Code.PROVIDER_ERROR
    assert report.settlement is Settlement.DEFINITE_FAILURE
    assert report.execution.attempts == 1
    assert report.execution.error is not None
    assert report.execution.error.message == "the backend refused the request"
    assert fake.count("definite") == 1
    assert sleep.calls == []


async def test_one_attempt_configured_means_no_retry() -> None:
    fake = FakeBackend(transient_failures=1)
    tool = runtime(fake, "transient", idempotent=True, retry={**RETRY, "attempts": 1})
    report, sleep = await run(tool)
    assert report.code is Code.PROVIDER_ERROR
    assert report.execution.attempts == 1
    assert sleep.calls == []


async def test_backoff_is_jittered() -> None:
    seen: list[float] = []
    for _ in range(6):
        fake = FakeBackend(transient_failures=2)
        tool = runtime(fake, "transient", idempotent=True, retry={**RETRY, "max_backoff_s": 0.5})
        _, sleep = await run(tool)
        seen.extend(sleep.calls)
    assert len(seen) == 12
    assert all(0 <= s <= 0.5 for s in seen)
    assert len(set(seen)) > 1


async def test_backoff_is_capped_by_max_backoff() -> None:
    fake = FakeBackend(transient_failures=None)
    retry = {"attempts": 10, "initial_backoff_s": 5.0, "max_backoff_s": 0.01}
    # Nine failures in a row would open the backend's breaker (tested in test_backend_guard).
    no_breaker = {"circuit_breaker": False}
    tool = runtime(
        fake, "transient", idempotent=True, retry=retry, timeout_s=30.0, service=no_breaker
    )
    report, sleep = await run(tool)
    assert report.execution.attempts == 10
    assert len(sleep.calls) == 9
    assert all(0 <= s <= 0.01 for s in sleep.calls)


async def test_the_deadline_bounds_retries_and_backoff() -> None:
    async def never_wakes(seconds: float) -> None:
        await asyncio.Event().wait()

    fake = FakeBackend(transient_failures=None)
    tool = runtime(fake, "transient", idempotent=True, retry=RETRY, timeout_s=0.1)
    started = time.monotonic()
    report = await execute(tool, {"n": 1}, context(tool), sleep=never_wakes)
    assert time.monotonic() - started < 5
    assert report.code is Code.TIMEOUT
    assert report.execution.error is not None
    assert report.execution.error.category == "TIMEOUT"
    assert report.settlement is Settlement.TRANSIENT_FAILURE
    assert report.execution.attempts == 1
    assert fake.count("transient") == 1


@pytest.mark.parametrize(
    ("idempotent", "settlement"),
    [(True, Settlement.TRANSIENT_FAILURE), (False, Settlement.UNKNOWN)],
)
async def test_a_hanging_adapter_times_out(idempotent: bool, settlement: Settlement) -> None:
    fake = FakeBackend()
    tool = runtime(fake, "hang", idempotent=idempotent, timeout_s=0.05)
    report, _ = await run(tool)
    assert report.code is Code.TIMEOUT
    assert report.settlement is settlement
    assert report.execution.status == "failed"
    assert fake.count("hang") == 1


@pytest.mark.parametrize("operation", ["crash", "not_a_dict"])
@pytest.mark.parametrize(
    ("idempotent", "settlement"),
    [(True, Settlement.TRANSIENT_FAILURE), (False, Settlement.UNKNOWN)],
)
async def test_a_broken_adapter_is_a_provider_error_of_unknown_outcome(
    operation: str, idempotent: bool, settlement: Settlement
) -> None:
    fake = FakeBackend()
    tool = runtime(fake, operation, idempotent=idempotent, retry=RETRY)
    report, sleep = await run(tool)
    assert report.code is Code.PROVIDER_ERROR
    assert report.settlement is settlement
    assert report.execution.attempts == 1
    assert report.execution.error is not None
    assert "secret internals" not in report.execution.error.message
    assert sleep.calls == []


async def test_preview_never_invokes_the_adapter() -> None:
    fake = FakeBackend()
    tool = runtime(fake, "ok", idempotent=False)
    execution = await preview(tool, {"n": 1}, context(tool))
    assert execution.status == "dry_run"
    assert execution.result == {"would_call": "ok"}
    assert fake.count("ok") == 0
    assert fake.previews["ok"] == [{"n": 1}]
