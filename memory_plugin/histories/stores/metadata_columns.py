"""Metadata keys as filter columns: ``filter[language]=en`` without SQL or JSON per query.

Metadata keys are open-ended and their values mix types, so a key is kept as a
column only once a filter names it: the store then reads that key's values for
the whole index from SQLite in one pass (:func:`decode_values`) while writes
go on (they record the key's values meanwhile, ``begin``/``finish``), and from
then on every write adds its values like the other columns.  A column holds, for
each kind of value, the positions that have one (ascending) and the values:

* strings: dictionary codes (``Dictionary``), so eq/in/contains/ranges are
  evaluated once per distinct value, then gathered over the codes;
* numbers: float64, which holds every float and every int up to 2**53 exactly;
  the rare int that float64 cannot hold exactly is kept aside as a Python int
  and compared in Python, so comparisons stay exact (as ``matches`` does them);
* booleans: the positions holding ``true`` and those holding ``false``.

A position without the key is in none of them, so it never matches, and a key
no record has costs a few empty arrays.  Positions are append-only and a
position's record never changes (a replaced record gets new chunks), so the
columns never rewrite a row; deleted chunks are dropped by the organisation mask
of every search, as for the top-level columns.  At most ``limit`` keys are kept
per index, least recently used dropped, so callers naming thousands of keys cost
a pass over SQLite each, not memory; a filter naming more keys than that goes
to SQL.  The kept keys are saved with the index snapshot (``index_snapshots``).
Semantics must agree exactly with :func:`memory_plugin.histories.stores.filters.matches`.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

import numpy as np

from memory_plugin.histories.stores.dictionary import COMPARE, Dictionary
from memory_plugin.histories.stores.filters import Condition, Filter, as_number

#: Default of the most metadata keys kept as columns per index (a setting of embedded regions).
DEFAULT_LIMIT = 64
#: Ints beyond this magnitude may not survive float64; each is checked and kept aside if it would not.
_EXACT_INT = 2**53
_MISSING = object()
#: The arrays of a key column a snapshot holds (``KeyColumn.saved``).
_SAVED = ("string_at", "codes", "number_at", "numbers", "true_at", "false_at")
#: A key column's sizes per kind of value: strings, numbers, true, false, big ints.
_Sizes = tuple[int, int, int, int, int]
_NOTHING: _Sizes = (0, 0, 0, 0, 0)
_NO_POSITIONS = np.empty(0, dtype=np.int64)
_NO_POSITIONS.flags.writeable = False
#: Positions the kept answers of one key column may hold beyond four times the column's own.
_FOUND_ROOM = 65_536


def metadata_keys(where: Filter) -> list[str]:
    """The distinct metadata keys ``where`` names, in order."""
    keys = [condition.field[len("metadata.") :] for condition in where.conditions if condition.is_metadata]
    return list(dict.fromkeys(keys))


class _Growing:
    """An append-only numpy array with amortised doubling."""

    __slots__ = ("data", "size")

    def __init__(self, dtype: type) -> None:
        self.data: np.ndarray = np.empty(0, dtype=dtype)
        self.size = 0

    def extend(self, values: Sequence[Any]) -> None:
        end = self.size + len(values)
        if end > len(self.data):
            data = np.empty(max(end, 2 * len(self.data), 16), dtype=self.data.dtype)
            data[: self.size] = self.data[: self.size]
            self.data = data
        self.data[self.size : end] = values
        self.size = end

    def view(self) -> np.ndarray:
        return self.data[: self.size]

    @property
    def nbytes(self) -> int:
        return int(self.data.nbytes)


class KeyColumn:
    """One metadata key's values, by kind, at the positions that have it."""

    __slots__ = (
        "string_at",
        "codes",
        "dictionary",
        "number_at",
        "numbers",
        "big",
        "true_at",
        "false_at",
        "_found",
        "_found_size",
    )

    def __init__(self) -> None:
        self.string_at, self.codes, self.dictionary = _Growing(np.int64), _Growing(np.int32), Dictionary()
        self.number_at, self.numbers = _Growing(np.int64), _Growing(np.float64)
        self.big: list[tuple[int, int]] = []  # (position, int) for ints float64 cannot hold exactly
        self.true_at, self.false_at = _Growing(np.int64), _Growing(np.int64)
        #: The positions each ``(op, values)`` matched, and the kinds' sizes then (``positions``).
        self._found: dict[tuple[tuple[str, tuple[str, ...]], ...], tuple[_Sizes, np.ndarray]] = {}
        self._found_size = 0

    def add(self, positions: Iterable[int], values: Iterable[Any]) -> None:
        """Append ``values`` (``_MISSING`` or a metadata value) at ``positions``, ascending and past any held."""
        string_at: list[int] = []
        codes: list[int] = []
        number_at: list[int] = []
        numbers: list[float] = []
        true_at: list[int] = []
        false_at: list[int] = []
        encode = self.dictionary.encode
        for position, value in zip(positions, values):
            if isinstance(value, str):
                string_at.append(position)
                codes.append(encode(value))
            elif isinstance(value, bool):
                (true_at if value else false_at).append(position)
            elif isinstance(value, float):
                number_at.append(position)
                numbers.append(value)
            elif isinstance(value, int):
                if -_EXACT_INT <= value <= _EXACT_INT or _float_holds(value):
                    number_at.append(position)
                    numbers.append(float(value))
                else:
                    self.big.append((position, value))
            # anything else (absent, null) is missing: it never matches
        self.string_at.extend(string_at)
        self.codes.extend(codes)
        self.number_at.extend(number_at)
        self.numbers.extend(numbers)
        self.true_at.extend(true_at)
        self.false_at.extend(false_at)

    @property
    def nbytes(self) -> int:
        arrays = (self.string_at, self.codes, self.number_at, self.numbers, self.true_at, self.false_at)
        return sum(array.nbytes for array in arrays) + 64 * len(self.big)

    def positions(self, op: str, expected: Sequence[str], used: int) -> np.ndarray:
        """Ascending positions below ``used`` whose value satisfies ``op`` against any of ``expected``."""
        return self.positions_all(((op, tuple(expected)),), used)

    def positions_all(self, tests: tuple[tuple[str, tuple[str, ...]], ...], used: int) -> np.ndarray:
        """Ascending positions below ``used`` whose value passes every ``(op, expected)`` of ``tests``:
        ``gte`` and ``lt`` on one key are one answer, not two broad ones to intersect per search.

        A condition asked before is answered from what it matched then plus
        the values added since (a position's value never changes), as
        Lucene's query cache keeps a filter's documents: the same
        ``filter[language]=en`` does not gather every code again per search.
        The cache holds at most :data:`_FOUND_ROOM` positions more than four
        times the column's (8 bytes each), then starts over.
        """
        key = tests
        sizes = self._sizes()
        seen, held = self._found.get(key, (_NOTHING, _NO_POSITIONS))
        if seen != sizes:
            added = self._matching(*tests[0], seen)
            for op, expected in tests[1:]:
                added = np.intersect1d(added, self._matching(op, expected, seen), assume_unique=True)
            held = np.concatenate((held, added)) if len(held) and len(added) else added if len(added) else held
            total = sum(sizes)
            self._found_size += len(added)
            if self._found_size > 4 * total + _FOUND_ROOM:
                self._found, self._found_size = {}, len(held)
            self._found[key] = (sizes, held)  # searches run in parallel: publish whole
        if len(held) and held[-1] >= used:  # a reader holding an older ``used``
            held = held[: np.searchsorted(held, used)]
        return held

    def saved(self) -> tuple[dict[str, np.ndarray], list[str], list[list[Any]]]:
        """``(arrays, dictionary values 1.., [position, big int as text])``, for a snapshot (``restored``)."""
        arrays = {name: getattr(self, name).view() for name in _SAVED}
        return arrays, cast(list[str], self.dictionary.values[1:]), [[at, str(value)] for at, value in self.big]

    @classmethod
    def restored(
        cls, arrays: Mapping[str, np.ndarray], values: list[str], big: Sequence[Sequence[Any]], used: int
    ) -> KeyColumn:
        """The column ``saved`` gave, of positions below ``used``; ``ValueError`` if it does not hold together."""
        column = cls()
        for name in _SAVED:
            array, growing = arrays[name], getattr(column, name)
            if array.ndim != 1 or array.dtype != growing.data.dtype:
                raise ValueError(f"saved metadata array {name} has another shape or type")
            growing.data, growing.size = np.array(array), len(array)
        if column.string_at.size != column.codes.size or column.number_at.size != column.numbers.size:
            raise ValueError("saved metadata positions and values disagree in length")
        codes = column.codes.view()
        if len(codes) and (codes.min() < 1 or codes.max() > len(values)):
            raise ValueError("saved metadata codes beyond their dictionary")
        column.big = [(int(at), int(text)) for at, text in big]
        for positions in (*(getattr(column, name).view() for name in _SAVED if name.endswith("_at")), column.big):
            ascending = np.asarray([at for at, _ in positions] if isinstance(positions, list) else positions)
            if len(ascending) and (ascending[0] < 0 or ascending[-1] >= used or np.any(np.diff(ascending) <= 0)):
                raise ValueError("saved metadata positions are not ascending within the index")
        column.dictionary = Dictionary.restore(values)
        return column

    def _sizes(self) -> _Sizes:
        return (self.string_at.size, self.number_at.size, self.true_at.size, self.false_at.size, len(self.big))

    def _matching(self, op: str, expected: Sequence[str], since: _Sizes) -> np.ndarray:
        """The positions added after ``since`` whose value satisfies the condition, ascending.

        The cases of ``filters._metadata_holds``, one kind of value at a time.
        Every value added after ``since`` is at a higher position than any
        before it (``add``), so these follow the positions matched before.
        """
        strings_from, numbers_from, true_from, false_from, big_from = since
        found: list[np.ndarray] = []
        numbers = [number for number in map(as_number, expected) if number is not None]
        if op in ("eq", "in"):
            strings: Sequence[str] = expected
            if "true" in expected:
                found.append(self.true_at.view()[true_from:])
            if "false" in expected:
                found.append(self.false_at.view()[false_from:])
        elif op == "contains":
            strings, numbers = expected, []
        else:  # a range: numbers against numeric bounds, strings against the others
            strings = [value for value in expected if as_number(value) is None]
        if strings and self.string_at.size > strings_from:
            table = self.dictionary.table(op, strings)
            codes = self.codes.view()[strings_from:]
            string_at = self.string_at.view()[strings_from:]
            picked = np.flatnonzero(table)
            if len(picked) == 1:
                found.append(string_at[codes == picked[0]])
            elif len(picked):
                found.append(string_at[table[codes]])
        if numbers and self.number_at.size > numbers_from:
            values = self.numbers.view()[numbers_from:]
            compare = COMPARE[op]
            holds = compare(values, numbers[0])
            for number in numbers[1:]:
                holds |= compare(values, number)
            found.append(self.number_at.view()[numbers_from:][holds])
        if numbers and len(self.big) > big_from:
            compare = COMPARE[op]
            big = [p for p, value in self.big[big_from:] if any(compare(value, number) for number in numbers)]
            found.append(np.asarray(big, dtype=np.int64))
        found = [part for part in found if len(part)]
        if not found:
            return _NO_POSITIONS
        return found[0] if len(found) == 1 else np.sort(np.concatenate(found))  # kinds are disjoint


def _float_holds(value: int) -> bool:
    try:
        return float(value) == value
    except OverflowError:
        return False


class MetadataColumns:
    """The metadata keys of one index kept as columns, least recently used first.

    Mutated only under the index's write lock (``begin``, ``finish``, ``add``);
    ``touch`` runs on the event loop, ``positions`` in search threads.
    """

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self.columns: OrderedDict[str, KeyColumn] = OrderedDict()
        #: Keys being built: the positions and values written since, added to the column when it is installed.
        self.pending: dict[str, tuple[list[int], list[Any]]] = {}
        #: A key was kept since the last snapshot: the next one (a close) saves it, writes or not.
        self.unsaved = False

    def missing(self, keys: Iterable[str]) -> list[str]:
        return [key for key in keys if key not in self.columns]

    def touch(self, keys: Iterable[str]) -> None:
        for key in keys:
            self.columns.move_to_end(key)

    def install(self, key: str, column: KeyColumn) -> None:
        """Keep ``column`` as ``key``'s, dropping the least recently used keys beyond the limit."""
        self.columns[key] = column
        self.columns.move_to_end(key)
        self.unsaved = True
        while len(self.columns) > self.limit:
            self.columns.popitem(last=False)

    def begin(self, key: str) -> None:
        """From now on, record the values writes give ``key`` (see ``finish``)."""
        self.pending[key] = ([], [])

    def finish(self, key: str, column: KeyColumn) -> None:
        """Keep ``column`` (built for the positions before ``begin``) with the values written since."""
        positions, values = self.pending.pop(key)
        column.add(positions, values)
        self.install(key, column)

    def abandon(self, key: str) -> None:
        self.pending.pop(key, None)

    def add(self, positions: np.ndarray, metadata: Sequence[Mapping[str, Any]]) -> None:
        """The values of every kept or pending key in the records written at ``positions`` (ascending, new)."""
        if not (self.columns or self.pending) or not len(positions):
            return
        at = positions.tolist()
        for key, column in self.columns.items():
            column.add(at, [values.get(key, _MISSING) for values in metadata])
        for key, (held_at, held) in self.pending.items():
            held_at += at
            held += [values.get(key, _MISSING) for values in metadata]

    def positions(self, conditions: Sequence[Condition], used: int) -> np.ndarray:
        """Where every one of ``conditions`` (all on one key) holds."""
        column = self.columns[conditions[0].field[len("metadata.") :]]
        tests = tuple((condition.op, tuple(condition.values)) for condition in conditions)
        return column.positions_all(tests, used)  # type: ignore[arg-type]  # metadata values are strings


def decode_values(texts: Sequence[str]) -> list[Any]:
    """Metadata values from their JSON text (SQLite's ``->``), decoded as ``json.loads`` reads the record.

    Decoding in Python, not with SQLite's ``json_extract``, keeps ints of any
    size and floats exactly as the records read back; each distinct text is
    decoded once.
    """
    decoded: dict[str, Any] = {}
    values: list[Any] = []
    for text in texts:
        value = decoded.get(text, _MISSING)
        if value is _MISSING:
            value = decoded[text] = json.loads(text)
        values.append(value)
    return values
