"""``sort``: parsing, sort keys, and the values reported in ``hits.hits[].sort``."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memory_plugin.dsl.values import (
    MISSING,
    QueryParsingError,
    epoch_millis,
    field_values,
    is_number,
    parse_date,
    token_name,
)

# --------------------------------------------------------------------------- sort / _source


@dataclass(frozen=True)
class SortSpec:
    field: str  # "_score", "_id", "_doc" or a (dotted) field path
    order: str  # "asc" | "desc"
    missing: str = "_last"  # "_last" | "_first"
    unmapped_type: str | None = None  # how to sort a field the index does not map (else that is an error)


def parse_order(fname: str, order: Any) -> str:
    if not isinstance(order, str) or order.lower() not in ("asc", "desc"):
        raise QueryParsingError(f"[{fname}] sort order [{order}] must be one of [asc, desc]")
    return order.lower()


def parse_sort(spec: Any) -> tuple[SortSpec, ...]:
    items = spec if isinstance(spec, list | tuple) else [spec]
    out: list[SortSpec] = []
    for item in items:
        if isinstance(item, str):
            out.append(SortSpec(item, "desc" if item == "_score" else "asc"))
        elif isinstance(item, Mapping) and len(item) == 1:
            ((fname, opts),) = item.items()
            if isinstance(opts, str):
                out.append(SortSpec(fname, parse_order(fname, opts)))
            elif isinstance(opts, Mapping):
                for k in opts:
                    if k not in ("order", "missing", "unmapped_type", "mode", "format", "numeric_type"):
                        raise QueryParsingError(f"[field_sort] unknown field [{k}]")
                order = (
                    parse_order(fname, opts["order"]) if "order" in opts else ("desc" if fname == "_score" else "asc")
                )
                missing = opts.get("missing", "_last")
                if missing not in ("_last", "_first"):
                    raise QueryParsingError(f"[{fname}] sort: unsupported [missing] value [{missing}]")
                unmapped_type = opts.get("unmapped_type")
                out.append(SortSpec(fname, order, missing, None if unmapped_type is None else str(unmapped_type)))
            else:
                raise QueryParsingError(
                    f"malformed sort format, within the sort array, an object, or an actual string are allowed, found [{token_name(opts)}]"
                )
        else:
            raise QueryParsingError(
                "malformed sort format, within the sort array, an object, or an actual string are allowed"
            )
    return tuple(out)


def sort_value(src: Mapping[str, Any], doc_id: str, spec: SortSpec) -> Any:
    if spec.field == "_id":
        return doc_id
    values = [v for v in field_values(src, spec.field) if not isinstance(v, Mapping)]
    keyed = [k for k in (sort_key(v) for v in values) if k is not None]
    if not keyed:
        return MISSING
    return min(keyed) if spec.order == "asc" else max(keyed)


def sort_key(value: Any) -> tuple[int, Any] | None:
    """A key that orders numbers and dates numerically and strings lexically."""
    if isinstance(value, bool):
        return (0, float(value))
    if is_number(value):
        return (0, float(value))
    if isinstance(value, str):
        dt = None if value.strip().startswith("now") else parse_date(value)
        if dt is not None:
            return (0, epoch_millis(dt))
        return (1, value)
    return None


class Descending:
    """Inverts comparison, for descending keys inside a composite sort key."""

    __slots__ = ("v",)

    def __init__(self, v: Any) -> None:
        self.v = v

    def __lt__(self, other: Descending) -> bool:
        return bool(other.v < self.v)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Descending) and other.v == self.v


def reported_sort_value(src: Mapping[str, Any], doc_id: str, pos: int, score: float, spec: SortSpec) -> Any:
    """The value OpenSearch reports in ``hits.hits[].sort`` (dates as epoch millis)."""
    if spec.field == "_score":
        return score
    if spec.field == "_doc":
        return pos
    v = sort_value(src, doc_id, spec)
    if v is MISSING:
        return None
    if spec.field == "_id":
        return v
    kind, raw = v
    if kind == 0:
        if any(isinstance(x, str) for x in field_values(src, spec.field)):
            return int(math.floor(raw))  # a date: epoch millis, as a long
        return int(raw) if float(raw).is_integer() else raw
    return raw
