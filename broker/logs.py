"""Structured logs: one JSON object per line, with the proposal's ids, decision and code.

Fields come from ``extra=`` on the log call; only the fields listed in ``FIELDS`` are written,
so a careless ``extra`` can never put arguments, results or credentials in the log.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable

import msgspec

__all__ = ["FIELDS", "JsonFormatter", "RateLimitedLog", "configure_logging"]

FIELDS = (
    "trace_id",
    "proposal_id",
    "route",
    "tenant",
    "tool",
    "decision",
    "category",
    "code",
    "status",
    "replayed",
    "dry_run",
    "duration_ms",
)

_encoder = msgspec.json.Encoder()


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            value = record.__dict__.get(name)
            if value is not None:
                line[name] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return _encoder.encode(line).decode()


def configure_logging(level: str = "INFO") -> None:
    """JSON lines on stderr for the broker's and the server's loggers."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True


class RateLimitedLog:
    """A logger for faults that repeat (a store down, a backend unreachable): the first
    occurrence of a message is logged at once, repeats of it at most once per ``every_s``,
    with how many were held back meanwhile. A loop that retries every second then says so
    once a minute, not 60 times.

    Messages are told apart by their format string, so a changing argument (an error text, a
    count) does not defeat the limit.
    """

    def __init__(
        self,
        logger: logging.Logger,
        *,
        every_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._every_s = every_s
        self._clock = clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def warning(self, msg: str, *args: object) -> bool:
        return self.log(logging.WARNING, msg, *args)

    def error(self, msg: str, *args: object) -> bool:
        return self.log(logging.ERROR, msg, *args)

    def log(self, level: int, msg: str, *args: object) -> bool:
        """Log unless this message was logged less than ``every_s`` ago; whether it was."""
        now = self._clock()
        last = self._last.get(msg)
        if last is not None and now - last < self._every_s:
            self._held[msg] = self._held.get(msg, 0) + 1
            return False
        self._last[msg] = now
        held = self._held.pop(msg, 0)
        if held:
            self._logger.log(level, msg + " (%d more like it held back)", *args, held)
        else:
            self._logger.log(level, msg, *args)
        return True

    def recovered(self, msg: str) -> None:
        """Forget ``msg``: the fault is over, so its next occurrence is news again."""
        self._last.pop(msg, None)
        self._held.pop(msg, None)
