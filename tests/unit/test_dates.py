"""``isoformat``: one fixed-width form for every instant, whichever path formats it."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone

from memory_plugin.dates import isoformat, parse_stored


def _reference(instant: datetime) -> str:
    """The form written out in full: the fast path for UTC must give exactly this."""
    utc = instant.astimezone(UTC)
    return (
        f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}"
        f".{utc.microsecond:06d}Z"
    )


def test_a_whole_second_keeps_its_fraction() -> None:
    assert isoformat(datetime(2026, 5, 28, 12, 0, tzinfo=UTC)) == "2026-05-28T12:00:00.000000Z"


def test_years_below_1000_keep_their_leading_zeros() -> None:
    assert isoformat(datetime(999, 1, 2, 3, 4, 5, 6, tzinfo=UTC)) == "0999-01-02T03:04:05.000006Z"
    assert isoformat(datetime(1, 1, 1, tzinfo=UTC)) == "0001-01-01T00:00:00.000000Z"


def test_other_offsets_and_naive_instants_are_written_in_utc() -> None:
    east = timezone(timedelta(hours=5, minutes=30))
    assert isoformat(datetime(2026, 1, 1, 5, 30, tzinfo=east)) == "2026-01-01T00:00:00.000000Z"
    assert isoformat(datetime(2026, 1, 1, 0, 0, 0, 5)) == "2026-01-01T00:00:00.000005Z"


def test_random_instants_match_the_reference_and_read_back() -> None:
    rng = random.Random(13)
    span = int((datetime(9999, 12, 31, tzinfo=UTC) - datetime(1, 1, 1, tzinfo=UTC)).total_seconds())
    for n in range(20_000):
        instant = datetime(1, 1, 1, tzinfo=UTC) + timedelta(seconds=rng.randrange(span))
        instant = instant.replace(microsecond=0 if n % 3 == 0 else rng.randrange(1_000_000))
        text = isoformat(instant)
        assert text == _reference(instant) and len(text) == 27
        assert parse_stored(text) == instant
