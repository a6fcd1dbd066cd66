"""The current time and new ids (dates are formatted and parsed in ``dates.py``)."""

from __future__ import annotations

import secrets
import threading
from datetime import UTC, datetime, timedelta

_lock = threading.Lock()
_last = datetime.min.replace(tzinfo=UTC)


def now() -> datetime:
    """The current UTC instant, strictly later than the previous call's.

    Strictly increasing times keep "newest first" well defined for writes that
    land within the same microsecond.
    """
    global _last
    with _lock:
        current = datetime.now(UTC)
        if current <= _last:
            current = _last + timedelta(microseconds=1)
        _last = current
        return current


def new_id() -> str:
    """A random URL-safe id of 20 characters, like OpenSearch's auto ids."""
    while True:
        candidate = secrets.token_urlsafe(15)
        if candidate[0].isalnum():
            return candidate
