"""Parsing one query clause: the dispatch by query name, and the compound queries that nest clauses."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from memory_plugin.dsl.clauses import (
    Bool,
    Clause,
    ConstantScore,
    Disjunction,
    MatchAll,
    MatchNone,
    check_minimum_should_match,
)
from memory_plugin.dsl.full_text import parse_lucene_syntax, parse_match, parse_match_phrase, parse_multi_match
from memory_plugin.dsl.parse_context import check_clause_count
from memory_plugin.dsl.term_level import (
    parse_exists,
    parse_fuzzy,
    parse_ids,
    parse_prefix,
    parse_range,
    parse_regexp,
    parse_term,
    parse_terms,
    parse_wildcard,
)
from memory_plugin.dsl.values import QueryParsingError, as_float, parse_boost, query_object, token_name

#: Real OpenSearch query types this evaluator does not implement.
UNSUPPORTED_QUERIES = frozenset(
    {
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


def parse_match_all(body: Any) -> Clause:
    body = query_object("match_all", body, ("boost", "_name"))
    return MatchAll(boost=parse_boost("match_all", body.get("boost", 1.0)))


def parse_match_none(body: Any) -> Clause:
    body = query_object("match_none", body)
    return MatchNone()


def parse_constant_score(body: Any) -> Clause:
    body = query_object("constant_score", body, ("filter", "boost", "_name"))
    if "filter" not in body:
        raise QueryParsingError("[constant_score] requires a 'filter' element")
    return ConstantScore(
        filter=parse_query(body["filter"]), boost=parse_boost("constant_score", body.get("boost", 1.0))
    )


def parse_bool(body: Any) -> Clause:
    body = query_object("bool", body)
    parts: dict[str, list[Clause]] = {"must": [], "filter": [], "should": [], "must_not": []}
    for k, v in body.items():
        if k in parts:
            items = v if isinstance(v, list | tuple) else [v]
            check_clause_count(sum(len(p) for p in parts.values()) + len(items))
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


def parse_dis_max(body: Any) -> Clause:
    body = query_object("dis_max", body, ("queries", "tie_breaker", "boost", "_name"))
    queries = body.get("queries")
    if not isinstance(queries, list | tuple) or not queries:
        raise QueryParsingError("[dis_max] requires 'queries' field with at least one clause")
    tie = as_float(body.get("tie_breaker", 0.0))
    if tie is None:
        raise QueryParsingError("[dis_max] query: [tie_breaker] must be a number")
    return Disjunction(
        clauses=[parse_query(q) for q in queries], tie_breaker=tie, boost=parse_boost("dis_max", body.get("boost", 1.0))
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
    "multi_match": parse_multi_match,
    "fuzzy": parse_fuzzy,
    "dis_max": parse_dis_max,
    "regexp": parse_regexp,
    "query_string": parse_lucene_syntax("query_string"),
    "simple_query_string": parse_lucene_syntax("simple_query_string"),
    "bool": parse_bool,
    "constant_score": parse_constant_score,
}
