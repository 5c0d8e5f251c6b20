"""The ``python`` adapter kind: backends that run inside the broker process.

A backend is any object with ``adapters`` and ``verifiers`` mappings (``broker.plugins.Backend``);
:class:`FunctionBackend` builds one from plain async functions. The broker loads a backend only
when its config names it, from an import path or from an installed package's entry point::

    [backends.billing]
    factory = "my_package.billing:create"     # module:callable, called with `options`
    # or, instead of factory:
    entry_point = "billing"                   # group "action_broker.adapters"
    options = { region = "eu" }

    # in my_package's pyproject.toml
    [project.entry-points."action_broker.adapters"]
    billing = "my_package.billing:create"

Installing a package never activates it: an entry point nobody names is never imported.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from broker.plugins import (
    ENTRY_POINT_GROUP,
    Adapter,
    AdapterContext,
    Check,
    VerifierContext,
    crash_point,
)

__all__ = ["ENTRY_POINT_GROUP", "FunctionAdapter", "FunctionBackend", "PreviewingFunctionAdapter"]

Operation = Callable[[dict[str, Any], AdapterContext], Awaitable[dict[str, Any]]]
Verifier = Callable[[dict[str, Any], VerifierContext], Awaitable[Check]]


class FunctionAdapter:
    """An async function ``(args, ctx) -> dict`` as an adapter.

    Args:
        forwards_idempotency_key: set when the function passes ``ctx.idempotency_key`` on to
            a backend that deduplicates by it; transient faults are then retried.
    """

    def __init__(self, operation: Operation, *, forwards_idempotency_key: bool = False) -> None:
        self._operation = operation
        self.forwards_idempotency_key = forwards_idempotency_key

    async def invoke(self, args: dict[str, Any], ctx: AdapterContext) -> dict[str, Any]:
        result = await self._operation(args, ctx)
        # The operation ran (in process there is no send apart from it): a test may die here,
        # between the effect and the broker reading its result.
        crash_point("after_send")
        return result


class PreviewingFunctionAdapter(FunctionAdapter):
    """A function adapter that can also say what it would do (used by dry runs)."""

    def __init__(
        self, operation: Operation, preview: Operation, *, forwards_idempotency_key: bool = False
    ) -> None:
        super().__init__(operation, forwards_idempotency_key=forwards_idempotency_key)
        self._preview = preview

    async def preview(self, args: dict[str, Any], ctx: AdapterContext) -> dict[str, Any]:
        return await self._preview(args, ctx)


class FunctionBackend:
    """A backend from functions: ``adapters`` by operation name, ``verifiers`` by name."""

    def __init__(
        self,
        adapters: Mapping[str, Operation | Adapter],
        verifiers: Mapping[str, Verifier] | None = None,
    ) -> None:
        self._adapters: dict[str, Adapter] = {
            name: item if hasattr(item, "invoke") else FunctionAdapter(item)
            for name, item in adapters.items()
        }
        self._verifiers = dict(verifiers or {})

    @property
    def adapters(self) -> Mapping[str, Adapter]:
        return self._adapters

    @property
    def verifiers(self) -> Mapping[str, Verifier]:
        return self._verifiers
