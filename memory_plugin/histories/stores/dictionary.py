"""Dictionary encoding of a string column, shared by the top-level and the metadata filter columns.

A condition on a dictionary-encoded column is evaluated once per distinct
value into a lookup table, then gathered over the codes: the string work is
per distinct value, not per row.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np

from memory_plugin.histories.stores.filters import fold

COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "eq": operator.eq,
    "in": operator.eq,
    "gt": operator.gt,
    "gte": operator.ge,
    "lt": operator.lt,
    "lte": operator.le,
}


class Dictionary:
    """The distinct values of one string column; code 0 stands for None (never matches).

    Append-only: a value whose records are all deleted keeps its code until
    the next start rebuilds the columns from SQLite.
    """

    def __init__(self) -> None:
        self.values: list[str | None] = [None]
        self.folded: list[str] = [""]  # casefolded values, extended lazily for ``contains``
        self._codes: dict[str, int] | None = {}

    @classmethod
    def restore(cls, values: Sequence[str]) -> Dictionary:
        """The dictionary whose codes 1.. are ``values`` (``values[1:]`` of a saved one).

        The value → code map is built on first use: at a million record ids it
        is most of a restart's time, and only writes and filters on the field need it.
        """
        dictionary = cls()
        dictionary.values += values
        dictionary._codes = None
        return dictionary

    @property
    def codes(self) -> dict[str, int]:
        codes = self._codes
        if codes is None:  # two searches may both build it: the same map, published whole
            codes = self._codes = dict(zip(cast(list[str], self.values[1:]), range(1, len(self.values))))
        return codes

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
        if not expected:
            return table
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
            compare = COMPARE[op]
            table[1:] = [any(compare(value, bound) for bound in expected) for value in self.values[1:size]]
        return table
