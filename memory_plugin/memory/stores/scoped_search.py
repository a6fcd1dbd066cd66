"""A caller's ``_search`` body made safe to run on the shared memory indices, and its answer made ml-commons'.

The OpenSearch memory store runs a 2.12+ ``_search`` inside OpenSearch.  Every
user of a deployment shares its two indices, so the caller's body is checked
and wrapped before it is sent, and the answer is cleaned before it is returned:

- The query becomes ``{"bool": {"must": [<query>, ...], "filter": [<owner>]}}``,
  as ml-commons wraps it (plus the owner filter it lacks without the security
  plugin).  ``post_filter``, aggregations, ``rescore``, ``collapse`` and
  highlighting only ever see what that query matched.
- What reads beyond the matched documents is refused with a 400 before anything
  is sent: ``terms`` lookups, ``more_like_this`` of stored documents,
  ``percolate``, ``geo_shape``/``shape`` indexed shapes, scripts of every kind
  (they can read any field; stored scripts are someone else's code), join
  queries, ``wrapper``/``template`` (queries this check could not see),
  ``global`` and ``significant_*`` aggregations and ``terms`` buckets of
  ``min_doc_count: 0`` (they count or list terms of the whole index),
  ``suggest`` (suggesters read the whole index), and ``indices_boost``,
  ``pit``, ``slice``, ``explain``, ``profile``, ``stats``, ``ext`` and search
  pipelines.  An unknown top-level key gets OpenSearch's own parsing error.
- Our own fields live under one object, :data:`INTERNAL_FIELD`; naming it
  anywhere a field is named is refused, and it is removed from every hit
  (``_source``, ``fields``, ``highlight``, inner and top hits).  The
  top-level hits' ``_source`` is rebuilt as ml-commons stores the document and
  filtered by the caller's ``_source``, so it reads exactly as on SQLite.
- Our index names become ml-commons' (``.plugins-ml-memory-meta``,
  ``.plugins-ml-memory-message``) everywhere in the answer and in errors.

Scores are OpenSearch's own: BM25 statistics are those of the shared index, as
on a real cluster where ml-commons keeps every user's memories in one index.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from memory_plugin.dsl.parse import parse_track_total_hits
from memory_plugin.dsl.source import SourceFilter, parse_source
from memory_plugin.dsl.values import QueryParsingError, token_name
from memory_plugin.errors import OpenSearchBadRequest

#: The object field that holds the store's own data (owner, id copy, exact times, exact ``additional_info``).
INTERNAL_FIELD = "memory_plugin"

#: Top-level keys passed to OpenSearch as the caller wrote them (their contents are checked).
PASSED_THROUGH = frozenset(
    {
        "query",
        "from",
        "size",
        "sort",
        "track_total_hits",
        "track_scores",
        "min_score",
        "post_filter",
        "search_after",
        "aggs",
        "aggregations",
        "highlight",
        "fields",
        "docvalue_fields",
        "timeout",
        "terminate_after",
        "version",
        "seq_no_primary_term",
        "collapse",
        "rescore",
        "include_named_queries_score",
    }
)
#: Top-level keys OpenSearch knows that could reach past the caller's documents or show our internals.
REFUSED_TOP_LEVEL = frozenset(
    {
        "indices_boost",
        "suggest",
        "pit",
        "slice",
        "explain",
        "profile",
        "stats",
        "ext",
        "search_pipeline",
        "script_fields",
        "stored_fields",
        "derived",
        "verbose_pipeline",
    }
)
#: Keys refused wherever they appear: each reads other documents or indices, or hides a query from this check.
REFUSED_ANYWHERE = {
    "script": "scripts",
    "_script": "scripts",
    "script_score": "scripts",
    "scripted_metric": "scripts",
    "bucket_script": "scripts",
    "bucket_selector": "scripts",
    "minimum_should_match_script": "scripts",
    "percolate": "[percolate] queries",
    "has_child": "[has_child] queries",
    "has_parent": "[has_parent] queries",
    "parent_id": "[parent_id] queries",
    "wrapper": "[wrapper] queries",
    "template": "[template] queries",
    "indexed_shape": "indexed shapes",
    "global": "[global] aggregations",
    "significant_terms": "[significant_terms] aggregations",
    "significant_text": "[significant_text] aggregations",
    "children": "[children] aggregations",
    "parent": "[parent] aggregations",
}
#: Keys whose string values (or list items, or ``{"field": ...}`` items) name fields.
FIELD_NAMING_KEYS = frozenset({"field", "fields", "default_field", "docvalue_fields", "path", "sort"})


def refused(what: str) -> OpenSearchBadRequest:
    return OpenSearchBadRequest(
        f"{what} are not allowed in a memory search: it may only read the caller's own memories and messages",
        exception="illegal_argument_exception",
    )


def _parsing_error(error: QueryParsingError) -> OpenSearchBadRequest:
    return OpenSearchBadRequest(str(error), exception="parsing_exception")


def _internal(name: Any) -> bool:
    return isinstance(name, str) and name.startswith(INTERNAL_FIELD)  # the object, its fields, patterns of them


def _no_internal_field(name: Any) -> None:
    if _internal(name):
        raise OpenSearchBadRequest(
            f"No mapping found for [{name}]: [{INTERNAL_FIELD}] holds this server's own data",
            exception="illegal_argument_exception",
        )


def _named_fields(value: Any) -> Iterator[Any]:
    """The field names a ``field``-like key's value gives: a name, a list of names, ``{"field": name}`` items."""
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, Mapping):
            yield item.get("field")
            yield from item.keys()  # sort objects: {"name": {"order": ...}}
        else:
            yield item


def check_body(body: Mapping[str, Any]) -> None:
    """Refuse anything in ``body`` that reads past the scoped query's documents or names our fields."""
    stack: list[tuple[str | None, Any]] = [(None, body)]
    while stack:
        parent, node = stack.pop()
        if isinstance(node, list):
            stack.extend((parent, item) for item in node)
            continue
        if not isinstance(node, Mapping):
            continue
        for key, value in node.items():
            if key in REFUSED_ANYWHERE:
                raise refused(REFUSED_ANYWHERE[key])
            _no_internal_field(key)
            if key in FIELD_NAMING_KEYS:
                for name in _named_fields(value):
                    _no_internal_field(name)
            if parent == "terms" and isinstance(value, Mapping) and {"index", "id", "path"} & set(value):
                raise refused("[terms] lookups of stored documents")
            if parent in ("terms", "multi_terms") and key == "min_doc_count" and str(value).strip() in ("0", "0.0"):
                raise refused("[terms] buckets of min_doc_count 0 (they list terms of the whole index)")
            if parent in ("more_like_this", "mlt") and key in ("like", "unlike", "docs", "ids"):
                items = value if isinstance(value, list) else [value]
                if key in ("docs", "ids") or any(isinstance(item, Mapping) for item in items):
                    raise refused("[more_like_this] queries of stored documents")
            stack.append((key, value))


@dataclass(frozen=True)
class ScopedSearch:
    #: What is sent to OpenSearch.
    body: dict[str, Any]
    #: The caller's ``_source``, applied to each top-level hit's ml-commons document.
    source: SourceFilter


def scoped_search(
    body: Mapping[str, Any] | None, *, must: Sequence[Mapping[str, Any]] = (), scope: Sequence[Mapping[str, Any]]
) -> ScopedSearch:
    """``body`` checked, its query wrapped as ``bool`` with ``must`` beside it and ``scope`` as filters."""
    body = body or {}
    for key, value in body.items():
        if key in REFUSED_TOP_LEVEL:
            raise refused(f"[{key}] options")
        if key not in PASSED_THROUGH and key != "_source":
            raise OpenSearchBadRequest(
                f"Unknown key for a {token_name(value)} in [{key}].", exception="parsing_exception"
            )
    check_body(body)
    if type(body.get("track_total_hits")) is int:  # below -1, OpenSearch's own _search fails it another way
        parse_track_total_hits(body["track_total_hits"])
    try:
        # ml-commons fetches the source even for ``"_source": false``, keeping includes and excludes
        # (``RestActionUtils.getSourceContext``), and asks for versions and sequence numbers.
        source = replace(parse_source(body.get("_source", True)), enabled=True)
    except QueryParsingError as error:
        raise _parsing_error(error) from None
    sent = {key: value for key, value in body.items() if key != "_source"}
    query = body.get("query", {"match_all": {}})
    sent["query"] = {"bool": {"must": [query, *must], "filter": list(scope)}}
    sent.update(_source=True, version=True, seq_no_primary_term=True)
    return ScopedSearch(sent, source)


def _without_internal(mapping: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in mapping.items() if not _internal(key)}


def _public_names(value: Any, names: Mapping[str, str]) -> Any:
    """``value`` with our index names written as ml-commons'."""
    if isinstance(value, str):
        if value in names:
            return names[value]
        for ours, theirs in names.items():
            value = value.replace(f"[{ours}]", f"[{theirs}]")
        return value
    if isinstance(value, list):
        return [_public_names(item, names) for item in value]
    if isinstance(value, Mapping):
        return {key: _public_names(item, names) for key, item in value.items()}
    return value


def _clean_hit(hit: dict[str, Any]) -> None:
    if isinstance(hit.get("_source"), Mapping):
        hit["_source"] = _without_internal(hit["_source"])
    for part in ("fields", "highlight"):
        if isinstance(hit.get(part), Mapping):
            hit[part] = _without_internal(hit[part])


def public_response(
    response: Mapping[str, Any],
    search: ScopedSearch,
    *,
    document: Callable[[str, Mapping[str, Any]], dict[str, Any]],
    names: Mapping[str, str],
) -> dict[str, Any]:
    """OpenSearch's answer as ml-commons gives it: ``document(id, stored source)`` is the ml-commons document."""
    answer: dict[str, Any] = _public_names(response, names)
    for hit in answer.get("hits", {}).get("hits", []):
        if isinstance(hit.get("_source"), Mapping):
            hit["_source"] = search.source.apply(document(hit["_id"], hit["_source"]))
    stack: list[Any] = [answer]
    while stack:  # every other hit: inner hits, top hits
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            if "_id" in node and "_index" in node:
                _clean_hit(node)
            stack.extend(node.values())
    return answer


#: The error OpenSearch wraps around any parse failure inside the ``bool`` we wrap the caller's query in.
OUR_WRAPPER_FAILED = re.compile(r"^\[\d+:\d+\] \[bool\] failed to parse field \[must\]$")


def public_error(body: Any, names: Mapping[str, str]) -> dict[str, Any]:
    """OpenSearch's error body with our index names written as ml-commons', and without our wrapper's own layer.

    ml-commons parses the caller's query before it wraps it, so its parse errors
    come unwrapped; ours is parsed inside our ``bool``, which adds one layer.
    """
    relayed = _public_names(body, names) if isinstance(body, Mapping) else {"error": str(body)}
    error = relayed.get("error")
    if (
        isinstance(error, dict)
        and error.get("type") == "x_content_parse_exception"
        and OUR_WRAPPER_FAILED.match(str(error.get("reason", "")))
        and isinstance(error.get("caused_by"), dict)
    ):
        cause = error["caused_by"]
        # OpenSearch names the outermost of its own exceptions as the root cause: our wrapper,
        # where the cause is a Java one (a negative boost's illegal_argument_exception)
        roots = [
            {"type": cause.get("type"), "reason": cause.get("reason")}
            if root.get("reason") == error["reason"]
            else root
            for root in error.get("root_cause", [])
            if isinstance(root, dict)
        ]
        relayed["error"] = {"root_cause": roots, **cause}
    relayed.setdefault("status", 400)
    return relayed
