"""Full-text queries (``match``, ``match_phrase``, ``multi_match``, the query strings), analysed per field."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import re2

from memory_plugin.dsl.analysis import analyze
from memory_plugin.dsl.clauses import (
    BlendedTerm,
    Bool,
    Clause,
    Disjunction,
    Fuzzy,
    MatchAll,
    MatchNone,
    Phrase,
    Term,
    TermScore,
    check_minimum_should_match,
    minimum_should_match_count,
)
from memory_plugin.dsl.mapping import DATE, DYNAMIC, FLAT_OBJECT, KEYWORD, LONG, TEXT, UNMAPPED
from memory_plugin.dsl.parse_context import FIELD_OPTIONS, check_clause_count, check_options, fields_in_scope, kind_of
from memory_plugin.dsl.query_strings import Builders, parse_query_string
from memory_plugin.dsl.term_level import MAX_EXPANSIONS, fuzziness, whole_number, wildcard_regex
from memory_plugin.dsl.values import QueryParsingError, as_float, check_scalar, parse_boost, query_object, single_field
from memory_plugin.errors import InvalidArgument


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
    numbers = {name: whole_number(qname, name, opts.get(name), default) for name, default in _NUMBERS.items()}
    for name, least, message in _RANGES.get(qname, ()):
        if numbers[name] < least:
            raise InvalidArgument(message)
    return FullText(
        operator=operator,
        minimum_should_match=check_minimum_should_match(qname, opts.get("minimum_should_match")),
        zero_terms_all=zero_terms_query == "all",
        fuzziness=fuzzy,
        prefix_length=numbers["prefix_length"],
        max_expansions=min(numbers["max_expansions"], MAX_EXPANSIONS),
        transpositions=bool(opts.get("fuzzy_transpositions", True)),
        slop=numbers["slop"],
    )


#: The integer options of the full-text queries, and their defaults.
_NUMBERS = {"prefix_length": 0, "max_expansions": 50, "slop": 0}
#: Each builder's refusal of an option out of range, ``(option, least, message)`` in the order its
#: ``fromXContent`` calls the setters (``MatchQueryBuilder.prefixLength``, ``MultiMatchQueryBuilder.maxExpansions``...).
_RANGES = {
    "match": (
        ("prefix_length", 0, "[match] requires prefix length to be non-negative."),
        ("max_expansions", 1, "[match] requires maxExpansions to be positive."),
    ),
    "match_phrase": (("slop", 0, "No negative slop allowed."),),
    "multi_match": (
        ("max_expansions", 1, "Max expansions must be strictly great than zero."),
        ("prefix_length", 0, "No negative prefix length allowed."),
        ("slop", 0, "No negative slop allowed."),
    ),
}


def match_shown(text: Any, opts: Mapping[str, Any]) -> dict[str, Any]:
    """A ``match`` query's options as ``MatchQueryBuilder.doXContent`` writes them, the boost still 1.0."""
    shown: dict[str, Any] = {"query": text, "operator": str(opts.get("operator", "or")).upper()}
    for name in ("analyzer", "fuzziness"):
        if opts.get(name) is not None:
            shown[name] = str(opts[name])
    shown["prefix_length"] = opts.get("prefix_length", 0)
    shown["max_expansions"] = opts.get("max_expansions", 50)
    shown["fuzzy_transpositions"] = opts.get("fuzzy_transpositions", True)
    if opts.get("minimum_should_match") is not None:
        shown["minimum_should_match"] = str(opts["minimum_should_match"])
    shown["lenient"] = opts.get("lenient", False)
    shown["zero_terms_query"] = str(opts.get("zero_terms_query", "none")).upper()
    shown["auto_generate_synonyms_phrase_query"] = opts.get("auto_generate_synonyms_phrase_query", True)
    shown["boost"] = 1.0
    if opts.get("_name") is not None:
        shown["_name"] = opts["_name"]
    return shown


def full_text_query(qname: str, build: Callable[[str, Any, float, FullText], Clause]) -> Callable[[Any], Clause]:
    """``match`` and ``match_phrase``: ``{field: text}`` or ``{field: {"query": text, options...}}``."""

    def parse(body: Any) -> Clause:
        fname, value, extra = single_field(qname, body)
        opts: Mapping[str, Any] = value if isinstance(value, Mapping) else {"query": value}
        check_options(qname, opts)
        if "query" not in opts:
            raise QueryParsingError(f"[{qname}] query malformed, no [query] specified")
        text = check_scalar(qname, opts["query"])
        options = full_text_options(qname, opts)
        shown = (lambda: {"match": {fname: match_shown(text, opts)}}) if qname == "match" else None
        boost = parse_boost(qname, opts.get("boost", extra.get("boost", 1.0)), shown)
        return build(fname, text, boost, options)

    return parse


parse_match = full_text_query("match", match_clause)
parse_match_phrase = full_text_query("match_phrase", phrase_clause)


MULTI_MATCH_TYPES = ("best_fields", "most_fields", "cross_fields", "phrase", "phrase_prefix", "bool_prefix")


def weighted_fields(qname: str, spec: Any) -> list[tuple[str, float]]:
    """``["name^2", "input"]`` as (field, boost) pairs; wildcards expand over the mapping."""
    items = [spec] if isinstance(spec, str) else spec
    if not isinstance(items, list | tuple) or not all(isinstance(f, str) for f in items):
        raise QueryParsingError(f"[{qname}] query: [fields] must be a string or an array of strings")
    fields = fields_in_scope()
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
