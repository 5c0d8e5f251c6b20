"""The inbox's stylesheet and its one script, served from here so the pages need nothing from
elsewhere and a ``default-src 'self'`` policy holds (no inline style or script)."""

from __future__ import annotations

from pathlib import Path

from litestar import Controller, Response, get

__all__ = ["InboxAssets"]

_DIRECTORY = Path(__file__).parent / "static"
_CSS = (_DIRECTORY / "inbox.css").read_bytes()  # read once: they ship with the package
_JS = (_DIRECTORY / "inbox.js").read_bytes()
_HEADERS = {"Cache-Control": "max-age=300", "X-Content-Type-Options": "nosniff"}


class InboxAssets(Controller):
    path = "/static"

    @get("/inbox.css", include_in_schema=False, sync_to_thread=False)
    def stylesheet(self) -> Response[bytes]:
        return Response(_CSS, media_type="text/css; charset=utf-8", headers=_HEADERS)

    @get("/inbox.js", include_in_schema=False, sync_to_thread=False)
    def script(self) -> Response[bytes]:
        return Response(_JS, media_type="text/javascript; charset=utf-8", headers=_HEADERS)
