"""Parsing and validating a whole search body into a :class:`SearchBody`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import re2

from memory_plugin.dsl.aggregations import Aggregation, parse_aggregations
from memory_plugin.dsl.clauses import Clause, MatchAll
from memory_plugin.dsl.highlight import Highlight, parse_highlight
from memory_plugin.dsl.mapping import DATE, TEXT, UNMAPPED, Fields, field_kind, text_field_data
from memory_plugin.dsl.parse_context import mapped
from memory_plugin.dsl.queries import parse_query
from memory_plugin.dsl.sort import SortSpec, parse_sort
from memory_plugin.dsl.source import SourceFilter, parse_source
from memory_plugin.dsl.values import EPOCH_MILLIS, QueryParsingError, as_float, parse_date, token_name
from memory_plugin.errors import (
    FetchPhaseFailure,
    InvalidArgument,
    ParseFailure,
    QueryShardFailure,
    ShardFailure,
    ShardParseFailure,
    java_string,
)
from memory_plugin.opensearch_client import MAX_RESULT_WINDOW

#: ``SearchContext.DEFAULT_TRACK_TOTAL_HITS_UP_TO``.
TRACK_TOTAL_HITS = 10_000


@dataclass(frozen=True)
class SearchBody:
    query: Clause
    sort: tuple[SortSpec, ...] = ()
    from_: int = 0
    size: int = 10
    source: SourceFilter = SourceFilter()
    #: Sort values the hits must come after (``search_after``), one per sort key.
    search_after: tuple[Any, ...] | None = None
    highlight: Highlight | None = None
    aggregations: tuple[Aggregation, ...] = ()
    #: Count the hits exactly (True), not at all (False, -1), or up to this many (OpenSearch's default 10,000).
    track_total_hits: bool | int = TRACK_TOTAL_HITS
    #: Hits scoring less are left out, of the total and the aggregations too (Lucene's ``MinimumScoreCollector``).
    min_score: float | None = None

    @property
    def scores_tracked(self) -> bool:
        """OpenSearch leaves ``_score`` null when sorting by fields only."""
        return not self.sort or any(s.field == "_score" for s in self.sort)


TOP_LEVEL_KEYS = (
    "query",
    "sort",
    "from",
    "size",
    "_source",
    "track_total_hits",
    "search_after",
    "highlight",
    "aggs",
    "aggregations",
    "version",
    "seq_no_primary_term",
    "timeout",
    "min_score",
)


def parse_timeout(value: Any) -> None:
    """``timeout`` is accepted; evaluation here always runs under its own budget (and says ``timed_out``)."""
    if not isinstance(value, str | int) or isinstance(value, bool) or not TIME_VALUE.fullmatch(str(value).strip()):
        raise InvalidArgument(
            f"failed to parse setting [timeout] with value [{value}] as a time value: unit is missing or unrecognized"
        )


TIME_VALUE = re2.compile(r"-1|0|\d{1,18}(?:nanos|micros|ms|s|m|h|d)")


def parse_search_after(value: Any, sort: tuple[SortSpec, ...]) -> tuple[Any, ...]:
    items = value if isinstance(value, list | tuple) else [value]
    if not any(spec.field != "_score" for spec in sort):
        raise ShardFailure("Sort must contain at least one field.")
    if len(items) != len(sort):
        raise InvalidArgument(f"search_after has {len(items)} value(s) but sort has {len(sort)}.")
    for item in items:
        if isinstance(item, Mapping | list | tuple):
            raise QueryParsingError(f"Unknown key for a {token_name(item)} in [search_after].")
    return tuple(items)


def date_key(value: Any) -> Any:
    """A date field's ``search_after`` key as the shard reads it: epoch millis (a number, or its digits, which
    then compare as a date), or what its format reads; date math on ``now`` has no clock there."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    text = "" if value is None else str(value).strip()
    if EPOCH_MILLIS.fullmatch(text):  # ASCII digits that fit a Java long, as Long.parseLong reads them
        return int(text)
    if text.startswith("now"):
        raise ShardParseFailure(
            "could not read the current timestamp",
            {"type": "illegal_state_exception", "reason": "now() is not allowed in [search_after] key"},
        )
    if isinstance(value, bool) or parse_date(text) is None:
        raise ShardParseFailure.date(value)
    return value


def int_parameter(name: str, value: Any) -> int:
    if isinstance(value, bool) or value is None:
        raise QueryParsingError(f"[{name}] must be an integer, found [{token_name(value)}]")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise QueryParsingError(f"[{name}] must be an integer, found [{value}]")


def parse_min_score(value: Any) -> float:
    """``min_score``: a number, or a string that reads as one (Jackson's ``floatValue`` coerces text)."""
    number = as_float(value) if not isinstance(value, bool) else None
    if number is None or not math.isfinite(number):
        raise QueryParsingError(f"[min_score] must be a number, found [{java_string(value)}]", parameter="min_score")
    return number


def parse_track_total_hits(value: Any) -> bool | int:
    """``track_total_hits``: a boolean, or how many to count (-1: none, SearchContext.TRACK_TOTAL_HITS_DISABLED)."""
    if value is None:
        return TRACK_TOTAL_HITS
    if not isinstance(value, bool | int):
        raise QueryParsingError(f"[track_total_hits] must be a boolean or an integer, found [{value}]")
    if not isinstance(value, bool) and value < -1:  # the fetch phase's collector refuses it, as ml-commons runs it
        raise FetchPhaseFailure(f"value must be >= 0, got {value}", parameter="track_total_hits")
    return value


def parse_search(
    body: Mapping[str, Any] | None, *, max_size: int = MAX_RESULT_WINDOW, fields: Fields | None = None
) -> SearchBody:
    """Validate a whole search body and compile it.

    Raises :class:`QueryParsingError` (``parsing_exception``) for malformed or
    unsupported DSL, :class:`~memory_plugin.errors.InvalidArgument`
    (``illegal_argument_exception``) for bad paging, and
    :class:`~memory_plugin.errors.ParseFailure` when the body is not an object.
    """
    if body is None:
        body = {}
    if not isinstance(body, Mapping):
        raise ParseFailure(f"request body must be a JSON object, found [{token_name(body)}]")
    for key, value in body.items():
        if key not in TOP_LEVEL_KEYS:
            raise QueryParsingError(f"Unknown key for a {token_name(value)} in [{key}].", parameter=key)

    query: Clause = MatchAll()
    with mapped(fields):
        if body.get("query") is not None:
            query = parse_query(body["query"])
    sort = parse_sort(body["sort"]) if body.get("sort") is not None else ()
    for spec in sort:
        kind = field_kind(fields, spec.field)
        if kind == TEXT:
            raise ShardFailure(text_field_data(spec.field))
        if kind == UNMAPPED and spec.unmapped_type is None and not spec.field.startswith("_"):
            raise QueryShardFailure(f"No mapping found for [{spec.field}] in order to sort on")
    search_after = parse_search_after(body["search_after"], sort) if body.get("search_after") is not None else None
    if search_after is not None:
        search_after = tuple(
            date_key(after) if field_kind(fields, spec.field) == DATE else after
            for spec, after in zip(sort, search_after)
        )
    if body.get("timeout") is not None:
        parse_timeout(body["timeout"])
    for flag in ("version", "seq_no_primary_term"):
        if body.get(flag) is not None and not isinstance(body[flag], bool):
            raise QueryParsingError(f"[{flag}] must be a boolean, found [{body[flag]}]")
    highlight = parse_highlight(body["highlight"]) if body.get("highlight") is not None else None
    aggs_body = body.get("aggs", body.get("aggregations"))
    aggregations = parse_aggregations(aggs_body, fields) if aggs_body is not None else ()

    from_ = int_parameter("from", body["from"]) if body.get("from") is not None else 0
    size = int_parameter("size", body["size"]) if body.get("size") is not None else 10
    if size < 0:
        raise InvalidArgument(f"[size] parameter cannot be negative, found [{size}]", parameter="size")
    if from_ < 0:
        raise InvalidArgument(f"[from] parameter cannot be negative, found [{from_}]", parameter="from")
    if size > max_size:
        raise InvalidArgument(
            f"Result window is too large, size must be less than or equal to: [{max_size}] but was [{size}].",
            parameter="size",
        )
    if from_ + size > MAX_RESULT_WINDOW:
        raise InvalidArgument(
            "Result window is too large, from + size must be less than or equal to: "
            f"[{MAX_RESULT_WINDOW}] but was [{from_ + size}]. See the scroll api for a more efficient way "
            "to request large data sets. This limit can be set by changing the [index.max_result_window] "
            "index level setting.",
            parameter="from",
        )

    track_total_hits = parse_track_total_hits(body.get("track_total_hits"))
    min_score = parse_min_score(body["min_score"]) if body.get("min_score") is not None else None

    source = parse_source(body["_source"]) if body.get("_source") is not None else SourceFilter()
    return SearchBody(
        query=query,
        sort=sort,
        from_=from_,
        size=size,
        source=source,
        search_after=search_after,
        highlight=highlight,
        aggregations=aggregations,
        track_total_hits=track_total_hits,
        min_score=min_score,
    )
