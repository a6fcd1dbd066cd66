"""Evaluate a :class:`Filter` over in-memory columns: the positions of the chunks it keeps.

The SQLite store keeps every filterable top-level field of each chunk's
record beside the HNSW index (one row per index position), so a filter becomes
a faiss selector without a SQL round trip: at a million chunks, fetching the
ids a 30% filter passes from SQLite costs ~0.5 s, while a mask over the
columns costs a few milliseconds.  Strings are dictionary-encoded (code 0 is
"missing"): a condition is evaluated once per distinct value into a lookup
table, then gathered over the codes.  Dates are integer microseconds, compared
directly.  A selective equality on a string field (a user, a document) does not
scan the columns at all: the positions holding each value asked for are cached
(``_Postings``) and only the rows there are checked against the rest of the
filter, so a 1% filter at a million chunks reads ten thousand rows, not a
million.  It must agree exactly with
:func:`memory_plugin.histories.stores.filters.matches` and with ``sqlite_filters``.

Metadata (``metadata.<key>``) is not kept here: its keys are open-ended and
its values mix types, so filters that name metadata stay on SQL.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from memory_plugin.dates import to_micros
from memory_plugin.histories.stores.filters import DATE_FIELDS, TOP_LEVEL_FIELDS, Condition, Filter, fold

#: The string fields (dictionary-encoded); the rest of TOP_LEVEL_FIELDS are dates.
STRING_FIELDS = tuple(field for field in TOP_LEVEL_FIELDS if field not in DATE_FIELDS)
#: One chunk's row: the values of TOP_LEVEL_FIELDS in order, dates as microseconds.
Row = tuple[Any, ...]

_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "eq": operator.eq,
    "in": operator.eq,
    "gt": operator.gt,
    "gte": operator.ge,
    "lt": operator.lt,
    "lte": operator.le,
}
_FIELD_AT = {field: at for at, field in enumerate(TOP_LEVEL_FIELDS)}


def can_compile(where: Filter) -> bool:
    """Whether the columns can evaluate ``where`` (no metadata condition)."""
    return not any(condition.is_metadata for condition in where.conditions)


class _Dictionary:
    """The distinct values of one string field; code 0 stands for None (never matches).

    Append-only: a value whose records are all deleted keeps its code until
    the next start rebuilds the columns from SQLite.
    """

    def __init__(self) -> None:
        self.values: list[str | None] = [None]
        self.folded: list[str] = [""]  # casefolded values, extended lazily for ``contains``
        self.codes: dict[str, int] = {}

    def encode(self, value: str | None) -> int:
        if value is None:
            return 0
        code = self.codes.get(value)
        if code is None:
            code = self.codes[value] = len(self.values)
            self.values.append(value)
        return code

    def table(self, op: str, expected: Sequence[str]) -> np.ndarray:
        """Per code: whether a value with that code satisfies ``op`` against any of ``expected``."""
        size = len(self.values)
        table = np.zeros(size, dtype=bool)
        if op in ("eq", "in"):
            for value in expected:
                code = self.codes.get(value)
                if code is not None:
                    table[code] = True
        elif op == "contains":
            folded = self.folded
            if len(folded) < size:  # searches run in parallel: extend a copy, publish it whole
                folded = folded + [fold(value) for value in self.values[len(folded) : size]]  # type: ignore[arg-type]
                self.folded = folded
            needles = [fold(value) for value in expected]
            table[1:] = [any(needle in value for needle in needles) for value in folded[1:size]]
        else:
            compare = _COMPARE[op]
            table[1:] = [any(compare(value, bound) for bound in expected) for value in self.values[1:size]]
        return table


#: A string condition is answered from cached positions when it names at most this many values...
_POSTINGS_MAX_VALUES = 4
#: ...and they hold at most this share of the rows (else one pass over the columns is as fast).
_POSTINGS_MAX_SHARE = 0.125


class _Postings:
    """The positions holding one string code, ascending, cached per ``(field, code)``.

    Correct because rows are append-only: a row below ``n`` never changes once
    searches can see it (``assign`` writes new positions, or old ones before
    the index is published), so a cached list only needs the rows added since.
    """

    def __init__(self) -> None:
        self._cache: dict[tuple[str, int], tuple[int, np.ndarray]] = {}
        self._size = 0  # positions held, bounded by twice the rows: a few bytes per chunk

    def positions(self, field: str, code: int, column: np.ndarray, used: int) -> np.ndarray:
        scanned, positions = self._cache.get((field, code), (0, np.empty(0, dtype=np.int64)))
        if scanned < used:
            added = np.flatnonzero(column[scanned:used] == code) + scanned
            positions = np.concatenate((positions, added)) if len(positions) else added
            grown = len(added)
            if self._size + grown > 2 * used:
                self._cache, self._size, grown = {}, 0, len(positions)
            self._cache[(field, code)] = (used, positions)  # searches run in parallel: publish whole
            self._size += grown
        elif scanned > used:  # a reader holding an older ``used``
            positions = positions[: np.searchsorted(positions, used)]
        return positions


class FilterColumns:
    """The top-level fields of every position of one index, as numpy columns.

    Mutated only under the index's write lock; ``grow`` makes new arrays so a
    reader holding the old ones keeps a valid view.
    """

    def __init__(self, capacity: int) -> None:
        self.strings = {field: np.zeros(capacity, dtype=np.int32) for field in STRING_FIELDS}
        self.dates = {field: np.zeros(capacity, dtype=np.int64) for field in DATE_FIELDS}
        self.dictionaries = {field: _Dictionary() for field in STRING_FIELDS}
        self.postings = _Postings()

    def grow(self, capacity: int, used: int) -> None:
        for columns in (self.strings, self.dates):
            for field, old in columns.items():
                new = np.zeros(capacity, dtype=old.dtype)
                new[:used] = old[:used]
                columns[field] = new

    def assign(self, positions: np.ndarray, rows: Sequence[Row]) -> None:
        """Store ``rows`` (one per position, fields in TOP_LEVEL_FIELDS order) at ``positions``."""
        if len(rows) == 0:
            return
        for field in STRING_FIELDS:
            at, encode = _FIELD_AT[field], self.dictionaries[field].encode
            self.strings[field][positions] = np.fromiter((encode(row[at]) for row in rows), np.int32, len(rows))
        for field in DATE_FIELDS:
            at = _FIELD_AT[field]
            self.dates[field][positions] = np.fromiter((row[at] for row in rows), np.int64, len(rows))

    def select(self, where: Filter, used: int, within: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
        """``(mask or None, positions)`` of the rows below ``used`` in ``within`` (a mask) satisfying ``where``.

        The mask over all rows is returned when it was built anyway; ``where`` has no metadata.
        """
        narrowest = self._narrowest(where, used)
        if narrowest is None:
            mask = within.copy()
            for condition in where.conditions:
                mask &= self._condition(condition, slice(0, used))
            return mask, np.flatnonzero(mask)
        seed, positions = narrowest
        keep = within[positions]
        for condition in where.conditions:
            if condition is not seed:
                keep &= self._condition(condition, positions)
        return None, positions[keep]

    def _narrowest(self, where: Filter, used: int) -> tuple[Condition, np.ndarray] | None:
        """The string equality with the fewest rows, and those rows, if it is selective enough."""
        best: tuple[Condition, np.ndarray] | None = None
        for condition in where.conditions:
            if condition.field not in STRING_FIELDS or condition.op not in ("eq", "in"):
                continue
            table = self.dictionaries[condition.field].table(condition.op, condition.values)  # type: ignore[arg-type]
            codes = np.flatnonzero(table)
            if len(codes) > _POSTINGS_MAX_VALUES:
                continue
            column = self.strings[condition.field]
            lists = [self.postings.positions(condition.field, int(code), column, used) for code in codes]
            positions = lists[0] if len(lists) == 1 else np.sort(np.concatenate(lists or [np.empty(0, np.int64)]))
            if best is None or len(positions) < len(best[1]):
                best = condition, positions
        if best is None or len(best[1]) > used * _POSTINGS_MAX_SHARE:
            return None
        return best

    def _condition(self, condition: Condition, rows: slice | np.ndarray) -> np.ndarray:
        """Whether each of ``rows`` (a slice from 0 or ascending positions) satisfies ``condition``."""
        field, op = condition.field, condition.op
        if field in DATE_FIELDS and op in _COMPARE:
            micros = self.dates[field][rows]
            compare = _COMPARE[op]
            holds = np.zeros(len(micros), dtype=bool)
            for value in condition.values:
                if not isinstance(value, datetime):  # parse_filters makes every date value a datetime
                    raise ValueError(f"{field} needs a date, not {value!r}")
                holds |= compare(micros, to_micros(value))
            return holds
        if field in STRING_FIELDS:
            table = self.dictionaries[field].table(op, condition.values)  # type: ignore[arg-type]
            column = self.strings[field][rows]
            codes = np.flatnonzero(table)
            if len(codes) > 4:
                result: np.ndarray = table[column]
                return result
            matched = np.zeros(len(column), dtype=bool)
            for code in codes:  # a few values: comparisons beat a gather
                matched |= column == code
            return matched
        raise ValueError(f"the filter columns cannot evaluate {field!r} {op!r}")
