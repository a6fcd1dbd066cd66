"""What every query parser shares: the mapping in scope, the options a query accepts, Lucene's clause limit."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from memory_plugin.dsl.mapping import Fields, field_kind
from memory_plugin.dsl.values import QueryParsingError
from memory_plugin.errors import TooManyClauses

#: The mapping of the index being searched, while a body is parsed (``None``: every field dynamic).
_FIELDS: ContextVar[Fields | None] = ContextVar("dsl_fields", default=None)


@contextmanager
def mapped(fields: Fields | None) -> Iterator[None]:
    token = _FIELDS.set(fields)
    try:
        yield
    finally:
        _FIELDS.reset(token)


def fields_in_scope() -> Fields | None:
    return _FIELDS.get()


def kind_of(path: str) -> str:
    return field_kind(_FIELDS.get(), path)


#: The options each single-field query accepts, beside its value.
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


def check_options(qname: str, opts: Mapping[str, Any]) -> None:
    for k in opts:
        if k not in FIELD_OPTIONS[qname]:
            raise QueryParsingError(f"[{qname}] query does not support [{k}]")


#: Lucene's ``IndexSearcher.maxClauseCount`` (``indices.query.bool.max_clause_count``).
MAX_CLAUSE_COUNT = 1024


def check_clause_count(count: int) -> None:
    if count > MAX_CLAUSE_COUNT:
        raise TooManyClauses(f"failed to create query: maxClauseCount is set to {MAX_CLAUSE_COUNT}")
