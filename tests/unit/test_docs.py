"""The README is what newcomers read: its commands and config reference must match the code."""

from __future__ import annotations

import re

import msgspec
import pytest

from broker import config as config_module
from tests.conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")

SECTIONS = [
    config_module.ServiceSettings,
    config_module.TenantConfig,
    config_module.RouteConfig,
    config_module.ServiceAccountConfig,
    config_module.TokenConfig,
    config_module.BackendConfig,
    config_module.PreconditionConfig,
    config_module.BudgetConfig,
    config_module.RateLimitConfig,
    config_module.ToolConfig,
    config_module.RetryConfig,
]


def test_readme_starts_with_the_two_commands() -> None:
    first_block = README.split("```")[1]
    assert "make run" in first_block
    assert "make test" in first_block


@pytest.mark.parametrize("section", SECTIONS, ids=lambda s: s.__name__)
def test_every_config_key_is_documented(section: type[msgspec.Struct]) -> None:
    documented = set(re.findall(r"`([a-z0-9_]+)`", README))
    missing = [
        f.encode_name for f in msgspec.structs.fields(section) if f.encode_name not in documented
    ]
    assert not missing, f"README's config reference lacks {missing}"


def test_every_taxonomy_code_is_documented() -> None:
    from broker.taxonomy import Code

    internal = {Code.NOT_FOUND}
    missing = [c.value for c in Code if c not in internal and f"`{c.value}`" not in README]
    assert not missing, f"README's taxonomy lacks {missing}"
