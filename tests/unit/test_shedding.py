"""Load shedding on a real event loop: a loop that runs late sheds new proposals, then recovers."""

from __future__ import annotations

import asyncio
import json
import time

from broker.resilience.shedding import LoadShedder


async def test_a_lagging_event_loop_sheds_new_proposals_until_it_catches_up() -> None:
    shedder = LoadShedder(max_lag_s=0.1)
    shedder.start()
    try:
        await asyncio.sleep(0.25)
        assert shedder.refusal() is None
        time.sleep(0.4)  # something hogs the loop: every request in the process waits this long
        deadline = time.monotonic() + 1
        while shedder.lag_s < 0.1:  # the lag timer runs as soon as the loop is free again
            assert time.monotonic() < deadline
            await asyncio.sleep(0)
        answer = shedder.refusal()
        assert answer is not None and answer.status == 503
        assert answer.headers["Retry-After"] == "1"
        body = json.loads(answer.body)
        assert (body["code"], body["category"]) == ("service_unavailable", "UNAVAILABLE")
        assert shedder.not_ready() == "overloaded"
        await asyncio.sleep(0.35)  # the loop keeps time again
        assert shedder.refusal() is None and shedder.not_ready() is None
        assert shedder.shed == 1
    finally:
        await shedder.stop()


async def test_without_a_lag_bound_nothing_is_measured() -> None:
    shedder = LoadShedder()
    shedder.start()
    time.sleep(0.3)
    await asyncio.sleep(0.15)
    assert shedder.lag_s == 0 and shedder.refusal() is None
    await shedder.stop()


async def test_the_in_flight_bound_sheds_and_draining_waits_for_the_last_one() -> None:
    shedder = LoadShedder(max_in_flight=2)
    shedder.started()
    shedder.started()
    assert shedder.not_ready() == "overloaded"
    shedder.finished()
    assert shedder.refusal() is None
    assert await shedder.drained(0.05) is False
    shedder.finished()
    assert await shedder.drained(0.05) is True
