"""A small OpenSearch query-DSL evaluator over in-memory documents.

The 2.12+ ``_search`` endpoints of the conversational memory API take an
OpenSearch search body.  :func:`parse_search` (``parse``) validates the whole
body up front and turns it into a :class:`SearchBody`; :func:`execute`
(``execute``) evaluates it over candidate documents (``(id, _source)`` pairs
the caller has already scoped to the principal); :func:`search_response`
renders the OpenSearch search response.

Supported: ``query`` (``match_all``, ``match_none``, ``match``,
``match_phrase``, ``term``, ``terms``, ``range``, ``exists``, ``prefix``,
``wildcard``, ``ids``, ``bool``, ``constant_score``: ``clauses``), ``sort``
(``sort``), ``from``, ``size``, ``_source`` (``source``) and
``track_total_hits`` (accepted, ignored).  Values, analysis and date math
live in ``values``.

Error wording follows OpenSearch where it has one (``unknown query [x]``,
``Unknown key for a START_OBJECT in [x].``, ``[size] parameter cannot be
negative, found [-1]``, ``Result window is too large, ...``).
"""

from memory_plugin.memory.dsl.execute import (
    MESSAGE_INDEX,
    META_INDEX,
    DocumentHit,
    DocumentResults,
    execute,
    search,
    search_response,
)
from memory_plugin.memory.dsl.parse import SearchBody, parse_search
from memory_plugin.memory.dsl.sort import SortSpec
from memory_plugin.memory.dsl.values import QueryParsingError

__all__ = [
    "MESSAGE_INDEX",
    "META_INDEX",
    "DocumentHit",
    "DocumentResults",
    "QueryParsingError",
    "SearchBody",
    "SortSpec",
    "execute",
    "parse_search",
    "search",
    "search_response",
]
