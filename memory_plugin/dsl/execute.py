"""Evaluating a :class:`SearchBody` over documents, and rendering OpenSearch's search response."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from memory_plugin.dsl.clauses import (
    BlendedTerm,
    Bool,
    Clause,
    ConstantScore,
    Disjunction,
    Fuzzy,
    Pattern,
    Phrase,
    Term,
    TermScore,
)
from memory_plugin.dsl.highlight import highlight_hit
from memory_plugin.dsl.mapping import DYNAMIC, TEXT
from memory_plugin.dsl.parse import TRACK_TOTAL_HITS, SearchBody, parse_search
from memory_plugin.dsl.scoring import Corpus, Doc, OutOfTime
from memory_plugin.dsl.sort import Descending, SortSpec, reported_sort_value, sort_value
from memory_plugin.dsl.sort import sort_key as value_key
from memory_plugin.dsl.values import MISSING
from memory_plugin.opensearch_client import MAX_RESULT_WINDOW

#: Seconds one query evaluation may take before it stops and answers ``timed_out``.
EVALUATION_BUDGET_SECONDS = 2.0
#: Query evaluation runs here, never on the event loop; two threads bound how
#: much CPU (and GIL) concurrent searches can take from everything else.
_EVALUATION = ThreadPoolExecutor(max_workers=2, thread_name_prefix="dsl")

T = TypeVar("T")

#: ml-commons 2.12+ index names (``ConversationalIndexConstants``).
META_INDEX = ".plugins-ml-memory-meta"
MESSAGE_INDEX = ".plugins-ml-memory-message"


@dataclass(frozen=True)
class DocumentHit:
    id: str
    score: float | None
    source: dict[str, Any] | None
    sort: tuple[Any, ...] | None = None
    #: How many times the document was written (``_version``), when the store knows.
    version: int | None = None
    highlight: dict[str, list[str]] | None = None


@dataclass(frozen=True)
class DocumentResults:
    total: int
    max_score: float | None
    hits: tuple[DocumentHit, ...]
    #: The budget ran out: the hits come from the documents examined until then (OpenSearch's ``timed_out``).
    timed_out: bool = False
    aggregations: dict[str, Any] | None = None
    #: ``track_total_hits``: counted exactly (True), not reported (False, -1), or up to this many.
    track_total_hits: bool | int = TRACK_TOTAL_HITS


Source = tuple[str, Mapping[str, Any]] | tuple[str, Mapping[str, Any], int]


def as_docs(docs: Iterable[Source]) -> list[Doc]:
    """``(id, _source)`` or ``(id, _source, version)`` rows as documents, in their given (index) order."""
    out: list[Doc] = []
    for pos, row in enumerate(docs):
        out.append(Doc(row[0], row[1], pos, row[2] if len(row) > 2 else None))
    return out


async def bounded(evaluation: Callable[[float], T]) -> T:
    """``evaluation(budget)`` off the event loop, in the threads every query evaluation shares.

    Pass :func:`execute` or :func:`matching` with their documents; the budget is
    read when the call starts (tests change it)."""
    return await asyncio.get_running_loop().run_in_executor(_EVALUATION, evaluation, EVALUATION_BUDGET_SECONDS)


def matching(query: SearchBody, docs: Iterable[Source], *, budget: float | None = None) -> tuple[list[str], bool]:
    """The ids of the documents ``query`` matches, in their given order, and whether ``budget`` (seconds)
    ran out first (then only the documents examined until then count)."""
    deadline = None if budget is None else time.monotonic() + budget
    every = as_docs(docs)
    corpus = Corpus(every, deadline)
    ids: list[str] = []
    try:
        for doc in every:
            if deadline is not None and time.monotonic() >= deadline:
                raise OutOfTime
            if query.query.score(doc, corpus) is not None:
                ids.append(doc.id)
    except OutOfTime:
        return ids, True
    return ids, False


def execute(query: SearchBody, docs: Iterable[Source], *, budget: float | None = None) -> DocumentResults:
    """Evaluate ``query`` over ``(id, _source[, version])`` rows, in their given order.

    Default order is ``_score`` descending, ties kept in input order (Lucene's
    doc order).  Field sorts put missing values last (``"missing": "_first"``
    to override); a multi-valued field sorts by its min (asc) or max (desc).
    BM25 statistics are those of ``docs`` (see ``scoring``).

    ``budget`` bounds the evaluation in seconds of wall time, checked between
    documents: past it, the documents not yet examined are skipped and the
    result says ``timed_out``, as OpenSearch does when a search times out.
    Aggregations and highlighting then get as long again, checked between
    aggregations and between hits: past that, the rest are left out.
    """
    deadline = None if budget is None else time.monotonic() + budget
    timed_out = False
    every = as_docs(docs)
    corpus = Corpus(every, deadline)
    matched: list[tuple[Doc, float]] = []
    try:
        for doc in every:
            if deadline is not None and time.monotonic() >= deadline:
                raise OutOfTime
            score = query.query.score(doc, corpus)
            if score is not None:
                matched.append((doc, float(score)))
    except OutOfTime:
        timed_out = True
    if query.min_score is not None:
        matched = [m for m in matched if m[1] >= query.min_score]
    # What follows (aggregations, highlighting) gets as long again.
    corpus.deadline = None if budget is None else time.monotonic() + budget

    def out_of_time() -> bool:
        return corpus.deadline is not None and time.monotonic() >= corpus.deadline

    specs = query.sort or (SortSpec("_score", "desc"),)

    def key(row: tuple[Doc, float]) -> tuple[Any, ...]:
        doc, score = row
        return (*sort_key(doc, score, specs), doc.pos)

    matched.sort(key=key)
    track = query.scores_tracked
    # OpenSearch reports no max_score when it sorts (without track_scores) or fetches no hits
    max_score = max((m[1] for m in matched), default=None) if not query.sort and query.size else None
    total = len(matched)
    aggregations: dict[str, Any] = {}
    for aggregation in query.aggregations:
        if out_of_time():
            timed_out = True
            break
        aggregations[aggregation.name] = aggregation.run(d.source for d, _ in matched)
    if query.search_after is not None:
        after = search_after_key(query.search_after, specs)
        matched = [m for m in matched if sort_key(m[0], m[1], specs) > after]
    page = matched[query.from_ : query.from_ + query.size]
    try:
        wanted = highlight_terms(query.query, corpus) if query.highlight is not None else {}
    except OutOfTime:  # a fuzzy query's expansions, when matching ran out of time before they were known
        wanted, timed_out = {}, True
    whole = {f: kind_of_hit(query.query, f) for f in wanted}
    hits = []
    for doc, score in page:
        sort_values: tuple[Any, ...] | None = None
        if query.sort:
            sort_values = tuple(reported_sort_value(doc.source, doc.id, doc.pos, score, s) for s in query.sort)
        marked = None
        if query.highlight is not None:
            if out_of_time():
                timed_out = True
            else:
                marked = highlight_hit(query.highlight, doc.source, wanted, whole)
        hits.append(
            DocumentHit(
                id=doc.id,
                score=score if track else None,
                source=query.source.apply(doc.source),
                sort=sort_values,
                version=doc.version,
                highlight=marked,
            )
        )
    return DocumentResults(
        total=total,
        max_score=max_score,
        hits=tuple(hits),
        timed_out=timed_out,
        aggregations=aggregations or None,
        track_total_hits=query.track_total_hits,
    )


def sort_key(doc: Doc, score: float, specs: tuple[SortSpec, ...]) -> tuple[Any, ...]:
    parts: list[Any] = []
    for spec in specs:
        if spec.field == "_score":
            v: Any = (0, score)
            missing = False
        elif spec.field == "_doc":
            v, missing = (0, float(doc.pos)), False
        else:
            v = sort_value(doc.source, doc.id, spec)
            missing = v is MISSING
        rank = (0 if spec.missing == "_first" else 1) if missing else (1 if spec.missing == "_first" else 0)
        if missing:
            parts.append((rank, 0))
        else:
            parts.append((rank, v if spec.order == "asc" else Descending(v)))
    return tuple(parts)


def search_after_key(values: tuple[Any, ...], specs: tuple[SortSpec, ...]) -> tuple[Any, ...]:
    """``search_after`` values as a sort key, to compare with each hit's."""
    parts: list[Any] = []
    for value, spec in zip(values, specs):
        if value is None:
            parts.append((0 if spec.missing == "_first" else 1, 0))
            continue
        # ``_id`` sorts as its text (``sort_key``); the shard reads any other key as a string too (Java's
        # ``toString``: 12 is "12", true is "true")
        v = (value if isinstance(value, str) else json.dumps(value)) if spec.field == "_id" else value_key(value)
        rank = 1 if spec.missing == "_first" else 0
        parts.append((rank, v if spec.order == "asc" else Descending(v)))
    return tuple(parts)


def highlight_terms(clause: Clause, corpus: Corpus) -> dict[str, Callable[[str], bool]]:
    """What each field's highlighter looks for: the query's terms on that field, never ``must_not``'s."""
    terms: dict[str, set[str]] = {}
    patterns: dict[str, list[Any]] = {}

    def visit(c: Clause) -> None:
        if isinstance(c, TermScore):
            terms.setdefault(c.field, set()).add(c.term)
        elif isinstance(c, Phrase):
            terms.setdefault(c.field, set()).update(c.terms)
        elif isinstance(c, Fuzzy):
            terms.setdefault(c.field, set()).update(t for t, _ in c.expansions(corpus))
        elif isinstance(c, BlendedTerm):
            for f, _ in c.fields:
                terms.setdefault(f, set()).add(c.term)
        elif isinstance(c, Term) and c.field != "_id":
            terms.setdefault(c.field, set()).update(str(v) for v in c.values)
        elif isinstance(c, Pattern):
            patterns.setdefault(c.field, []).append(c.regex)
        elif isinstance(c, Bool):
            for sub in (*c.must, *c.filter, *c.should):
                visit(sub)
        elif isinstance(c, Disjunction):
            for sub in c.clauses:
                visit(sub)
        elif isinstance(c, ConstantScore):
            visit(c.filter)

    visit(clause)
    out: dict[str, Callable[[str], bool]] = {}
    for f in terms.keys() | patterns.keys():
        exact = terms.get(f, set())
        regexes = patterns.get(f, [])
        out[f] = lambda t, exact=exact, regexes=regexes: t in exact or any(r.fullmatch(t) for r in regexes)  # type: ignore[misc]
    return out


def kind_of_hit(clause: Clause, path: str) -> bool:
    """Whether ``path`` is highlighted as a whole value (a keyword) rather than token by token."""
    found: list[bool] = []

    def visit(c: Clause) -> None:
        kind = getattr(c, "kind", None)
        if getattr(c, "field", None) == path and kind is not None:
            found.append(kind not in (TEXT, DYNAMIC))
        for sub in (
            *getattr(c, "must", ()),
            *getattr(c, "filter", ()),
            *getattr(c, "should", ()),
            *getattr(c, "clauses", ()),
        ):
            if isinstance(sub, Clause):
                visit(sub)

    visit(clause)
    return bool(found) and all(found)


def total_hits(total: int, track: bool | int) -> dict[str, Any] | None:
    """``hits.total`` as OpenSearch reports it: exact up to ``track``, then that many and ``gte``; None: not counted."""
    if track is True:
        return {"value": total, "relation": "eq"}
    if track is False or track < 0:
        return None
    if total > track:
        return {"value": track, "relation": "gte"}
    return {"value": total, "relation": "eq"}


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
    placed between ``_id`` and ``_score`` as OpenSearch orders them; a hit
    whose version is known gets them from it.
    """
    hits = []
    for h in result.hits:
        hit: dict[str, Any] = {"_index": index, "_id": h.id}
        if hit_extras is not None:
            hit.update(hit_extras(h.id))
        elif h.version is not None:  # per document here: _seq_no orders this document's writes
            hit.update({"_version": h.version, "_seq_no": h.version - 1, "_primary_term": 1})
        hit["_score"] = h.score
        if h.source is not None:
            hit["_source"] = h.source
        if h.highlight is not None:
            hit["highlight"] = h.highlight
        if h.sort is not None:
            hit["sort"] = list(h.sort)
        hits.append(hit)
    body: dict[str, Any] = {
        "took": int(took_ms),
        "timed_out": result.timed_out,
        "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
        "hits": {
            "total": total_hits(result.total, result.track_total_hits),
            "max_score": result.max_score,
            "hits": hits,
        },
    }
    if body["hits"]["total"] is None:
        del body["hits"]["total"]
    if result.aggregations is not None:
        body["aggregations"] = result.aggregations
    return body


def search(
    body: Mapping[str, Any] | None,
    docs: Iterable[Source],
    *,
    index: str,
    took_ms: int = 0,
    max_size: int = MAX_RESULT_WINDOW,
) -> dict[str, Any]:
    """Convenience: parse, execute and render in one call."""
    return search_response(execute(parse_search(body, max_size=max_size), docs), took_ms, index=index)
