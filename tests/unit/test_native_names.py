"""The reversible encoding of tool names for providers that refuse ``.`` (``[A-Za-z0-9_-]{1,64}``)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from broker.native.names import PROVIDER_NAME, NameTable, decode_name, expose_name

# What the config and registrations allow as tool names.
names = st.from_regex(r"\A[A-Za-z][A-Za-z0-9_.-]{0,40}\Z")
long_names = st.from_regex(r"\A[a-z][a-z0-9_-]{0,20}\.[A-Za-z_][A-Za-z0-9_.-]{60,127}\Z")


def test_plain_names_are_unchanged_and_dots_readable() -> None:
    assert expose_name("lookup_order") == "lookup_order"
    assert expose_name("billing.refund") == "billing--refund"
    assert expose_name("ship-it.now") == "ship-_it--now"
    assert decode_name("billing--refund") == "billing.refund"
    assert decode_name("a-x") is None  # not an escape the encoding makes


@given(names)
def test_every_short_name_round_trips_through_a_name_providers_accept(name: str) -> None:
    exposed = expose_name(name)
    assert PROVIDER_NAME.fullmatch(exposed), exposed
    assert NameTable([name]).resolve(exposed) == name
    if len(name) + name.count(".") + name.count("-") <= 64:  # not abridged: needs no table
        assert decode_name(exposed) == name


@given(st.lists(names | long_names, min_size=2, max_size=8, unique=True))
def test_distinct_names_are_exposed_distinctly_and_resolved_back(chosen: list[str]) -> None:
    table = NameTable(chosen)
    exposed = [expose_name(name) for name in chosen]
    assert len(set(exposed)) == len(chosen)
    for name, shown in zip(chosen, exposed, strict=True):
        assert PROVIDER_NAME.fullmatch(shown), shown
        assert table.resolve(shown) == name
        assert table.resolve_mcp(expose_name(name, keep_dots=True, limit=128)) == name
