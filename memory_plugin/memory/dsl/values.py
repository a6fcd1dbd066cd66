"""Values as the DSL sees them: field lookup, analysis, numbers and dates (with date math)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from memory_plugin.errors import InvalidArgument


class QueryParsingError(InvalidArgument):
    """A search body OpenSearch would reject while parsing it (HTTP 400)."""

    type = "parsing_exception"


# --------------------------------------------------------------------------- helpers

TOKEN = re.compile(r"\w+", re.UNICODE)
MISSING = object()


def analyze(text: str) -> list[str]:
    """Approximate the standard analyzer: lowercase word tokens."""
    return TOKEN.findall(text.lower())


def token_name(value: Any) -> str:
    """The XContent token OpenSearch would name for a JSON value."""
    if isinstance(value, Mapping):
        return "START_OBJECT"
    if isinstance(value, list | tuple):
        return "START_ARRAY"
    if isinstance(value, bool):
        return "VALUE_BOOLEAN"
    if isinstance(value, int | float):
        return "VALUE_NUMBER"
    if value is None:
        return "VALUE_NULL"
    return "VALUE_STRING"


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def without_keyword_suffix(path: str) -> str:
    return path[: -len(".keyword")] if path.endswith(".keyword") else path


def lookup(obj: Any, path: str) -> list[Any]:
    """Values at a dotted ``path``; arrays are flattened, as OpenSearch does."""
    if isinstance(obj, list | tuple):
        out: list[Any] = []
        for item in obj:
            out.extend(lookup(item, path))
        return out
    if not isinstance(obj, Mapping):
        return []
    if path in obj:  # literal key, possibly containing dots
        value = obj[path]
        if isinstance(value, list | tuple):
            return [v for v in flatten(value)]
        return [value]
    head, dot, rest = path.partition(".")
    while dot:
        if head in obj:
            found = lookup(obj[head], rest)
            if found:
                return found
        nxt, dot, rest = rest.partition(".")
        head = f"{head}.{nxt}"
    return []


def flatten(values: Iterable[Any]) -> Iterable[Any]:
    for v in values:
        if isinstance(v, list | tuple):
            yield from flatten(v)
        else:
            yield v


def field_values(src: Mapping[str, Any], path: str) -> list[Any]:
    """Leaf values for a query on ``path``.

    A ``.keyword`` suffix is dropped when the suffixed path does not exist.
    An object value (e.g. the ``flat_object`` ``additional_info``) contributes
    all its leaf values, as a query on a ``flat_object`` root does.
    """
    values = lookup(src, path)
    if not values and path.endswith(".keyword"):
        values = lookup(src, without_keyword_suffix(path))
    out: list[Any] = []
    for v in values:
        collect_leaves(v, out)
    return [v for v in out if v is not None]


def collect_leaves(value: Any, out: list[Any]) -> None:
    if isinstance(value, Mapping):
        for v in value.values():
            collect_leaves(v, out)
    elif isinstance(value, list | tuple):
        for v in value:
            collect_leaves(v, out)
    else:
        out.append(value)


ISO_DATE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})"
    r"(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?)?"
    r"(Z|[+-]\d{2}:?\d{2})?$"
)
DATE_MATH = re.compile(r"^now((?:[+-]\d+[yMwdhHms])*)(?:/([yMwdhHms]))?$")
DATE_MATH_UNIT = re.compile(r"([+-])(\d+)([yMwdhHms])")


def parse_date(value: Any) -> datetime | None:
    """An aware UTC datetime for an ISO 8601 string or ``now`` date math."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    m = ISO_DATE.match(text)
    if m:
        year, month, day, hh, mm, ss, frac, tz = m.groups()
        try:
            micro = int((frac or "0")[:6].ljust(6, "0"))
            dt = datetime(int(year), int(month), int(day), int(hh or 0), int(mm or 0), int(ss or 0), micro)
        except ValueError:
            return None
        if tz and tz != "Z":
            sign = 1 if tz[0] == "+" else -1
            digits = tz[1:].replace(":", "")
            offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
            dt = (dt - sign * offset).replace(tzinfo=UTC)
        else:
            dt = dt.replace(tzinfo=UTC)
        return dt
    m = DATE_MATH.match(text)
    if m:
        dt = datetime.now(UTC)
        for sign, amount, unit in DATE_MATH_UNIT.findall(m.group(1)):
            dt = add_calendar_units(dt, int(amount) * (1 if sign == "+" else -1), unit)
        if m.group(2):
            dt = round_down(dt, m.group(2))
        return dt
    return None


def add_calendar_units(dt: datetime, n: int, unit: str) -> datetime:
    if unit == "y":
        return dt.replace(year=dt.year + n)
    if unit == "M":
        month = dt.month - 1 + n
        return dt.replace(year=dt.year + month // 12, month=month % 12 + 1, day=min(dt.day, 28))
    seconds = {"w": 604800, "d": 86400, "h": 3600, "H": 3600, "m": 60, "s": 1}[unit]
    return dt + timedelta(seconds=n * seconds)


def round_down(dt: datetime, unit: str) -> datetime:
    if unit == "y":
        return dt.replace(month=1, day=1, hour=0, minute=0, second=0, microsecond=0)
    if unit == "M":
        return dt.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    if unit == "w":
        dt = dt - timedelta(days=dt.weekday())
        return dt.replace(hour=0, minute=0, second=0, microsecond=0)
    if unit == "d":
        return dt.replace(hour=0, minute=0, second=0, microsecond=0)
    if unit in ("h", "H"):
        return dt.replace(minute=0, second=0, microsecond=0)
    if unit == "m":
        return dt.replace(second=0, microsecond=0)
    return dt.replace(microsecond=0)


def epoch_millis(dt: datetime) -> float:
    return dt.timestamp() * 1000.0


def as_float(value: Any) -> float | None:
    if is_number(value):
        return float(value)
    if isinstance(value, str):
        try:
            f = float(value)
        except ValueError:
            return None
        return f if math.isfinite(f) else None
    return None


def values_equal(field_value: Any, wanted: Any, case_insensitive: bool = False) -> bool:
    """Term equality with OpenSearch-like coercion between JSON scalar types."""
    if isinstance(wanted, bool) or isinstance(field_value, bool):
        norm = {True: "true", False: "false"}
        a = norm[field_value] if isinstance(field_value, bool) else str(field_value).lower()
        b = norm[wanted] if isinstance(wanted, bool) else str(wanted).lower()
        return a == b
    if is_number(wanted) or is_number(field_value):
        fa, fb = as_float(field_value), as_float(wanted)
        if fa is not None and fb is not None:
            return fa == fb
        if isinstance(field_value, str) and is_number(wanted):
            fdt = parse_date(field_value)
            return fdt is not None and epoch_millis(fdt) == float(wanted)
        return False
    a_s, b_s = str(field_value), str(wanted)
    if a_s == b_s or (case_insensitive and a_s.lower() == b_s.lower()):
        return True
    a_dt, b_dt = parse_date(a_s), parse_date(b_s)
    return a_dt is not None and b_dt is not None and ISO_DATE.match(b_s) is not None and a_dt == b_dt


def check_scalar(qname: str, value: Any) -> Any:
    if isinstance(value, Mapping | list | tuple) or value is None:
        raise QueryParsingError(f"[{qname}] query does not support value of type [{token_name(value)}]")
    return value


def parse_boost(qname: str, value: Any) -> float:
    f = as_float(value)
    if f is None or isinstance(value, bool):
        raise QueryParsingError(f"[{qname}] query: [boost] must be a number")
    return f


def single_field(qname: str, body: Any) -> tuple[str, Any, dict[str, Any]]:
    """Split ``{field: value_or_options, "boost"?, "_name"?}`` (one field only)."""
    if not isinstance(body, Mapping):
        raise QueryParsingError(f"[{qname}] query malformed, no start_object after query name")
    fields = [k for k in body if k not in ("boost", "_name")]
    if not fields:
        raise QueryParsingError(f"[{qname}] query malformed, no field specified")
    if len(fields) > 1:
        raise QueryParsingError(
            f"[{qname}] query doesn't support multiple fields, found [{fields[0]}] and [{fields[1]}]"
        )
    extra = {k: body[k] for k in body if k in ("boost", "_name")}
    return fields[0], body[fields[0]], extra
