"""Instants in the forms the APIs and stores use: one home for parsing and formatting dates.

Every instant inside the server is an aware UTC ``datetime``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def as_utc(value: datetime) -> datetime:
    """``value`` in UTC; a naive datetime is taken to be UTC already."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def isoformat(instant: datetime) -> str:
    """``2026-05-28T12:00:00.123456Z``: ISO 8601, UTC, always microseconds, ``Z``.

    Fixed width (years below 1000 keep their leading zeros), so that the text
    sorts as the instant does.
    """
    return as_utc(instant).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def parse_instant(text: str) -> datetime:
    """An ISO 8601 date or date-time as an aware UTC datetime; ValueError if malformed.

    ``Z``/``z`` and offsets are accepted; a date alone is midnight UTC; a time
    without an offset is taken as UTC.
    """
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    return as_utc(datetime.fromisoformat(value))


def to_micros(value: datetime) -> int:
    """An instant as integer microseconds since the epoch (exact, sortable)."""
    delta = as_utc(value) - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(value: int) -> datetime:
    """The inverse of :func:`to_micros`."""
    return EPOCH + timedelta(microseconds=value)
