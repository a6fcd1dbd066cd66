"""Parsing and validating a whole search body into a :class:`SearchBody`."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import re2

from memory_plugin.dates import OUT_OF_RANGE, DateError
from memory_plugin.dsl.aggregations import Aggregation, parse_aggregations
from memory_plugin.dsl.analysis import analyze
from memory_plugin.dsl.clauses import (
    BlendedTerm,
    Bool,
    Clause,
    ConstantScore,
    Disjunction,
    Exists,
    Fuzzy,
    Ids,
    MatchAll,
    MatchNone,
    Pattern,
    Phrase,
    Range,
    Term,
    TermScore,
    check_minimum_should_match,
    minimum_should_match_count,
)
from memory_plugin.dsl.highlight import Highlight, parse_highlight
from memory_plugin.dsl.mapping import (
    DATE,
    DYNAMIC,
    FLAT_OBJECT,
    KEYWORD,
    LONG,
    TEXT,
    UNMAPPED,
    Fields,
    field_kind,
    text_field_data,
)
from memory_plugin.dsl.query_strings import Builders, parse_query_string
from memory_plugin.dsl.sort import SortSpec, parse_sort
from memory_plugin.dsl.source import SourceFilter, parse_source
from memory_plugin.dsl.values import (
    DATE_SHAPED,
    QueryParsingError,
    as_float,
    check_scalar,
    checked_date,
    is_number,
    parse_boost,
    query_object,
    single_field,
    token_name,
)
from memory_plugin.errors import InvalidArgument, ParseFailure, ShardFailure, TooManyClauses
from memory_plugin.opensearch_client import MAX_RESULT_WINDOW

# --------------------------------------------------------------------------- query parsing

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
        "fuzzy_transpositions",
        "fuzzy_rewrite",
        "_name",
    },
    "match_phrase": {"query", "slop", "boost", "analyzer", "zero_terms_query", "_name"},
    "term": {"value", "boost", "case_insensitive", "_name"},
    "prefix": {"value", "boost", "case_insensitive", "rewrite", "_name"},
    "wildcard": {"value", "wildcard", "boost", "case_insensitive", "rewrite", "_name"},
    "regexp": {"value", "flags", "case_insensitive", "max_determinized_states", "rewrite", "boost", "_name"},
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
    body = query_object("match_all", body, ("boost", "_name"))
    return MatchAll(boost=parse_boost("match_all", body.get("boost", 1.0)))


def parse_match_none(body: Any) -> Clause:
    body = query_object("match_none", body)
    return MatchNone()


#: The mapping of the index being searched, while a body is parsed (``None``: every field dynamic).
_FIELDS: ContextVar[Fields | None] = ContextVar("dsl_fields", default=None)


@contextmanager
def mapped(fields: Fields | None) -> Iterator[None]:
    token = _FIELDS.set(fields)
    try:
        yield
    finally:
        _FIELDS.reset(token)


def kind_of(path: str) -> str:
    return field_kind(_FIELDS.get(), path)


def fuzziness(qname: str, value: Any, term: str) -> int:
    """``fuzziness`` as a maximum number of edits for ``term``: 0-2, or ``AUTO[:low,high]`` by length."""
    text = str(value).strip() if not isinstance(value, bool) else ""
    if text.upper().startswith("AUTO"):
        low, high = 3, 6
        if text[4:]:
            bounds = text[5:].split(",") if text[4] == ":" else []
            if len(bounds) != 2 or not all(b.strip().isdigit() for b in bounds):
                raise ParseFailure("failed to find low and high distance values")
            low, high = int(bounds[0]), int(bounds[1])
        length = len(term)
        return 0 if length < low else 1 if length < high else 2
    number = as_float(text)
    if number is None or number < 0:
        raise QueryParsingError(f"[{qname}] query: invalid [fuzziness] value [{value}]")
    return min(2, int(number))


def non_negative_int(qname: str, name: str, value: Any, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | str) or not str(value).strip().lstrip("+").isdigit():
        raise QueryParsingError(f"[{qname}] query: [{name}] must be a non-negative integer, found [{value}]")
    return min(int(str(value).strip()), 2**31 - 1)


@dataclass(frozen=True)
class FullText:
    """The options a ``match``-like query gives every field it runs on."""

    operator: str = "or"
    minimum_should_match: Any = None
    zero_terms_all: bool = False
    fuzziness: Any = None
    prefix_length: int = 0
    max_expansions: int = 50
    transpositions: bool = True
    slop: int = 0


def term_clause(path: str, kind: str, term: str, boost: float, options: FullText) -> Clause:
    if options.fuzziness is not None and kind in (TEXT, KEYWORD, FLAT_OBJECT, DYNAMIC):
        edits = fuzziness("match", options.fuzziness, term)
        return Fuzzy(
            field=path,
            kind=TEXT if kind == DYNAMIC else kind,
            term=term,
            max_edits=edits,
            prefix_length=options.prefix_length,
            transpositions=options.transpositions,
            max_expansions=options.max_expansions,
            boost=boost,
        )
    if kind in (TEXT, KEYWORD, FLAT_OBJECT):
        return TermScore(field=path, kind=kind, term=term, boost=boost)
    if kind == DYNAMIC:
        return TermScore(field=path, kind=TEXT, term=term, boost=boost)
    return Term(field=path, values=[term], kind=kind, boost=boost)


def match_clause(path: str, value: Any, boost: float, options: FullText) -> Clause:
    """A ``match`` on one field: analysed for text, one whole term otherwise."""
    kind = kind_of(path)
    if kind == UNMAPPED:
        return MatchNone()
    raw = ("true" if value else "false") if isinstance(value, bool) else str(value)
    if kind in (DATE, LONG):
        return Term(field=path, values=[value], kind=kind, boost=boost)
    terms = analyze(raw) if kind in (TEXT, DYNAMIC) else [raw]
    check_clause_count(len(terms))
    if not terms:
        return MatchAll(boost=boost) if options.zero_terms_all else MatchNone()
    clauses = [term_clause(path, kind, t, 1.0, options) for t in terms]
    if len(clauses) == 1:
        clauses[0].boost *= boost
        return clauses[0]
    if options.operator == "and":
        return Bool(must=clauses, boost=boost)
    needed = minimum_should_match_count(options.minimum_should_match, len(clauses), default=1)
    return Bool(should=clauses, minimum_should_match=max(needed, 1), boost=boost)


#: Lucene's ``IndexSearcher.maxClauseCount`` (``indices.query.bool.max_clause_count``).
MAX_CLAUSE_COUNT = 1024


def check_clause_count(count: int) -> None:
    if count > MAX_CLAUSE_COUNT:
        raise TooManyClauses(f"failed to create query: maxClauseCount is set to {MAX_CLAUSE_COUNT}")


def phrase_clause(path: str, value: Any, boost: float, options: FullText) -> Clause:
    kind = kind_of(path)
    if kind not in (TEXT, DYNAMIC):
        return match_clause(path, value, boost, FullText())
    terms = analyze(str(value))
    if not terms:
        return MatchAll(boost=boost) if options.zero_terms_all else MatchNone()
    if len(terms) == 1:
        return TermScore(field=path, kind=TEXT, term=terms[0], boost=boost)
    return Phrase(field=path, kind=TEXT, terms=terms, slop=options.slop, boost=boost)


def full_text_options(qname: str, opts: Mapping[str, Any]) -> FullText:
    operator = str(opts.get("operator", "or")).lower()
    if operator not in ("or", "and"):
        raise QueryParsingError(f"[{qname}] query: unknown operator [{opts.get('operator')}]")
    zero_terms_query = str(opts.get("zero_terms_query", "none")).lower()
    if zero_terms_query not in ("none", "all"):
        raise QueryParsingError(f"[{qname}] query: unsupported zero_terms_query value [{opts.get('zero_terms_query')}]")
    fuzzy = opts.get("fuzziness")
    if fuzzy is not None:
        fuzziness(qname, fuzzy, "")  # refused now, whatever the terms
    return FullText(
        operator=operator,
        minimum_should_match=check_minimum_should_match(qname, opts.get("minimum_should_match")),
        zero_terms_all=zero_terms_query == "all",
        fuzziness=fuzzy,
        prefix_length=non_negative_int(qname, "prefix_length", opts.get("prefix_length"), 0),
        max_expansions=max(1, min(non_negative_int(qname, "max_expansions", opts.get("max_expansions"), 50), 1024)),
        transpositions=bool(opts.get("fuzzy_transpositions", True)),
        slop=non_negative_int(qname, "slop", opts.get("slop"), 0),
    )


def full_text_query(qname: str, build: Callable[[str, Any, float, FullText], Clause]) -> Callable[[Any], Clause]:
    """``match`` and ``match_phrase``: ``{field: text}`` or ``{field: {"query": text, options...}}``."""

    def parse(body: Any) -> Clause:
        fname, value, extra = single_field(qname, body)
        opts: Mapping[str, Any] = value if isinstance(value, Mapping) else {"query": value}
        check_options(qname, opts)
        if "query" not in opts:
            raise QueryParsingError(f"[{qname}] query malformed, no [query] specified")
        text = check_scalar(qname, opts["query"])
        boost = parse_boost(qname, opts.get("boost", extra.get("boost", 1.0)))
        return build(fname, text, boost, full_text_options(qname, opts))

    return parse


parse_match = full_text_query("match", match_clause)
parse_match_phrase = full_text_query("match_phrase", phrase_clause)


MULTI_MATCH_TYPES = ("best_fields", "most_fields", "cross_fields", "phrase", "phrase_prefix", "bool_prefix")


def weighted_fields(qname: str, spec: Any) -> list[tuple[str, float]]:
    """``["name^2", "input"]`` as (field, boost) pairs; wildcards expand over the mapping."""
    items = [spec] if isinstance(spec, str) else spec
    if not isinstance(items, list | tuple) or not all(isinstance(f, str) for f in items):
        raise QueryParsingError(f"[{qname}] query: [fields] must be a string or an array of strings")
    fields = _FIELDS.get()
    out: list[tuple[str, float]] = []
    for item in items:
        name, _, weight = item.partition("^")
        boost = 1.0
        if weight:
            parsed = as_float(weight)
            if parsed is None:
                raise QueryParsingError(f"[{qname}] query: invalid field boost [{item}]")
            boost = parsed
        if "*" in name and fields is not None:
            pattern = re2.compile(wildcard_regex(name))
            out.extend((f, boost) for f, kind in fields.items() if pattern.fullmatch(f) and kind in (TEXT, KEYWORD))
        else:
            out.append((name, boost))
    return out


def parse_multi_match(body: Any) -> Clause:
    allowed = FIELD_OPTIONS["match"] | {"fields", "type", "tie_breaker", "slop", "fuzzy_transpositions"}
    body = query_object("multi_match", body, allowed)
    if "query" not in body:
        raise QueryParsingError("No text specified for multi_match query")
    text = check_scalar("multi_match", body["query"])
    kind = str(body.get("type", "best_fields")).lower()
    if kind not in MULTI_MATCH_TYPES:
        raise QueryParsingError(f"[multi_match] query does not support type {body.get('type')}")
    if kind in ("phrase_prefix", "bool_prefix"):
        raise QueryParsingError(f"[multi_match] query: type [{kind}] is not supported here")
    fields = weighted_fields("multi_match", body.get("fields", "*"))
    tie = as_float(body.get("tie_breaker", 0.0))
    if tie is None or isinstance(body.get("tie_breaker"), bool):
        raise QueryParsingError("[multi_match] query: [tie_breaker] must be a number")
    options = full_text_options("multi_match", body)
    boost = parse_boost("multi_match", body.get("boost", 1.0))
    if kind == "cross_fields":
        return cross_fields(fields, text, options, tie, boost)
    make = phrase_clause if kind == "phrase" else match_clause
    per_field = [c for c in (make(f, text, b, options) for f, b in fields) if not isinstance(c, MatchNone)]
    if not per_field:
        return MatchNone()
    if kind == "most_fields":
        return Bool(should=per_field, boost=boost)
    return Disjunction(clauses=per_field, tie_breaker=tie, boost=boost)


def cross_fields(fields: list[tuple[str, float]], text: Any, options: FullText, tie: float, boost: float) -> Clause:
    """Text fields as one big field: each term is the best of its fields, with one blended document frequency."""
    text_fields = [(f, b) for f, b in fields if kind_of(f) == TEXT]
    others = [match_clause(f, text, b, options) for f, b in fields if kind_of(f) not in (TEXT, UNMAPPED)]
    terms = analyze(str(text))
    per_term: list[Clause] = [BlendedTerm(fields=text_fields, term=t, tie_breaker=tie) for t in terms if text_fields]
    groups: list[Clause] = []
    if per_term:
        if options.operator == "and":
            groups.append(Bool(must=per_term))
        else:
            needed = minimum_should_match_count(options.minimum_should_match, len(per_term), default=1)
            groups.append(Bool(should=per_term, minimum_should_match=max(needed, 1)))
    groups.extend(others)
    if not groups:
        return MatchNone()
    return groups[0] if len(groups) == 1 and boost == 1.0 else Disjunction(clauses=groups, tie_breaker=tie, boost=boost)


def parse_fuzzy(body: Any) -> Clause:
    fname, value, extra = single_field("fuzzy", body)
    opts: Mapping[str, Any] = value if isinstance(value, Mapping) else {"value": value}
    for k in opts:
        if k not in {
            "value",
            "fuzziness",
            "prefix_length",
            "max_expansions",
            "transpositions",
            "rewrite",
            "boost",
            "_name",
        }:
            raise QueryParsingError(f"[fuzzy] query does not support [{k}]")
    if opts.get("value") is None:
        raise QueryParsingError("[fuzzy] query malformed, no [value] specified")
    term = str(check_scalar("fuzzy", opts["value"]))
    kind = kind_of(fname)
    if kind == UNMAPPED:
        return MatchNone()
    return Fuzzy(
        field=fname,
        kind=TEXT if kind == DYNAMIC else kind,
        term=term,
        max_edits=fuzziness("fuzzy", opts.get("fuzziness", "AUTO"), term),
        prefix_length=non_negative_int("fuzzy", "prefix_length", opts.get("prefix_length"), 0),
        max_expansions=max(1, min(non_negative_int("fuzzy", "max_expansions", opts.get("max_expansions"), 50), 1024)),
        transpositions=bool(opts.get("transpositions", True)),
        boost=parse_boost("fuzzy", opts.get("boost", extra.get("boost", 1.0))),
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


def parse_lucene_syntax(qname: str) -> Callable[[Any], Clause]:
    def parse(body: Any) -> Clause:
        build = Builders(
            fields=[],
            kind_of=kind_of,
            term=lambda f, text, boost: match_clause(f, text, boost, FullText()),
            phrase=lambda f, text, boost, slop: phrase_clause(f, text, boost, FullText(slop=slop)),
        )
        return parse_query_string(qname, body, weighted_fields, build)

    return parse


def parse_term(body: Any) -> Clause:
    fname, value, extra = single_field("term", body)
    opts: Mapping[str, Any] = value if isinstance(value, Mapping) else {"value": value}
    check_options("term", opts)
    if "value" not in opts:
        raise QueryParsingError("[term] query malformed, no [value] specified")
    if opts["value"] is None:
        raise QueryParsingError("value cannot be null")
    wanted = check_scalar("term", opts["value"])
    boost = parse_boost("term", opts.get("boost", extra.get("boost", 1.0)))
    case_insensitive = bool(opts.get("case_insensitive", False))
    kind = kind_of(fname)
    if kind == TEXT and not case_insensitive:
        return TermScore(field=fname, kind=TEXT, term=str(wanted), boost=boost)
    if kind == TEXT:
        regex = re2.compile("(?is)" + re2.escape(str(wanted)))
        return Pattern(field=fname, regex=regex, kind=TEXT, boost=boost)
    return Term(
        field=fname,
        values=[wanted],
        kind=kind,
        case_insensitive=case_insensitive,
        constant=case_insensitive or kind == DYNAMIC,
        boost=boost,
    )


def parse_terms(body: Any) -> Clause:
    body = query_object("terms", body)
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
    return Term(
        field=fname, values=list(values), kind=kind_of(fname), boost=parse_boost("terms", body.get("boost", 1.0))
    )


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
    body = query_object("exists", body, ("field", "boost", "_name"))
    fname = body.get("field")
    if not isinstance(fname, str) or not fname:
        raise QueryParsingError("[exists] must be provided with a [field]")
    return Exists(field=fname, kind=kind_of(fname), boost=parse_boost("exists", body.get("boost", 1.0)))


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
    boost = parse_boost(qname, opts.get("boost", extra.get("boost", 1.0)))
    return Pattern(field=fname, regex=regex, kind=kind_of(fname), boost=boost)


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


def parse_regexp(body: Any) -> Clause:
    """Lucene's regular expressions share RE2's core syntax; RE2 keeps matching linear in the text."""
    return pattern_clause("regexp", body, lambda p: p)


def parse_ids(body: Any) -> Clause:
    body = query_object("ids", body, ("values", "boost", "_name", "type"))
    values = body.get("values", [])
    if not isinstance(values, list | tuple):
        raise QueryParsingError("[ids] query malformed, [values] must be an array")
    for v in values:
        if isinstance(v, Mapping | list | tuple) or v is None:
            raise QueryParsingError("[ids] query malformed, values must be strings")
    return Ids(values=frozenset(str(v) for v in values), boost=parse_boost("ids", body.get("boost", 1.0)))


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


# --------------------------------------------------------------------------- public API


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
        if field_kind(fields, spec.field) == TEXT:
            raise ShardFailure(text_field_data(spec.field))
    search_after = parse_search_after(body["search_after"], sort) if body.get("search_after") is not None else None
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

    track_total_hits = body.get("track_total_hits")
    if track_total_hits is not None and not isinstance(track_total_hits, bool | int):
        raise QueryParsingError(f"[track_total_hits] must be a boolean or an integer, found [{track_total_hits}]")

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
    )
