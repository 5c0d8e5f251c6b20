"""Structured logs: one JSON object per line, with the proposal's ids, decision and code.

Fields come from ``extra=`` on the log call; only the fields listed in ``FIELDS`` are written,
so a careless ``extra`` can never put arguments, results or credentials in the log.
"""

from __future__ import annotations

import logging
import sys
import time

import msgspec

__all__ = ["FIELDS", "JsonFormatter", "configure_logging"]

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
