"""Values as the DSL sees them: field lookup, analysis, numbers and dates (with date math), and a query as
OpenSearch shows it in its messages."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from memory_plugin.dates import DateError, parse_date_math, parse_instant
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


#: Epoch milliseconds as text: what ``Long.parseLong`` reads (at most 19 ASCII digits).
EPOCH_MILLIS = re.compile(r"-?[0-9]{1,18}", re.ASCII)

#: What a date looks like before it is parsed: a range bound of this shape must parse, or it is a 400.
DATE_SHAPED = re.compile(r"\s*(?:now|\d{1,9}-\d{1,2}-\d{1,2})")


def parse_date(value: Any) -> datetime | None:
    """An aware UTC datetime for an ISO 8601 string or ``now`` date math; None for anything else.

    Both go through :mod:`memory_plugin.dates`, so dates are as strict and as
    bounded here as everywhere else.
    """
    if not isinstance(value, str):
        return None
    try:
        return checked_date(value)
    except DateError:
        return None


def checked_date(text: str) -> datetime:
    """``text`` as an instant; :class:`DateError` when it is malformed or outside years 0001-9999."""
    if text.strip().startswith("now"):
        return parse_date_math(text, datetime.now(UTC))
    return parse_instant(text)


def epoch_millis(dt: datetime) -> float:
    return dt.timestamp() * 1000.0


def as_float(value: Any) -> float | None:
    """``value`` as a finite float, or None (non-numbers, NaN, infinities, integers too large for a double)."""
    if not (is_number(value) or isinstance(value, str)):
        return None
    try:
        f = float(value)
    except (ValueError, OverflowError):
        return None
    return f if math.isfinite(f) else None


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
    return a_dt is not None and b_dt is not None and not b_s.strip().startswith("now") and a_dt == b_dt


def check_scalar(qname: str, value: Any) -> Any:
    if isinstance(value, Mapping | list | tuple) or value is None:
        raise QueryParsingError(f"[{qname}] query does not support value of type [{token_name(value)}]")
    return value


def pretty(value: Any, indent: int = 0) -> str:
    """``value`` as Jackson's default pretty printer writes it, as OpenSearch's ``toString`` of a query shows it."""
    if isinstance(value, Mapping):
        if not value:
            return "{ }"
        inner = " " * (indent + 2)
        fields = ",\n".join(
            f"{inner}{json.dumps(key, ensure_ascii=False)} : {pretty(item, indent + 2)}" for key, item in value.items()
        )
        return "{\n" + fields + "\n" + " " * indent + "}"
    if isinstance(value, list | tuple):
        return "[ " + ", ".join(pretty(item, indent) for item in value) + " ]" if value else "[ ]"
    return json.dumps(value, ensure_ascii=False)


def parse_boost(qname: str, value: Any, shown: Callable[[], Mapping[str, Any]] | None = None) -> float:
    """``boost``; a negative one is refused naming the query as OpenSearch's builder shows it when its
    boost is set (``shown``: every other option parsed, the boost still 1.0)."""
    f = as_float(value)
    if f is None or isinstance(value, bool):
        raise QueryParsingError(f"[{qname}] query: [boost] must be a number")
    if f < 0:
        query = shown() if shown is not None else {qname: {"boost": 1.0}}
        raise InvalidArgument(
            f"negative [boost] are not allowed in [{pretty(query)}], use a value between 0 and 1 to deboost",
            parameter="boost",
        )
    return f


def query_object(qname: str, body: Any, allowed: Collection[str] | None = None) -> Mapping[str, Any]:
    """A query's body: an object, of only ``allowed`` keys when given."""
    if not isinstance(body, Mapping):
        raise QueryParsingError(f"[{qname}] query malformed, no start_object after query name")
    if allowed is not None:
        for k in body:
            if k not in allowed:
                raise QueryParsingError(f"[{qname}] query does not support [{k}]")
    return body


def single_field(qname: str, body: Any) -> tuple[str, Any, dict[str, Any]]:
    """Split ``{field: value_or_options, "boost"?, "_name"?}`` (one field only)."""
    body = query_object(qname, body)
    fields = [k for k in body if k not in ("boost", "_name")]
    if not fields:
        raise QueryParsingError(f"[{qname}] query malformed, no field specified")
    if len(fields) > 1:
        raise QueryParsingError(
            f"[{qname}] query doesn't support multiple fields, found [{fields[0]}] and [{fields[1]}]"
        )
    extra = {k: body[k] for k in body if k in ("boost", "_name")}
    return fields[0], body[fields[0]], extra
