"""Structured logs: one JSON object per line, with the request id when there is one.

Every request logs a line, so formatting one is on every request's path: the
time prefix is kept per second and the JSON encoder is built once.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

from memory_plugin.dates import isoformat

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}
_ENCODER = json.JSONEncoder(default=str)


class JsonFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__()
        self._second = -1
        self._prefix = ""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self._time(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update({key: value for key, value in record.__dict__.items() if key not in _STANDARD})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return _ENCODER.encode(entry)

    def _time(self, created: float) -> str:
        """``isoformat`` of the instant, with the text up to the second reused within a second."""
        second = int(created)
        micros = round((created - second) * 1_000_000)
        if micros >= 1_000_000:
            return isoformat(datetime.fromtimestamp(created, UTC))
        if second != self._second:
            self._prefix = isoformat(datetime.fromtimestamp(second, UTC))[:19]
            self._second = second
        return f"{self._prefix}.{micros:06d}Z"


def configure(level: int | str = logging.INFO) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # No line shows where a call was made from: skip finding it on every call
    # (the logging documentation's "Optimization" section).
    logging._srcfile = None
