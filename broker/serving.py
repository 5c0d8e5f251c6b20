"""How the broker is served: uvicorn's httptools protocol, each answer's head and body sent as one.

uvicorn writes an answer's status line and headers as soon as the app sends
``http.response.start``, and the body in a second write: two system calls and two TCP segments,
so the client wakes up twice per answer (Nagle is off, as it should be). On a broker answering
in a few hundred microseconds that second round costs about a tenth of a millisecond when the
client shares the core (``bench/bench_http_adapter.py``: 0.73 -> 0.65 ms through the broker),
and a system call per answer under load. :class:`PairedWritesProtocol` gives uvicorn's protocol a
transport that holds a write until the next one and sends both together; a write with no
successor (an interim ``100 Continue``, the last chunk of a stream) leaves at the end of the
same event-loop turn, so nothing waits longer than the code that produced it runs.
"""

from __future__ import annotations

import asyncio
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["PairedWritesProtocol", "serve"]


class _PairedWrites:
    """A transport whose writes leave two at a time (see the module docstring)."""

    __slots__ = ("_held", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes) -> None:
        held = self._held
        if held is None:
            self._held = data
            self._loop.call_soon(self._release)
        else:
            self._held = None
            self._transport.write(held + data)

    def close(self) -> None:
        self._release()  # what was written before closing still goes out first
        self._transport.close()

    def _release(self) -> None:
        held, self._held = self._held, None
        if held is not None and not self._transport.is_closing():
            self._transport.write(held)

    def __getattr__(self, name: str) -> Any:
        # Everything else (flow control, is_closing, get_extra_info...) is the transport's own.
        return getattr(self._transport, name)


class PairedWritesProtocol(HttpToolsProtocol):
    """uvicorn's httptools HTTP/1.1 protocol over :class:`_PairedWrites`."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        paired = _PairedWrites(transport, self.loop)  # type: ignore[arg-type]
        super().connection_made(paired)  # type: ignore[arg-type]


def serve(app: Any, *, host: str, port: int, **options: Any) -> None:
    """``uvicorn.run`` as the broker runs: no access log (the broker logs each decision itself),
    uvicorn's logging left to ours, and :class:`PairedWritesProtocol`."""
    options.setdefault("log_config", None)
    uvicorn.run(app, host=host, port=port, access_log=False, http=PairedWritesProtocol, **options)
