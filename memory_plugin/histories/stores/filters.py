"""The filter language of ``GET /v2/ai/conversation_histories``.

Query parameters are parsed once into a small tree (a conjunction of
conditions).  Each store compiles the tree into its own form in its own
module; nothing else interprets it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from memory_plugin import dates
from memory_plugin.dates import as_utc
from memory_plugin.errors import InvalidArgument
from memory_plugin.histories.stores.records import MetadataValue, Record

Operator = Literal["eq", "in", "gte", "gt", "lte", "lt", "contains"]
OPERATORS: tuple[Operator, ...] = ("eq", "in", "gte", "gt", "lte", "lt", "contains")

#: Filterable top-level fields (seed 003).  Any other name means ``metadata.<name>``.
TOP_LEVEL_FIELDS = (
    "user_id",
    "record_type",
    "region",
    "document_id",
    "record_id",
    "record_created_at",
    "ingested_at",
    "retention",
)
DATE_FIELDS = ("record_created_at", "ingested_at")

#: A value after parsing: dates become aware UTC datetimes, the rest stay strings.
FilterValue = str | datetime


@dataclass(frozen=True, slots=True)
class Condition:
    """``field op values``.  ``field`` is a top-level name or ``metadata.<name>``."""

    field: str
    op: Operator
    values: tuple[FilterValue, ...]

    @property
    def is_metadata(self) -> bool:
        return self.field.startswith("metadata.")


@dataclass(frozen=True, slots=True)
class Filter:
    """All conditions must hold.  The empty filter matches everything."""

    conditions: tuple[Condition, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.conditions)


# --- Parsing -----------------------------------------------------------------

#: The most values one ``filter[field][in]`` may list (documented in docs/api-histories.md); more is a 400 naming it.
MAX_IN_VALUES = 1000
#: The most ``filter[...]`` parameters one request may carry.
MAX_CONDITIONS = 64

_KEY = re.compile(r"filter\[([^\[\]]*)\](?:\[([^\[\]]*)\])?")
#: A field or metadata key: safe in SQL JSON paths and OpenSearch field names alike.
FIELD_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def parse_filters(params: Iterable[tuple[str, str]]) -> Filter:
    """Parse ``filter[field]=v`` / ``filter[field][op]=v`` query pairs into a Filter.

    Pairs whose key does not start with ``filter[`` are ignored, so callers may
    pass the whole query string.  Every rejection is an ``InvalidArgument``
    naming the offending parameter.  Values:

    * ``in`` splits on commas and drops empty items; an empty value is a 400,
      and so are more than :data:`MAX_IN_VALUES` values or more than
      :data:`MAX_CONDITIONS` filter parameters.
    * Dates (``record_created_at``, ``ingested_at``) become aware UTC datetimes;
      ``Z``, offsets and date-only (midnight UTC) are accepted, a time without
      an offset is taken as UTC.  ``contains`` on a date is a 400.
    * Everything else stays a string; see :func:`matches` for how strings
      compare with metadata values.
    """
    conditions: list[Condition] = []
    for key, raw in params:
        if not key.startswith("filter["):
            continue
        match = _KEY.fullmatch(key)
        if match is None:
            raise InvalidArgument(f"malformed filter parameter '{key}'", parameter=key)
        name, op = match.group(1), ("eq" if match.group(2) is None else match.group(2))
        if not FIELD_NAME.fullmatch(name):
            raise InvalidArgument(f"invalid filter field '{name}': use 1 to 64 of A-Z a-z 0-9 _ -", parameter=key)
        if op not in OPERATORS:
            raise InvalidArgument(
                f"unknown operator '{op}' in '{key}'; use one of {', '.join(OPERATORS)}", parameter=key
            )
        field = name if name in TOP_LEVEL_FIELDS else f"metadata.{name}"
        items = [item for item in raw.split(",") if item] if op == "in" else ([raw] if raw else [])
        if not items:
            raise InvalidArgument(f"filter '{key}' needs a value", parameter=key)
        if len(items) > MAX_IN_VALUES:
            raise InvalidArgument(
                f"filter '{key}' lists {len(items)} values; at most {MAX_IN_VALUES} are allowed", parameter=key
            )
        if len(conditions) == MAX_CONDITIONS:
            raise InvalidArgument(f"at most {MAX_CONDITIONS} filter parameters are allowed", parameter=key)
        if field in DATE_FIELDS:
            if op == "contains":
                raise InvalidArgument(f"'contains' does not apply to the date field '{name}'", parameter=key)
            values: tuple[FilterValue, ...] = tuple(parse_instant(item, parameter=key) for item in items)
        else:
            values = tuple(items)
        conditions.append(Condition(field, op, values))
    return Filter(tuple(conditions))


def parse_instant(text: str, *, parameter: str) -> datetime:
    """An ISO 8601 instant as an aware UTC datetime (naive means UTC); a 400 naming ``parameter`` if malformed."""
    try:
        return dates.parse_instant(text)
    except dates.DateError as error:
        raise InvalidArgument(f"malformed date in '{parameter}': {error}", parameter=parameter) from None


def as_number(text: str) -> float | None:
    """The number a filter value spells (``5``, ``-2.5``, ``1e3``), else None."""
    if not _NUMBER.fullmatch(text):
        return None
    number = float(text)
    return number if math.isfinite(number) else None


def fold(text: str) -> str:
    """Case folding used by ``contains`` everywhere (stores must use this too)."""
    return text.casefold()


# --- Reference evaluation ----------------------------------------------------

_MISSING = object()


def matches(where: Filter, record: Record) -> bool:
    """Whether ``record`` satisfies every condition: the reference semantics.

    Stores must agree with this function exactly.

    * Missing fields (``None`` or an absent metadata key) never match.
    * Top-level strings compare as strings (ranges by code point); dates as instants.
    * Metadata ``eq``/``in``: a string value matches when equal; a boolean when
      the filter value is ``true``/``false`` respectively; a number when the
      filter value is a number equal to it (``5`` matches 5 and 5.0).
    * Metadata ranges: if the filter value is a number, only numeric values
      match, compared numerically; otherwise only string values, compared by
      code point.  Booleans never match a range.
    * ``contains``: case-insensitive (``str.casefold``) substring; only string
      values match.
    """
    return all(_condition_holds(condition, record) for condition in where.conditions)


def _condition_holds(condition: Condition, record: Record) -> bool:
    if condition.is_metadata:
        value: Any = record.metadata.get(condition.field[len("metadata.") :], _MISSING)
        if value is _MISSING:
            return False
        expected_values: tuple[str, ...] = condition.values  # type: ignore[assignment]
        return any(_metadata_holds(condition.op, value, expected) for expected in expected_values)
    value = getattr(record, condition.field)
    if value is None:
        return False
    if condition.field in DATE_FIELDS:
        value = as_utc(value)
    return any(_compare(condition.op, value, expected) for expected in condition.values)


def _compare(op: str, value: Any, expected: Any) -> bool:
    if op in ("eq", "in"):
        return bool(value == expected)
    if op == "contains":
        return fold(expected) in fold(value)
    return bool(
        (op == "gt" and value > expected)
        or (op == "gte" and value >= expected)
        or (op == "lt" and value < expected)
        or (op == "lte" and value <= expected)
    )


def _metadata_holds(op: str, value: MetadataValue, expected: str) -> bool:
    number = as_number(expected)
    if isinstance(value, bool):
        return op in ("eq", "in") and expected == ("true" if value else "false")
    if isinstance(value, (int, float)):
        return op != "contains" and number is not None and _compare(op, value, number)
    if op in ("eq", "in", "contains"):
        return _compare(op, value, expected)
    return number is None and _compare(op, value, expected)
