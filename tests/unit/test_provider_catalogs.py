"""Provider catalogs are computed once per catalog version and token tool set, not per request."""

from __future__ import annotations

import msgspec

from adapters.demo import DemoBackend
from broker.config import load_config
from broker.model import Principal
from broker.native.catalogs import CATALOG_FORMATS, ProviderCatalogs
from broker.tools.runtime import build_registry
from tests.conftest import DEMO_CONFIG


def billing() -> Principal:
    return Principal(
        service_account="route-billing-help@bots",
        route="billing_help",
        tenant="acme",
        tools=frozenset({"lookup_order", "create_support_ticket", "issue_credit"}),
    )


def test_each_answer_is_built_once_per_catalog_version() -> None:
    registry = build_registry(
        load_config(DEMO_CONFIG), secrets={}, backends={"demo": DemoBackend()}
    )
    catalogs = ProviderCatalogs(registry)
    first = {format: catalogs.answer(billing(), format) for format in CATALOG_FORMATS}
    for format in CATALOG_FORMATS:
        assert catalogs.answer(billing(), format) is first[format]  # the same bytes, not rebuilt
        assert msgspec.json.decode(first[format])["format"] == format
    registry.install(registry.version + 1, {})  # a registration or removal elsewhere
    rebuilt = catalogs.answer(billing(), "openai")
    assert rebuilt == first["openai"] and rebuilt is not first["openai"]
