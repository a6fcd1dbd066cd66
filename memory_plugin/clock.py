"""Time and ids, in the forms the APIs use."""

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


def isoformat(instant: datetime) -> str:
    """``2026-05-28T12:00:00.123456Z``: ISO 8601, UTC, microseconds, ``Z``."""
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_instant(text: str) -> datetime:
    """An ISO 8601 date or date-time as an aware UTC datetime; ValueError if malformed."""
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def new_id() -> str:
    """A random URL-safe id of 20 characters, like OpenSearch's auto ids."""
    while True:
        candidate = secrets.token_urlsafe(15)
        if candidate[0].isalnum():
            return candidate
