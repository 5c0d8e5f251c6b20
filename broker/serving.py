"""How the broker is served: uvicorn, as ``uvicorn.run`` comes, with limits on request heads.

No access log (the broker logs each decision itself, one line per proposal) and no logging
config of uvicorn's own (``log_config=None``: uvicorn's loggers propagate to the broker's JSON
logging). The HTTP protocol is uvicorn's httptools one with bounds on a request's head (its size,
its header count, the time it may take: ``broker.http_limits``); everything else (event loop,
keep-alive) is uvicorn's default.
"""

from __future__ import annotations

from typing import Any

import uvicorn

from broker.http_limits import HttpLimits, protocol_for

__all__ = ["serve"]


def serve(
    app: Any, *, host: str, port: int, limits: HttpLimits | None = None, **options: Any
) -> None:
    """``uvicorn.run`` as the broker runs it (see the module docstring); ``options`` are
    ``uvicorn.run``'s own (``workers``, ``factory``, ``log_level``...)."""
    options.setdefault("log_config", None)
    options.setdefault("access_log", False)
    workers = int(options.get("workers") or 1)
    options.setdefault("http", protocol_for(limits or HttpLimits(), workers=workers))
    uvicorn.run(app, host=host, port=port, **options)
