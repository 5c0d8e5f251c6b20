"""utc_now(): RFC 3339 UTC with milliseconds, current to the millisecond although cached."""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime

from pytest import MonkeyPatch

from broker.timestamps import at_millisecond, utc_now


def _millis(text: str) -> int:
    parsed = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    return int(parsed.timestamp() * 1000 + 0.5)


def test_timestamps_name_the_current_millisecond() -> None:
    for _ in range(50):
        before = time.time_ns() // 1_000_000
        text = utc_now()
        after = time.time_ns() // 1_000_000
        assert len(text) == len("2026-11-22T10:00:00.000Z") and text.endswith("Z")
        assert before <= _millis(text) <= after
        time.sleep(0.0007)  # crosses milliseconds, and now and then a second


def test_the_cached_parts_follow_the_clock_across_a_second(monkeypatch: MonkeyPatch) -> None:
    clock = [1_795_000_000_998_000_000]  # ns: 2026-11-18T11:06:40.998Z
    monkeypatch.setattr(time, "time_ns", lambda: clock[0])
    seen = []
    for _ in range(3):
        seen.append(utc_now())
        clock[0] += 1_000_000
    assert seen == [
        "2026-11-18T11:06:40.998Z",
        "2026-11-18T11:06:40.999Z",
        "2026-11-18T11:06:41.000Z",
    ]


def test_at_millisecond_writes_what_datetime_writes() -> None:
    rng = random.Random(23)
    epochs = [rng.uniform(1_700_000_000, 1_900_000_000) for _ in range(20_000)]
    epochs += [1_795_000_000.9995, 1_795_000_000.9999995, 1_795_000_000.0005, 1_795_000_001.0]
    for epoch in epochs:
        expected = (
            datetime.fromtimestamp(epoch, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z")
        )
        assert at_millisecond(epoch) == expected, epoch
