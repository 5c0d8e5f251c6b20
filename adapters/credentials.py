"""Credentials bound to a tool, as the HTTP headers an outbound call carries (``http`` and ``mcp``).

A tool's ``credential_headers`` maps a header to the name of a credential the operator bound to
the tool (and tenant); the values come from the call's context only, never from the proposal.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from broker.plugins import ProviderError

__all__ = ["credential_headers"]

_HEADER_VALUE = re.compile(r"^[\x20-\x7e]{1,4096}$")


def credential_headers(
    tool: str, wanted: Mapping[str, str], credentials: Mapping[str, str]
) -> dict[str, str]:
    """``{header: value}`` for each wanted credential bound for this call.

    Raises:
        ProviderError: a bound value that cannot travel as a header (definite: a config fault).
    """
    headers: dict[str, str] = {}
    for header, name in wanted.items():
        value = credentials.get(name)
        if value is None:
            continue  # not bound for this tenant: the backend sees no credential, not a guess
        if not _HEADER_VALUE.fullmatch(value):
            raise ProviderError(f"{tool}: credential {name!r} cannot be sent as a header")
        headers[header] = value
    return headers
