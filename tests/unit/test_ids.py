from __future__ import annotations

import time

from broker.ids import new_ulid

CROCKFORD = set("0123456789ABCDEFGHJKMNPQRSTVWXYZ")


def _decode(text: str) -> int:
    alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    value = 0
    for char in text:
        value = value * 32 + alphabet.index(char)
    return value


def test_ulids_are_26_crockford_characters_with_the_current_millisecond() -> None:
    before = time.time_ns() // 1_000_000
    ulid = new_ulid()
    after = time.time_ns() // 1_000_000
    assert len(ulid) == 26 and set(ulid) <= CROCKFORD
    assert before <= _decode(ulid) >> 80 <= after


def test_ulids_are_unique_and_sort_by_time() -> None:
    ids = [new_ulid() for _ in range(10_000)]
    assert len(set(ids)) == len(ids)
    earlier = new_ulid()
    time.sleep(0.002)
    assert new_ulid()[:10] > earlier[:10]
