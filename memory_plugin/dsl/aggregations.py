"""``aggs``: the metric and bucket aggregations a memory client asks for, over every matching document.

``terms`` (keyword values, most frequent first, then by key), ``value_count``,
``min``, ``max``, ``avg`` and ``sum``; dates count as epoch milliseconds and
come back with ``value_as_string``.  Others, and sub-aggregations, are a 400
naming the aggregation.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from memory_plugin.dsl.mapping import DATE, KEYWORD, LONG, TEXT, Fields, field_kind, text_field_data
from memory_plugin.dsl.scoring import as_keyword
from memory_plugin.dsl.values import (
    QueryParsingError,
    as_float,
    epoch_millis,
    field_values,
    parse_date,
    token_name,
)
from memory_plugin.errors import ShardFailure

METRICS = ("value_count", "min", "max", "avg", "sum")
AGGREGATION_NAME = re.compile(r"[^\[\]>]+")


@dataclass(frozen=True)
class Aggregation:
    name: str
    kind: str  # "terms" or one of METRICS
    field: str
    field_type: str
    size: int = 10

    def run(self, sources: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
        values_per_doc = [[v for v in field_values(src, self.field) if v is not None] for src in sources]
        if self.kind == "terms":
            counts: Counter[str] = Counter()
            for values in values_per_doc:
                counts.update({as_keyword(v) for v in values})
            ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
            shown = ordered[: self.size]
            return {
                "doc_count_error_upper_bound": 0,
                "sum_other_doc_count": sum(n for _, n in ordered[self.size :]),
                "buckets": [{"key": k, "doc_count": n} for k, n in shown],
            }
        every = [v for values in values_per_doc for v in values]
        if self.kind == "value_count":
            return {"value": len(every)}
        numbers = [n for n in (self._number(v) for v in every) if n is not None]
        value: float | None
        if self.kind == "sum":
            value = float(sum(numbers))
        elif not numbers:
            value = None
        elif self.kind == "min":
            value = float(min(numbers))
        elif self.kind == "max":
            value = float(max(numbers))
        else:
            value = float(sum(numbers)) / len(numbers)
        out: dict[str, Any] = {"value": value}
        if self.field_type == DATE and value is not None and self.kind in ("min", "max", "avg"):
            out["value_as_string"] = (
                datetime.fromtimestamp(value / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
            )
        return out

    def _number(self, value: Any) -> float | None:
        if self.field_type == DATE or isinstance(value, str):
            dt = parse_date(value)
            if dt is not None:
                return epoch_millis(dt)
        return as_float(value)


def parse_aggregations(body: Any, fields: Fields | None) -> tuple[Aggregation, ...]:
    if not isinstance(body, Mapping):
        raise QueryParsingError(f"Expected [START_OBJECT] under [aggs], but got a [{token_name(body)}]")
    out: list[Aggregation] = []
    for name, spec in body.items():
        if not AGGREGATION_NAME.fullmatch(name):
            raise QueryParsingError(
                f"Invalid aggregation name [{name}]. Aggregation names can contain any character except '[', ']', and '>'"
            )
        if not isinstance(spec, Mapping) or not spec:
            raise QueryParsingError(f"Missing definition for aggregation [{name}]")
        kinds = [k for k in spec if k not in ("meta",)]
        if any(k in ("aggs", "aggregations") for k in kinds):
            raise QueryParsingError(f"[{name}] sub-aggregations are not supported here")
        if len(kinds) != 1:
            raise QueryParsingError(
                f"Found two aggregation type definitions in [{name}]: [{kinds[0]}] and [{kinds[1]}]"
            )
        kind = kinds[0]
        options = spec[kind]
        if kind != "terms" and kind not in METRICS:
            raise QueryParsingError(
                f"Unknown aggregation type [{kind}] did you mean [terms]?"
                if kind not in KNOWN
                else f"aggregation [{kind}] is not supported here"
            )
        if not isinstance(options, Mapping):
            raise QueryParsingError(
                f"Expected [START_OBJECT] under [{kind}], but got a [{token_name(options)}] in [{name}]"
            )
        allowed = (
            {"field", "size", "missing", "format", "order", "min_doc_count", "shard_size"}
            if kind == "terms"
            else {"field", "missing", "format"}
        )
        for k in options:
            if k not in allowed:
                raise QueryParsingError(f"[{kind}] unknown field [{k}]")
        field = options.get("field")
        if not isinstance(field, str) or not field:
            raise QueryParsingError(f"Required one of fields [field, script], but none were specified. in [{name}]")
        field_type = field_kind(fields, field)
        if field_type == TEXT:
            raise ShardFailure(text_field_data(field))
        size = options.get("size", 10)
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise QueryParsingError(f"[size] must be greater than 0. Found [{size}] in [{name}]")
        out.append(
            Aggregation(
                name, kind, field, field_type if field_type in (DATE, LONG, KEYWORD) else field_type, min(size, 10000)
            )
        )
    return tuple(out)


KNOWN = frozenset(
    {
        "cardinality",
        "date_histogram",
        "histogram",
        "range",
        "date_range",
        "filter",
        "filters",
        "stats",
        "extended_stats",
        "percentiles",
        "top_hits",
        "composite",
        "significant_terms",
        "missing",
        "nested",
        "global",
        "multi_terms",
    }
)
