"""Policy: operator rules that decide beyond the fixed chain (issue 24).

``config`` holds the ``[[policy.rules]]`` model, ``checks`` its cross-checks, ``rules`` the
compiled, tool-indexed rule set, ``step`` the pipeline step and ``catalog`` what catalogs hide.
"""

from broker.policy.config import PolicyConfig, PolicyRuleConfig
from broker.policy.rules import CompiledPolicy, compile_policy

__all__ = ["CompiledPolicy", "PolicyConfig", "PolicyRuleConfig", "compile_policy"]
