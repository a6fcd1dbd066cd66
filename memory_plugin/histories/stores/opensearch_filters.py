"""Compile a :class:`Filter` into OpenSearch query DSL for the OpenSearch store.

The result must agree exactly with :func:`memory_plugin.histories.stores.filters.matches`,
so the store indexes a few *derived* fields beside the seed's own ones:

* Dates are filtered on ``<field>_us`` (integer microseconds since the epoch):
  exact to the microsecond for any year, where ``date`` keeps milliseconds
  and ``date_nanos`` rejects instants before 1970.
* A metadata value is indexed by its JSON type -- ``meta_str.<k>`` (keyword),
  ``meta_num.<k>`` (double), ``meta_bool.<k>`` (boolean) -- because the same
  key may hold a string in one record and a number in the next (one mapping
  per field cannot), and because ``"5"`` and ``5`` must stay apart.
* ``contains`` runs a wildcard over ``fold.<field>`` / ``meta_fold.<k>``, copies
  folded with Python's ``str.casefold`` at write time, so case folding is
  exactly the reference's (a lowercase normalizer is not: ``ß`` vs ``ss``).

User values only ever appear in value positions; field names are checked
against the same pattern as :func:`parse_filters` before use.
"""

from __future__ import annotations

import re
from typing import Any

from memory_plugin.dates import to_micros
from memory_plugin.histories.stores.filters import (
    DATE_FIELDS,
    FIELD_NAME,
    TOP_LEVEL_FIELDS,
    Condition,
    Filter,
    as_number,
    fold,
)

#: Top-level string fields, each with a case-folded copy under ``fold.``.
STRING_FIELDS = tuple(name for name in TOP_LEVEL_FIELDS if name not in DATE_FIELDS)


def escape_wildcard(text: str) -> str:
    """``text`` as a literal inside a Lucene wildcard pattern."""
    return re.sub(r"([\\*?])", r"\\\1", text)


def contains_query(field: str, needle: str) -> dict[str, Any]:
    return {"wildcard": {field: {"value": f"*{escape_wildcard(fold(needle))}*"}}}


def compile_filter(where: Filter) -> list[dict[str, Any]]:
    """One DSL clause per condition; all must hold (use them as ``bool.filter``)."""
    return [_condition(condition) for condition in where.conditions]


def _any(clauses: list[dict[str, Any]]) -> dict[str, Any]:
    if len(clauses) == 1:
        return clauses[0]
    return {"bool": {"should": clauses, "minimum_should_match": 1}}


def _condition(condition: Condition) -> dict[str, Any]:
    if condition.is_metadata:
        key = condition.field[len("metadata.") :]
        if not FIELD_NAME.fullmatch(key):
            raise ValueError(f"invalid metadata key {key!r}")
        if condition.op in ("eq", "in") and len(condition.values) > 1:
            return _metadata_one_of(key, [str(value) for value in condition.values])
        return _any([clause for value in condition.values for clause in _metadata(key, condition.op, str(value))])
    field = condition.field
    if field not in TOP_LEVEL_FIELDS:  # never let a hand-built Condition name an arbitrary field
        raise ValueError(f"unknown filter field {field!r}")
    if field in DATE_FIELDS:
        micros = [to_micros(value) for value in condition.values]  # type: ignore[arg-type]
        if condition.op in ("eq", "in"):
            return {"terms": {f"{field}_us": micros}}
        if condition.op == "contains":
            raise ValueError("contains does not apply to dates")
        return _any([{"range": {f"{field}_us": {condition.op: value}}} for value in micros])
    values = [str(value) for value in condition.values]
    if condition.op in ("eq", "in"):
        return {"terms": {field: values}}
    if condition.op == "contains":
        return _any([contains_query(f"fold.{field}", value) for value in values])
    return _any([{"range": {field: {condition.op: value}}} for value in values])


def _metadata_one_of(key: str, values: list[str]) -> dict[str, Any]:
    """Many values as at most three ``terms`` queries (one per JSON type), never a clause per value:
    OpenSearch refuses a bool of more than ``indices.query.bool.max_clause_count`` (1024) clauses."""
    clauses: list[dict[str, Any]] = [{"terms": {f"meta_str.{key}": values}}]
    booleans = [value == "true" for value in values if value in ("true", "false")]
    if booleans:
        clauses.append({"terms": {f"meta_bool.{key}": booleans}})
    numbers = [number for number in map(as_number, values) if number is not None]
    if numbers:
        clauses.append({"terms": {f"meta_num.{key}": numbers}})
    return _any(clauses)


def _metadata(key: str, op: str, value: str) -> list[dict[str, Any]]:
    """Alternatives for one value, following the reference's type rules."""
    number = as_number(value)
    if op in ("eq", "in"):
        clauses: list[dict[str, Any]] = [{"term": {f"meta_str.{key}": value}}]
        if value in ("true", "false"):
            clauses.append({"term": {f"meta_bool.{key}": value == "true"}})
        if number is not None:
            clauses.append({"term": {f"meta_num.{key}": number}})
        return clauses
    if op == "contains":
        return [contains_query(f"meta_fold.{key}", value)]
    if number is not None:
        return [{"range": {f"meta_num.{key}": {op: number}}}]
    return [{"range": {f"meta_str.{key}": {op: value}}}]
