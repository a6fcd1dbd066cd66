"""Compile a :class:`Filter` into SQL for the SQLite store.

The WHERE fragment is over the ``records`` table aliased ``r``; it must agree
exactly with :func:`memory_plugin.histories.stores.filters.matches`.  Dates are
stored as integer microseconds since the epoch (UTC) so they compare exactly.
Metadata lives in a JSON column; ``json_type`` keeps strings, numbers and
booleans apart the way the reference evaluator does.  A JSON column (rather
than a key/value side table) keeps each record one row and one write; a
metadata condition is then a scan of the organisation's records of one type,
which the top-level conditions (indexed) usually narrow first.  ``contains`` calls a
Python function (``mp_contains``) so case folding is Unicode-correct, which
SQLite's ASCII-only ``lower``/``LIKE`` are not.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from typing import Any

from memory_plugin.dates import to_micros
from memory_plugin.histories.stores.filters import (
    DATE_FIELDS,
    FIELD_NAME,
    TOP_LEVEL_FIELDS,
    Condition,
    Filter,
    _metadata_holds,
    as_number,
    fold,
)

_RANGE_SQL = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
#: Below this magnitude SQLite holds a JSON number exactly (an int64 or a real) and compares ints with reals
#: exactly; beyond it a JSON int is read as a lossy real (10**30 would equal 1e30), so ``matches`` decides.
_SQL_EXACT = "9.2e18"


def register_functions(connection: sqlite3.Connection) -> None:
    """Add the SQL functions compiled filters use to ``connection``."""
    connection.create_function("mp_contains", 2, _contains, deterministic=True)
    connection.create_function("mp_metadata_holds", 3, _metadata_holds_json, deterministic=True)


def _contains(value: Any, needle: str) -> bool:
    return isinstance(value, str) and fold(needle) in fold(value)


def _metadata_holds_json(value: str, op: str, expected: str) -> bool:
    """``matches``' metadata test on a value's JSON text (``->``) against a JSON list of filter values."""
    decoded = json.loads(value)
    return any(_metadata_holds(op, decoded, text) for text in json.loads(expected))


def _numeric(path: str, test: str, bound: Any, op: str, texts: list[str]) -> tuple[str, list[Any]]:
    """A numeric metadata test ``value <test>`` (one ``?``, ``bound``), exact for JSON ints of any size.

    ``texts`` are the filter's values, for ``matches`` to judge the values beyond ``_SQL_EXACT``.
    """
    kind, extracted = "json_type(r.metadata, ?)", "json_extract(r.metadata, ?)"
    sql = (
        f"({kind} IN ('integer', 'real') AND CASE WHEN abs({extracted}) < {_SQL_EXACT} THEN {extracted} {test}"
        " ELSE mp_metadata_holds(r.metadata -> ?, ?, ?) END)"
    )
    return sql, [path, path, path, bound, path, op, json.dumps(texts)]


def compile_filter(where: Filter) -> tuple[str, list[Any]]:
    """``(sql, params)``: a boolean SQL expression over ``records r``."""
    parts: list[str] = []
    params: list[Any] = []
    for condition in where.conditions:
        sql, condition_params = _compile_condition(condition)
        parts.append(f"({sql})")
        params.extend(condition_params)
    return (" AND ".join(parts) or "1"), params


def _compile_condition(condition: Condition) -> tuple[str, list[Any]]:
    if condition.op in ("eq", "in") and len(condition.values) > 1:
        return _one_of(condition)
    alternatives: list[str] = []
    params: list[Any] = []
    for value in condition.values:
        if condition.is_metadata:
            sql, value_params = _metadata(condition.field[len("metadata.") :], condition.op, str(value))
        else:
            sql, value_params = _top_level(condition.field, condition.op, value)
        alternatives.append(sql)
        params.extend(value_params)
    return " OR ".join(alternatives) or "0", params


def _one_of(condition: Condition) -> tuple[str, list[Any]]:
    """``field IN (values)`` as one JSON array parameter read by ``json_each``.

    However many values there are, the expression keeps the same small depth
    and a handful of parameters (one ``OR`` per value would hit SQLite's
    expression-depth limit near a thousand values).
    """
    listed = "IN (SELECT value FROM json_each(?))"
    if not condition.is_metadata:
        if condition.field not in TOP_LEVEL_FIELDS:
            raise ValueError(f"unknown filter field {condition.field!r}")
        values = [to_micros(v) if isinstance(v, datetime) else v for v in condition.values]
        return f"r.{condition.field} {listed}", [json.dumps(values)]
    key = condition.field[len("metadata.") :]
    if not FIELD_NAME.fullmatch(key):
        raise ValueError(f"invalid metadata key {key!r}")
    path = f'$."{key}"'
    kind, extracted = "json_type(r.metadata, ?)", "json_extract(r.metadata, ?)"
    texts = [str(value) for value in condition.values]
    options = [f"({kind} = 'text' AND {extracted} {listed})"]
    params: list[Any] = [path, path, json.dumps(texts)]
    booleans = [text for text in texts if text in ("true", "false")]
    if booleans:
        options.append(f"{kind} {listed}")
        params += [path, json.dumps(booleans)]
    numbers = [number for number in map(as_number, texts) if number is not None]
    if numbers:
        sql, numeric_params = _numeric(path, listed, json.dumps(numbers), "in", texts)
        options.append(sql)
        params += numeric_params
    return " OR ".join(options), params


def _top_level(field: str, op: str, value: Any) -> tuple[str, list[Any]]:
    if field not in TOP_LEVEL_FIELDS:  # never let a hand-built Condition into the SQL text
        raise ValueError(f"unknown filter field {field!r}")
    column = f"r.{field}"
    if field in DATE_FIELDS:
        value = to_micros(value)
    if op in ("eq", "in"):
        return f"{column} = ?", [value]
    if op == "contains":
        return f"mp_contains({column}, ?)", [value]
    return f"{column} {_RANGE_SQL[op]} ?", [value]


def _metadata(key: str, op: str, value: str) -> tuple[str, list[Any]]:
    if not FIELD_NAME.fullmatch(key):
        raise ValueError(f"invalid metadata key {key!r}")
    path = f'$."{key}"'  # cannot break out of the quotes
    kind = "json_type(r.metadata, ?)"
    extracted = "json_extract(r.metadata, ?)"
    number = as_number(value)
    if op in ("eq", "in"):
        options: list[tuple[str, list[Any]]] = [(f"({kind} = 'text' AND {extracted} = ?)", [path, path, value])]
        if value in ("true", "false"):
            options.append((f"{kind} = ?", [path, value]))
        if number is not None:
            options.append(_numeric(path, "= ?", number, op, [value]))
        return " OR ".join(sql for sql, _ in options), [p for _, ps in options for p in ps]
    if op == "contains":
        return f"({kind} = 'text' AND mp_contains({extracted}, ?))", [path, path, value]
    if number is not None:
        return _numeric(path, f"{_RANGE_SQL[op]} ?", number, op, [value])
    return f"({kind} = 'text' AND {extracted} {_RANGE_SQL[op]} ?)", [path, path, value]
