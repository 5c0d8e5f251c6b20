"""Native front doors: providers' tool calls in and results out, and their tool catalogs.

One normaliser per provider (``openai``, ``openai_responses``, ``anthropic``, ``gemini``), the
reversible encoding of tool names (``names``), the mediation of a whole model turn
(``mediation``) and the catalogs in each provider's declaration shape (``catalogs``).
"""

from __future__ import annotations
