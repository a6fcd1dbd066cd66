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

Metadata keys (``metadata.<key>``) are columns too, kept per key once a filter
names one (``metadata_columns``); a condition on one yields the positions
holding a matching value, which may also seed a selective filter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, cast

import numpy as np

from memory_plugin.dates import to_micros
from memory_plugin.histories.stores.dictionary import COMPARE, Dictionary
from memory_plugin.histories.stores.filters import DATE_FIELDS, TOP_LEVEL_FIELDS, Condition, Filter
from memory_plugin.histories.stores.metadata_columns import DEFAULT_LIMIT, MetadataColumns, metadata_keys

#: The string fields (dictionary-encoded); the rest of TOP_LEVEL_FIELDS are dates.
STRING_FIELDS = tuple(field for field in TOP_LEVEL_FIELDS if field not in DATE_FIELDS)
#: One chunk's row: the values of TOP_LEVEL_FIELDS in order, dates as microseconds.
Row = tuple[Any, ...]

_FIELD_AT = {field: at for at, field in enumerate(TOP_LEVEL_FIELDS)}


def can_compile(where: Filter, metadata_limit: int = DEFAULT_LIMIT) -> bool:
    """Whether the columns can evaluate ``where``: it names at most ``metadata_limit`` metadata keys."""
    return len(metadata_keys(where)) <= metadata_limit


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

    def __init__(self, capacity: int, metadata_limit: int = DEFAULT_LIMIT) -> None:
        self.strings = {field: np.zeros(capacity, dtype=np.int32) for field in STRING_FIELDS}
        self.dates = {field: np.zeros(capacity, dtype=np.int64) for field in DATE_FIELDS}
        self.dictionaries = {field: Dictionary() for field in STRING_FIELDS}
        self.postings = _Postings()
        self.metadata = MetadataColumns(metadata_limit)

    def grow(self, capacity: int, used: int) -> None:
        for columns in (self.strings, self.dates):
            for field, old in columns.items():
                new = np.zeros(capacity, dtype=old.dtype)
                new[:used] = old[:used]
                columns[field] = new

    def saved(self, used: int) -> tuple[dict[str, np.ndarray], dict[str, list[str]]]:
        """``(arrays, dictionary values)`` of the rows below ``used``, for a snapshot (``restore``)."""
        arrays: dict[str, np.ndarray] = {f"s.{field}": column[:used] for field, column in self.strings.items()}
        arrays |= {f"d.{field}": column[:used] for field, column in self.dates.items()}
        values = {field: cast(list[str], dictionary.values[1:]) for field, dictionary in self.dictionaries.items()}
        return arrays, values  # code 0 (None) is implied

    def restore(self, arrays: Mapping[str, np.ndarray], values: Mapping[str, list[str]]) -> None:
        """Take the rows and dictionaries ``saved`` gave (the metadata columns are ``index_snapshots``' to restore)."""
        for field, column in self.strings.items():
            saved = arrays[f"s.{field}"]
            if len(saved) and (saved.min() < 0 or saved.max() > len(values[field])):
                raise ValueError(f"saved column {field} has codes beyond its dictionary")
            column[: len(saved)] = saved
            self.dictionaries[field] = Dictionary.restore(values[field])
        for field, micros in self.dates.items():
            micros[: len(arrays[f"d.{field}"])] = arrays[f"d.{field}"]

    def assign(
        self, positions: np.ndarray, rows: Sequence[Row], metadata: Sequence[Mapping[str, Any]] | None = None
    ) -> None:
        """Store ``rows`` (one per position, fields in TOP_LEVEL_FIELDS order) at ``positions``.

        ``metadata`` (one mapping per position) is given for new positions only,
        ascending; the metadata keys kept as columns take their values from it.
        """
        if len(rows) == 0:
            return
        if metadata is not None:
            self.metadata.add(positions, metadata)
        for field in STRING_FIELDS:
            at, encode = _FIELD_AT[field], self.dictionaries[field].encode
            self.strings[field][positions] = np.fromiter((encode(row[at]) for row in rows), np.int32, len(rows))
        for field in DATE_FIELDS:
            at = _FIELD_AT[field]
            self.dates[field][positions] = np.fromiter((row[at] for row in rows), np.int64, len(rows))

    def select(self, where: Filter, used: int, within: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
        """``(mask or None, positions)`` of the rows below ``used`` in ``within`` (a mask) satisfying ``where``.

        The mask over all rows is returned when it was built anyway.  Every
        metadata key ``where`` names must be kept (``metadata.missing``).
        """
        by_key: dict[str, list[Condition]] = {}
        for condition in where.conditions:
            if condition.is_metadata:
                by_key.setdefault(condition.field, []).append(condition)
        # the conditions on one key are answered together (a range is one answer), each holding it
        found = {
            id(c): positions
            for group in by_key.values()
            for positions in [self.metadata.positions(group, used)]
            for c in group
        }
        narrowest = self._narrowest(where, used, found)
        if narrowest is None:
            mask = within.copy()
            for condition in where.conditions:
                mask &= self._condition(condition, slice(0, used), found, used)
            return mask, np.flatnonzero(mask)
        seed, positions = narrowest
        keep = within[positions]
        for condition in where.conditions:
            if condition is not seed:
                keep &= self._condition(condition, positions, found, used)
        return None, positions[keep]

    def _narrowest(self, where: Filter, used: int, found: dict[int, np.ndarray]) -> tuple[Condition, np.ndarray] | None:
        """The string equality or metadata condition with the fewest rows, and those rows, if selective enough."""
        best: tuple[Condition, np.ndarray] | None = None
        for condition in where.conditions:
            if condition.is_metadata:
                if best is None or len(found[id(condition)]) < len(best[1]):
                    best = condition, found[id(condition)]
                continue
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

    def _condition(
        self, condition: Condition, rows: slice | np.ndarray, found: dict[int, np.ndarray], used: int
    ) -> np.ndarray:
        """Whether each of ``rows`` (a slice from 0 or ascending positions) satisfies ``condition``."""
        field, op = condition.field, condition.op
        if condition.is_metadata:
            holds = np.zeros(used, dtype=bool)
            holds[found[id(condition)]] = True
            return holds[rows]
        if field in DATE_FIELDS and op in COMPARE:
            micros = self.dates[field][rows]
            compare = COMPARE[op]
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
