"""The filter language of ``GET /v2/ai/conversation_histories``.

Query parameters are parsed once into a small tree (a conjunction of
conditions).  Each store compiles the tree into its own form in its own
module; nothing else interprets it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

Operator = Literal["eq", "in", "gte", "gt", "lte", "lt", "contains"]
OPERATORS: tuple[Operator, ...] = ("eq", "in", "gte", "gt", "lte", "lt", "contains")

#: Filterable top-level fields (seed 003).  Any other name means ``metadata.<name>``.
TOP_LEVEL_FIELDS = (
    "user_id",
    "record_type",
    "region",
    "document_id",
    "record_id",
    "record_created_at",
    "ingested_at",
    "retention",
)
DATE_FIELDS = ("record_created_at", "ingested_at")

#: A value after parsing: dates become aware UTC datetimes, the rest stay strings.
FilterValue = str | datetime


@dataclass(frozen=True, slots=True)
class Condition:
    """``field op values``.  ``field`` is a top-level name or ``metadata.<name>``."""

    field: str
    op: Operator
    values: tuple[FilterValue, ...]

    @property
    def is_metadata(self) -> bool:
        return self.field.startswith("metadata.")


@dataclass(frozen=True, slots=True)
class Filter:
    """All conditions must hold.  The empty filter matches everything."""

    conditions: tuple[Condition, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.conditions)
