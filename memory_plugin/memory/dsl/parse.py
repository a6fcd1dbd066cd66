"""Parsing and validating a whole search body into a :class:`SearchBody`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import re2

from memory_plugin.dates import OUT_OF_RANGE, DateError
from memory_plugin.errors import InvalidArgument, ParseFailure
from memory_plugin.memory.dsl.clauses import (
    Bool,
    Clause,
    ConstantScore,
    Exists,
    Ids,
    Match,
    MatchAll,
    MatchNone,
    MatchPhrase,
    Pattern,
    Range,
    Term,
    check_minimum_should_match,
)
from memory_plugin.memory.dsl.sort import SortSpec, parse_sort
from memory_plugin.memory.dsl.source import SourceFilter, parse_source
from memory_plugin.memory.dsl.values import (
    DATE_SHAPED,
    QueryParsingError,
    analyze,
    as_float,
    check_scalar,
    checked_date,
    is_number,
    parse_boost,
    single_field,
    token_name,
)
from memory_plugin.opensearch_client import MAX_RESULT_WINDOW

# --------------------------------------------------------------------------- query parsing

#: Real OpenSearch query types this evaluator does not implement.
UNSUPPORTED_QUERIES = frozenset(
    {
        "fuzzy",
        "regexp",
        "query_string",
        "simple_query_string",
        "multi_match",
        "match_phrase_prefix",
        "match_bool_prefix",
        "combined_fields",
        "nested",
        "has_child",
        "has_parent",
        "parent_id",
        "geo_bounding_box",
        "geo_distance",
        "geo_polygon",
        "geo_shape",
        "script",
        "script_score",
        "function_score",
        "more_like_this",
        "dis_max",
        "boosting",
        "span_term",
        "span_first",
        "span_near",
        "span_or",
        "span_not",
        "span_containing",
        "span_within",
        "span_multi",
        "field_masking_span",
        "intervals",
        "knn",
        "neural",
        "neural_sparse",
        "hybrid",
        "terms_set",
        "distance_feature",
        "percolate",
        "wrapper",
        "rank_feature",
        "type",
        "template",
        "shape",
        "xy_shape",
        "pinned",
    }
)

FIELD_OPTIONS = {
    "match": {
        "query",
        "operator",
        "minimum_should_match",
        "zero_terms_query",
        "boost",
        "analyzer",
        "lenient",
        "fuzziness",
        "prefix_length",
        "max_expansions",
        "auto_generate_synonyms_phrase_query",
        "_name",
    },
    "match_phrase": {"query", "slop", "boost", "analyzer", "zero_terms_query", "_name"},
    "term": {"value", "boost", "case_insensitive", "_name"},
    "prefix": {"value", "boost", "case_insensitive", "rewrite", "_name"},
    "wildcard": {"value", "wildcard", "boost", "case_insensitive", "rewrite", "_name"},
    "range": {
        "gt",
        "gte",
        "lt",
        "lte",
        "from",
        "to",
        "include_lower",
        "include_upper",
        "format",
        "time_zone",
        "relation",
        "boost",
        "_name",
    },
}


def parse_query(query: Any) -> Clause:
    if not isinstance(query, Mapping):
        raise QueryParsingError(f"[_na] query malformed, must start with start_object, found [{token_name(query)}]")
    if len(query) != 1:
        if not query:
            raise QueryParsingError("query malformed, empty clause found")
        names = list(query)
        raise QueryParsingError(f"[{names[0]}] malformed query, expected [END_OBJECT] but found [FIELD_NAME]")
    ((name, body),) = query.items()
    parser = QUERY_PARSERS.get(name)
    if parser is None:
        if name in UNSUPPORTED_QUERIES:
            raise QueryParsingError(f"unsupported query [{name}]")
        raise QueryParsingError(f"unknown query [{name}]")
    return parser(body)


def check_options(qname: str, opts: Mapping[str, Any]) -> None:
    for k in opts:
        if k not in FIELD_OPTIONS[qname]:
            raise QueryParsingError(f"[{qname}] query does not support [{k}]")


def parse_match_all(body: Any) -> Clause:
    if not isinstance(body, Mapping):
        raise QueryParsingError("[match_all] query malformed, no start_object after query name")
    for k in body:
        if k not in ("boost", "_name"):
            raise QueryParsingError(f"[match_all] query does not support [{k}]")
    return MatchAll(boost=parse_boost("match_all", body.get("boost", 1.0)))


def parse_match_none(body: Any) -> Clause:
    if not isinstance(body, Mapping):
        raise QueryParsingError("[match_none] query malformed, no start_object after query name")
    return MatchNone()


def parse_match(body: Any) -> Clause:
    fname, value, extra = single_field("match", body)
    opts: Mapping[str, Any] = value if isinstance(value, Mapping) else {"query": value}
    check_options("match", opts)
    if "query" not in opts:
        raise QueryParsingError("[match] query malformed, no [query] specified")
    text = check_scalar("match", opts["query"])
    operator = str(opts.get("operator", "or")).lower()
    if operator not in ("or", "and"):
        raise QueryParsingError(f"[match] query: unknown operator [{opts.get('operator')}]")
    zero_terms_query = str(opts.get("zero_terms_query", "none")).lower()
    if zero_terms_query not in ("none", "all"):
        raise QueryParsingError(f"[match] query: unsupported zero_terms_query value [{opts.get('zero_terms_query')}]")
    raw_text = ("true" if text else "false") if isinstance(text, bool) else str(text)
    return Match(
        field=fname,
        tokens=analyze(raw_text),
        operator=operator,
        minimum_should_match=check_minimum_should_match("match", opts.get("minimum_should_match")),
        zero_terms_all=zero_terms_query == "all",
        raw=text,
        boost=parse_boost("match", opts.get("boost", extra.get("boost", 1.0))),
    )


def parse_match_phrase(body: Any) -> Clause:
    fname, value, extra = single_field("match_phrase", body)
    opts: Mapping[str, Any] = value if isinstance(value, Mapping) else {"query": value}
    check_options("match_phrase", opts)
    if "query" not in opts:
        raise QueryParsingError("[match_phrase] query malformed, no [query] specified")
    text = check_scalar("match_phrase", opts["query"])
    return MatchPhrase(
        field=fname,
        tokens=analyze(str(text)),
        boost=parse_boost("match_phrase", opts.get("boost", extra.get("boost", 1.0))),
    )


def parse_term(body: Any) -> Clause:
    fname, value, extra = single_field("term", body)
    opts: Mapping[str, Any] = value if isinstance(value, Mapping) else {"value": value}
    check_options("term", opts)
    if "value" not in opts:
        raise QueryParsingError("[term] query malformed, no [value] specified")
    if opts["value"] is None:
        raise QueryParsingError("value cannot be null")
    wanted = check_scalar("term", opts["value"])
    return Term(
        field=fname,
        values=[wanted],
        case_insensitive=bool(opts.get("case_insensitive", False)),
        boost=parse_boost("term", opts.get("boost", extra.get("boost", 1.0))),
    )


def parse_terms(body: Any) -> Clause:
    if not isinstance(body, Mapping):
        raise QueryParsingError("[terms] query malformed, no start_object after query name")
    fields = [k for k in body if k not in ("boost", "_name")]
    if not fields:
        raise QueryParsingError("[terms] query malformed, no field specified")
    if len(fields) > 1:
        raise QueryParsingError(
            f"[terms] query does not support multiple fields, found [{fields[0]}] and [{fields[1]}]"
        )
    fname = fields[0]
    values = body[fname]
    if not isinstance(values, list | tuple):
        raise QueryParsingError(f"[terms] query does not support [{fname}]")
    for v in values:
        if v is None:
            raise QueryParsingError("No value specified for terms query")
        check_scalar("terms", v)
    return Term(field=fname, values=list(values), boost=parse_boost("terms", body.get("boost", 1.0)))


def parse_range(body: Any) -> Clause:
    fname, opts, extra = single_field("range", body)
    if not isinstance(opts, Mapping):
        raise QueryParsingError(f"[range] query does not support [{fname}]")
    check_options("range", opts)
    bounds: list[tuple[str, Any]] = []
    for op in ("gt", "gte", "lt", "lte"):
        if op in opts and opts[op] is not None:
            bounds.append((op, check_range_bound(opts[op])))
    include_lower = bool(opts.get("include_lower", True))
    include_upper = bool(opts.get("include_upper", True))
    if opts.get("from") is not None:
        bounds.append(("gte" if include_lower else "gt", check_range_bound(opts["from"])))
    if opts.get("to") is not None:
        bounds.append(("lte" if include_upper else "lt", check_range_bound(opts["to"])))
    return Range(field=fname, bounds=bounds, boost=parse_boost("range", opts.get("boost", extra.get("boost", 1.0))))


def check_range_bound(value: Any) -> Any:
    if isinstance(value, Mapping | list | tuple):
        raise QueryParsingError(f"[range] query does not support value of type [{token_name(value)}]")
    if isinstance(value, str) and DATE_SHAPED.match(value):
        try:
            checked_date(value)
        except DateError as error:
            detail = f": {error}" if OUT_OF_RANGE in str(error) else ""
            raise QueryParsingError(f"failed to parse date field [{value}]{detail}") from None
    if is_number(value) and as_float(value) is None:
        raise QueryParsingError(f"[range] query: bound [{value}] must be a finite number within a double's range")
    return value


def parse_exists(body: Any) -> Clause:
    if not isinstance(body, Mapping):
        raise QueryParsingError("[exists] query malformed, no start_object after query name")
    for k in body:
        if k not in ("field", "boost", "_name"):
            raise QueryParsingError(f"[exists] query does not support [{k}]")
    fname = body.get("field")
    if not isinstance(fname, str) or not fname:
        raise QueryParsingError("[exists] must be provided with a [field]")
    return Exists(field=fname, boost=parse_boost("exists", body.get("boost", 1.0)))


def pattern_clause(qname: str, body: Any, translate: Callable[[str], str]) -> Clause:
    """``prefix``/``wildcard`` compiled for RE2: matching takes time linear in the text, whatever the pattern."""
    fname, value, extra = single_field(qname, body)
    opts: Mapping[str, Any] = value if isinstance(value, Mapping) else {"value": value}
    check_options(qname, opts)
    raw = opts.get("value", opts.get("wildcard") if qname == "wildcard" else None)
    if raw is None:
        raise QueryParsingError(f"[{qname}] query malformed, no [value] specified")
    raw = str(check_scalar(qname, raw))
    flags = "(?is)" if opts.get("case_insensitive") else "(?s)"
    try:
        regex = re2.compile(flags + translate(raw))
    except re2.error:
        raise QueryParsingError(f"[{qname}] query: the pattern is too large to evaluate") from None
    return Pattern(field=fname, regex=regex, boost=parse_boost(qname, opts.get("boost", extra.get("boost", 1.0))))


def wildcard_regex(pattern: str) -> str:
    """A Lucene wildcard (``*``, ``?``, ``\\`` escapes) as an RE2 pattern; runs of ``*`` collapse to one."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out.append(re2.escape(pattern[i + 1]))
            i += 2
            continue
        if ch == "*":
            if not out or out[-1] != ".*":
                out.append(".*")
        else:
            out.append("." if ch == "?" else re2.escape(ch))
        i += 1
    return "".join(out)


def parse_prefix(body: Any) -> Clause:
    return pattern_clause("prefix", body, lambda p: re2.escape(p) + ".*")


def parse_wildcard(body: Any) -> Clause:
    return pattern_clause("wildcard", body, wildcard_regex)


def parse_ids(body: Any) -> Clause:
    if not isinstance(body, Mapping):
        raise QueryParsingError("[ids] query malformed, no start_object after query name")
    for k in body:
        if k not in ("values", "boost", "_name", "type"):
            raise QueryParsingError(f"[ids] query does not support [{k}]")
    values = body.get("values", [])
    if not isinstance(values, list | tuple):
        raise QueryParsingError("[ids] query malformed, [values] must be an array")
    for v in values:
        if isinstance(v, Mapping | list | tuple) or v is None:
            raise QueryParsingError("[ids] query malformed, values must be strings")
    return Ids(values=frozenset(str(v) for v in values), boost=parse_boost("ids", body.get("boost", 1.0)))


def parse_constant_score(body: Any) -> Clause:
    if not isinstance(body, Mapping):
        raise QueryParsingError("[constant_score] query malformed, no start_object after query name")
    for k in body:
        if k not in ("filter", "boost", "_name"):
            raise QueryParsingError(f"[constant_score] query does not support [{k}]")
    if "filter" not in body:
        raise QueryParsingError("[constant_score] requires a 'filter' element")
    return ConstantScore(
        filter=parse_query(body["filter"]), boost=parse_boost("constant_score", body.get("boost", 1.0))
    )


def parse_bool(body: Any) -> Clause:
    if not isinstance(body, Mapping):
        raise QueryParsingError("[bool] query malformed, no start_object after query name")
    parts: dict[str, list[Clause]] = {"must": [], "filter": [], "should": [], "must_not": []}
    for k, v in body.items():
        if k in parts:
            items = v if isinstance(v, list | tuple) else [v]
            parts[k] = [parse_query(item) for item in items]
        elif k not in ("minimum_should_match", "boost", "_name", "adjust_pure_negative"):
            raise QueryParsingError(f"[bool] query does not support [{k}]")
    return Bool(
        must=parts["must"],
        filter=parts["filter"],
        should=parts["should"],
        must_not=parts["must_not"],
        minimum_should_match=check_minimum_should_match("bool", body.get("minimum_should_match")),
        boost=parse_boost("bool", body.get("boost", 1.0)),
    )


QUERY_PARSERS: dict[str, Callable[[Any], Clause]] = {
    "match_all": parse_match_all,
    "match_none": parse_match_none,
    "match": parse_match,
    "match_phrase": parse_match_phrase,
    "term": parse_term,
    "terms": parse_terms,
    "range": parse_range,
    "exists": parse_exists,
    "prefix": parse_prefix,
    "wildcard": parse_wildcard,
    "ids": parse_ids,
    "bool": parse_bool,
    "constant_score": parse_constant_score,
}


# --------------------------------------------------------------------------- public API


@dataclass(frozen=True)
class SearchBody:
    query: Clause
    sort: tuple[SortSpec, ...] = ()
    from_: int = 0
    size: int = 10
    source: SourceFilter = SourceFilter()

    @property
    def scores_tracked(self) -> bool:
        """OpenSearch leaves ``_score`` null when sorting by fields only."""
        return not self.sort or any(s.field == "_score" for s in self.sort)


TOP_LEVEL_KEYS = ("query", "sort", "from", "size", "_source", "track_total_hits")


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


def parse_search(body: Mapping[str, Any] | None, *, max_size: int = MAX_RESULT_WINDOW) -> SearchBody:
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
    if body.get("query") is not None:
        query = parse_query(body["query"])
    sort = parse_sort(body["sort"]) if body.get("sort") is not None else ()

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

    track_total_hits = body.get("track_total_hits")
    if track_total_hits is not None and not isinstance(track_total_hits, bool | int):
        raise QueryParsingError(f"[track_total_hits] must be a boolean or an integer, found [{track_total_hits}]")

    source = parse_source(body["_source"]) if body.get("_source") is not None else SourceFilter()
    return SearchBody(query=query, sort=sort, from_=from_, size=size, source=source)
