from __future__ import annotations

import os
import time

from broker.ids import new_lease_owner, new_ulid

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


def test_every_character_of_the_random_part_takes_every_value() -> None:
    # 80 random bits: 16 characters, each uniform over the 32 (none fixed, none narrowed).
    ids = [new_ulid() for _ in range(2_000)]
    for position in range(10, 26):
        assert {ulid[position] for ulid in ids} == CROCKFORD


def test_lease_owners_are_distinct_in_forked_children_too() -> None:
    # The generator is reseeded after fork: a child must not repeat its parent's next owners.
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child reports its first owner and leaves at once
        os.write(write, new_lease_owner().encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 64).decode()
    os.waitpid(pid, 0)
    os.close(read)
    ours = {new_lease_owner() for _ in range(10_000)}
    assert len(ours) == 10_000 and child not in ours
    assert all(len(owner) == 16 and int(owner, 16) >= 0 for owner in ours)
