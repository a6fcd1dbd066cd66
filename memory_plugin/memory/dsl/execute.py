"""Evaluating a :class:`SearchBody` over documents, and rendering OpenSearch's search response."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from memory_plugin.memory.dsl.parse import SearchBody, parse_search
from memory_plugin.memory.dsl.sort import Descending, SortSpec, reported_sort_value, sort_value
from memory_plugin.memory.dsl.values import MISSING
from memory_plugin.opensearch_client import MAX_RESULT_WINDOW

#: ml-commons 2.12+ index names (``ConversationalIndexConstants``).
META_INDEX = ".plugins-ml-memory-meta"
MESSAGE_INDEX = ".plugins-ml-memory-message"


@dataclass(frozen=True)
class DocumentHit:
    id: str
    score: float | None
    source: dict[str, Any] | None
    sort: tuple[Any, ...] | None = None


@dataclass(frozen=True)
class DocumentResults:
    total: int
    max_score: float | None
    hits: tuple[DocumentHit, ...]
    #: The budget ran out: the hits come from the documents examined until then (OpenSearch's ``timed_out``).
    timed_out: bool = False


def execute(
    query: SearchBody, docs: Iterable[tuple[str, Mapping[str, Any]]], *, budget: float | None = None
) -> DocumentResults:
    """Evaluate ``query`` over ``(id, _source)`` pairs, in their given order.

    Default order is ``_score`` descending, ties kept in input order.  Field
    sorts put missing values last (``"missing": "_first"`` to override); a
    multi-valued field sorts by its min (asc) or max (desc).

    ``budget`` bounds the evaluation in seconds of wall time, checked between
    documents: past it, the documents not yet examined are skipped and the
    result says ``timed_out``, as OpenSearch does when a search times out.
    """
    deadline = None if budget is None else time.monotonic() + budget
    timed_out = False
    matched: list[tuple[int, str, Mapping[str, Any], float]] = []
    for pos, (doc_id, src) in enumerate(docs):
        if deadline is not None and time.monotonic() >= deadline:
            timed_out = True
            break
        score = query.query.score(doc_id, src)
        if score is not None:
            matched.append((pos, doc_id, src, float(score)))

    specs = query.sort or (SortSpec("_score", "desc"),)

    def key(row: tuple[int, str, Mapping[str, Any], float]) -> tuple[Any, ...]:
        pos, doc_id, src, score = row
        parts: list[Any] = []
        for spec in specs:
            if spec.field == "_score":
                v: Any = (0, score)
                missing = False
            elif spec.field == "_doc":
                v, missing = (0, float(pos)), False
            else:
                v = sort_value(src, doc_id, spec)
                missing = v is MISSING
            rank = (0 if spec.missing == "_first" else 1) if missing else (1 if spec.missing == "_first" else 0)
            if missing:
                parts.append((rank, 0))
            else:
                parts.append((rank, v if spec.order == "asc" else Descending(v)))
        parts.append(pos)
        return tuple(parts)

    matched.sort(key=key)
    track = query.scores_tracked
    max_score = max((m[3] for m in matched), default=None) if track else None
    page = matched[query.from_ : query.from_ + query.size]
    hits = []
    for pos, doc_id, src, score in page:
        sort_values: tuple[Any, ...] | None = None
        if query.sort:
            sort_values = tuple(reported_sort_value(src, doc_id, pos, score, s) for s in query.sort)
        hits.append(
            DocumentHit(id=doc_id, score=score if track else None, source=query.source.apply(src), sort=sort_values)
        )
    return DocumentResults(total=len(matched), max_score=max_score, hits=tuple(hits), timed_out=timed_out)


def search_response(
    result: DocumentResults,
    took_ms: int,
    *,
    index: str,
    hit_extras: Callable[[str], Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The OpenSearch search response body for ``result``.

    ``index`` is the ``_index`` reported on every hit (:data:`META_INDEX` or
    :data:`MESSAGE_INDEX`).  ``hit_extras(id)`` may add keys such as
    ``_version``, ``_seq_no``, ``_primary_term`` (ml-commons requests them),
    placed between ``_id`` and ``_score`` as OpenSearch orders them.
    """
    hits = []
    for h in result.hits:
        hit: dict[str, Any] = {"_index": index, "_id": h.id}
        if hit_extras is not None:
            hit.update(hit_extras(h.id))
        hit["_score"] = h.score
        if h.source is not None:
            hit["_source"] = h.source
        if h.sort is not None:
            hit["sort"] = list(h.sort)
        hits.append(hit)
    return {
        "took": int(took_ms),
        "timed_out": result.timed_out,
        "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
        "hits": {
            "total": {"value": result.total, "relation": "eq"},
            "max_score": result.max_score,
            "hits": hits,
        },
    }


def search(
    body: Mapping[str, Any] | None,
    docs: Iterable[tuple[str, Mapping[str, Any]]],
    *,
    index: str,
    took_ms: int = 0,
    max_size: int = MAX_RESULT_WINDOW,
) -> dict[str, Any]:
    """Convenience: parse, execute and render in one call."""
    return search_response(execute(parse_search(body, max_size=max_size), docs), took_ms, index=index)
