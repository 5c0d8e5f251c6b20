"""The serving process's collector settings: startup objects frozen, young collections rarer.

Each test first puts the collector in a known state that differs from the tuned one (nothing
frozen, CPython's default young threshold), so a ``tune_gc_for_serving`` that did nothing, or
only part of its work, fails here.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from broker.gc_tuning import YOUNG_THRESHOLD, tune_gc_for_serving

DEFAULT_YOUNG = 700
"""CPython's default first threshold; the tuned one must differ from it."""


@pytest.fixture
def untuned_gc() -> Iterator[tuple[int, int]]:
    """Nothing frozen and the default young threshold; the previous settings come back after."""
    threshold = gc.get_threshold()
    gc.unfreeze()
    _, older, oldest = threshold
    gc.set_threshold(DEFAULT_YOUNG, older, oldest)
    assert gc.get_freeze_count() == 0
    yield older, oldest
    gc.unfreeze()
    gc.set_threshold(*threshold)


class Node:
    """A container the collector tracks (instances of a plain class are)."""

    partner: object = None


def test_the_young_threshold_is_raised_and_the_older_ones_kept(
    untuned_gc: tuple[int, int],
) -> None:
    assert YOUNG_THRESHOLD > DEFAULT_YOUNG
    tune_gc_for_serving()
    assert gc.get_threshold() == (YOUNG_THRESHOLD, *untuned_gc)


@pytest.mark.usefixtures("untuned_gc")
def test_what_exists_before_tuning_is_frozen_out_of_every_later_collection() -> None:
    before = Node()
    assert gc.is_tracked(before)
    tracked = len(gc.get_objects())  # every container the collector can see now
    tune_gc_for_serving()
    # Frozen objects move to the permanent generation: no generation lists them any more.
    assert gc.get_freeze_count() >= tracked * 9 // 10
    assert not any(o is before for o in gc.get_objects())
    after = Node()
    assert any(o is after for o in gc.get_objects(generation=0))


@pytest.mark.usefixtures("untuned_gc")
def test_garbage_made_before_tuning_is_collected_not_frozen() -> None:
    first, second = Node(), Node()
    first.partner, second.partner = second, first
    gone = weakref.ref(first)
    enabled = gc.isenabled()
    gc.disable()  # no automatic collection may take the cycle before tuning does
    try:
        del first, second
        assert gone() is not None
        tune_gc_for_serving()
    finally:
        if enabled:
            gc.enable()
    assert gone() is None, "a cycle made before tuning survived it (and a freeze keeps it for good)"


@pytest.mark.usefixtures("untuned_gc")
def test_cyclic_garbage_made_after_tuning_is_still_collected() -> None:
    tune_gc_for_serving()
    first, second = Node(), Node()
    first.partner, second.partner = second, first
    del first, second
    assert gc.collect() >= 2
