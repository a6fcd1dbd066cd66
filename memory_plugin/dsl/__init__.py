"""A small OpenSearch query-DSL evaluator over in-memory documents.

The 2.12+ ``_search`` endpoints of the conversational memory API take an
OpenSearch search body.  :func:`parse_search` (``parse``) validates the whole
body up front and turns it into a :class:`SearchBody`; :func:`execute`
(``execute``) evaluates it over candidate documents (``(id, _source)`` pairs
the caller has already scoped to the principal); :func:`search_response`
renders the OpenSearch search response.

Supported: ``query`` (``match_all``, ``match_none``, ``match``,
``match_phrase``, ``multi_match``, ``term``, ``terms``, ``fuzzy``, ``range``,
``exists``, ``prefix``, ``wildcard``, ``regexp``, ``ids``, ``bool``,
``dis_max``, ``constant_score``, ``query_string``, ``simple_query_string``:
parsed in ``queries``, ``full_text`` and ``term_level``, evaluated in
``clauses`` and ``query_strings``), ``sort`` and ``search_after`` (``sort``),
``from``, ``size``, ``_source`` (``source``), ``highlight`` (``highlight``),
``aggs`` (``aggregations``), and ``track_total_hits``, ``version``,
``seq_no_primary_term``, ``timeout`` (accepted).  Text fields are analysed
as OpenSearch's standard analyzer does (``analysis``) and scored by BM25
(``scoring``) under the index's field types (``mapping``).  Values and date
math live in ``values``.

Error wording follows OpenSearch where it has one (``unknown query [x]``,
``Unknown key for a START_OBJECT in [x].``, ``[size] parameter cannot be
negative, found [-1]``, ``Result window is too large, ...``).
"""

from memory_plugin.dsl.clauses import Bool, TermScore
from memory_plugin.dsl.execute import (
    MESSAGE_INDEX,
    META_INDEX,
    DocumentHit,
    DocumentResults,
    bounded,
    execute,
    matching,
    search,
    search_response,
)
from memory_plugin.dsl.mapping import KEYWORD, MESSAGE_FIELDS, META_FIELDS, Fields
from memory_plugin.dsl.parse import SearchBody, parse_search
from memory_plugin.dsl.sort import SortSpec
from memory_plugin.dsl.source import SourceFilter
from memory_plugin.dsl.values import QueryParsingError

__all__ = [
    "KEYWORD",
    "Bool",
    "TermScore",
    "MESSAGE_FIELDS",
    "MESSAGE_INDEX",
    "META_FIELDS",
    "META_INDEX",
    "DocumentHit",
    "DocumentResults",
    "Fields",
    "QueryParsingError",
    "SearchBody",
    "SortSpec",
    "SourceFilter",
    "bounded",
    "execute",
    "matching",
    "parse_search",
    "search",
    "search_response",
]
