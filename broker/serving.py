"""How the broker is served: stock uvicorn, as ``uvicorn.run`` comes.

No access log (the broker logs each decision itself, one line per proposal) and no logging
config of uvicorn's own (``log_config=None``: uvicorn's loggers propagate to the broker's JSON
logging). Everything else (event loop, HTTP parser, keep-alive) is uvicorn's default.
"""

from __future__ import annotations

from typing import Any

import uvicorn

__all__ = ["serve"]


def serve(app: Any, *, host: str, port: int, **options: Any) -> None:
    """``uvicorn.run`` as the broker runs it (see the module docstring); ``options`` are
    ``uvicorn.run``'s own (``workers``, ``factory``, ``log_level``...)."""
    options.setdefault("log_config", None)
    options.setdefault("access_log", False)
    uvicorn.run(app, host=host, port=port, **options)
