"""Instants in the forms the APIs and stores use: one home for parsing and formatting dates.

Every instant inside the server is an aware UTC ``datetime``.  :func:`parse_instant`
is the one strict parser of dates sent to us (``/v2`` records and filters, the
``_search`` DSL): 4-digit years, offsets within ±18:00, results inside years
0001-9999.  It raises :class:`DateError` (a ``ValueError``) with a message a
caller can put in a 400 beside the parameter's name.
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime, timedelta

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: ISO 8601 extended form: a date, or a date-time with an optional offset.
ISO_INSTANT = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})"
    r"(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?(?:([Zz])|([+-])(\d{2}):?(\d{2}))?)?"
)
MAX_OFFSET = timedelta(hours=18)
#: ``now`` date math (``now-1d/d``): up to 20 steps, amounts of up to 9 digits.
DATE_MATH = re.compile(r"now((?:[+-]\d{1,9}[yMwdhHms]){0,20})(?:/([yMwdhHms]))?")
DATE_MATH_STEP = re.compile(r"([+-])(\d+)([yMwdhHms])")
OUT_OF_RANGE = "is outside years 0001-9999"


class DateError(ValueError):
    """A date that is malformed or outside what the server keeps (years 0001-9999)."""


def as_utc(value: datetime) -> datetime:
    """``value`` in UTC; a naive datetime is taken to be UTC already."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def isoformat(instant: datetime) -> str:
    """``2026-05-28T12:00:00.123456Z``: ISO 8601, UTC, always microseconds, ``Z``.

    Fixed width (years below 1000 keep their leading zeros), so that the text
    sorts as the instant does.
    """
    if instant.tzinfo is UTC:  # every instant the server makes: skip the conversion
        return _utc_text(instant)
    return as_utc(instant).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


@functools.lru_cache(maxsize=4096)
def _utc_text(instant: datetime) -> str:
    """A UTC instant's text, remembered: lists show the same recent instants again and again,
    and a lookup costs a tenth of formatting.  The text depends only on the instant, which is
    what equal datetimes share, so that no two instants can meet under one key.

    Without ``timespec`` (whose keyword parsing costs more than the formatting), the fraction
    is left out when it is zero: it is put back, so that the width stays fixed.
    """
    text = instant.isoformat()[:-6]
    return text + "Z" if instant.microsecond else text + ".000000Z"


def parse_stored(text: str) -> datetime:
    """An instant as :func:`isoformat` wrote it, read back (a store's own text: no checks to make)."""
    return datetime.fromisoformat(text)


def parse_instant(text: str) -> datetime:
    """An ISO 8601 date or date-time as an aware UTC datetime; :class:`DateError` otherwise.

    ``YYYY-MM-DD`` (midnight UTC) or ``YYYY-MM-DDThh:mm[:ss[.fraction]]`` with
    ``Z``/``z``, ``±hh:mm``/``±hhmm`` (at most 18:00) or nothing (UTC).  The
    instant, once in UTC, must fall inside years 0001-9999.
    """
    match = ISO_INSTANT.fullmatch(text.strip())
    if match is None:
        raise DateError(f"'{text}' is not an ISO 8601 date-time such as 2026-01-01T00:00:00Z")
    year, month, day, hour, minute, second, fraction, _, sign, offset_h, offset_m = match.groups()
    try:
        naive = datetime(
            int(year),
            int(month),
            int(day),
            int(hour or 0),
            int(minute or 0),
            int(second or 0),
            int((fraction or "0")[:6].ljust(6, "0")),
        )
    except ValueError as error:
        raise DateError(f"'{text}' is not a valid date ({error})") from None
    if sign is None:
        return naive.replace(tzinfo=UTC)
    offset = timedelta(hours=int(offset_h), minutes=int(offset_m))
    if int(offset_m) >= 60 or offset > MAX_OFFSET:
        raise DateError(f"'{text}' has an offset beyond ±18:00")
    try:
        return (naive - offset if sign == "+" else naive + offset).replace(tzinfo=UTC)
    except OverflowError:
        raise DateError(f"'{text}' {OUT_OF_RANGE} once in UTC") from None


def parse_date_math(text: str, now: datetime) -> datetime:
    """``now``, ``now-1d``, ``now+1M/d``... relative to ``now``; :class:`DateError` if malformed or out of range."""
    match = DATE_MATH.fullmatch(text.strip())
    if match is None:
        raise DateError(f"'{text}' is not date math such as now-1d/d")
    instant = now
    try:
        for sign, amount, unit in DATE_MATH_STEP.findall(match.group(1)):
            instant = add_calendar_units(instant, int(amount) * (1 if sign == "+" else -1), unit)
        return round_down(instant, match.group(2)) if match.group(2) else instant
    except (OverflowError, ValueError):
        raise DateError(f"'{text}' {OUT_OF_RANGE}") from None


def add_calendar_units(instant: datetime, n: int, unit: str) -> datetime:
    """``instant`` moved by ``n`` units; ValueError/OverflowError past the calendar's ends."""
    if unit == "y":
        return instant.replace(year=instant.year + n, day=min(instant.day, 28) if instant.month == 2 else instant.day)
    if unit == "M":
        month = instant.month - 1 + n
        return instant.replace(year=instant.year + month // 12, month=month % 12 + 1, day=min(instant.day, 28))
    seconds = {"w": 604800, "d": 86400, "h": 3600, "H": 3600, "m": 60, "s": 1}[unit]
    return instant + timedelta(seconds=n * seconds)


def round_down(instant: datetime, unit: str) -> datetime:
    """``instant`` rounded down to the start of its ``unit`` (``/d`` in date math)."""
    if unit == "y":
        return instant.replace(month=1, day=1, hour=0, minute=0, second=0, microsecond=0)
    if unit == "M":
        return instant.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    if unit == "w":
        instant = instant - timedelta(days=instant.weekday())
        return instant.replace(hour=0, minute=0, second=0, microsecond=0)
    if unit == "d":
        return instant.replace(hour=0, minute=0, second=0, microsecond=0)
    if unit in ("h", "H"):
        return instant.replace(minute=0, second=0, microsecond=0)
    if unit == "m":
        return instant.replace(second=0, microsecond=0)
    return instant.replace(microsecond=0)


def to_micros(value: datetime) -> int:
    """An instant as integer microseconds since the epoch (exact, sortable)."""
    delta = as_utc(value) - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(value: int) -> datetime:
    """The inverse of :func:`to_micros`."""
    return EPOCH + timedelta(microseconds=value)
