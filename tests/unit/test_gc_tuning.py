"""The serving process's collector settings: startup objects frozen, young collections rarer."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from broker.gc_tuning import YOUNG_THRESHOLD, tune_gc_for_serving


@pytest.fixture
def restored_gc() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


@pytest.mark.usefixtures("restored_gc")
def test_tuning_freezes_what_exists_and_raises_only_the_young_threshold() -> None:
    _, older, oldest = gc.get_threshold()
    tune_gc_for_serving()
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == (YOUNG_THRESHOLD, older, oldest)


@pytest.mark.usefixtures("restored_gc")
def test_cyclic_garbage_made_after_tuning_is_still_collected() -> None:
    tune_gc_for_serving()

    class Node:
        partner: object = None

    first, second = Node(), Node()
    first.partner, second.partner = second, first
    del first, second
    assert gc.collect() >= 2
