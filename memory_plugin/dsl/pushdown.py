"""Which exact values a search's every match must hold: what a store with postings can select its candidates by.

A store that indexes the exact string values of some fields can hand :func:`~memory_plugin.dsl.execute` only
the docs that hold them, instead of every doc, when the query *requires* them: a ``term``/``terms`` clause at
the top, or under ``bool.must``/``bool.filter`` (or a ``constant_score`` filter) of such a required clause,
never under ``should`` or ``must_not``.  The full query then runs on those candidates, so the matches are the
same; and this is only planned when nothing else the answer shows depends on the docs left out:

* no clause whose matches depend on the corpus (``fuzzy`` expands to the searched docs' terms);
* when scores are shown or filter by ``min_score``, no clause scoring by corpus statistics (BM25) outside
  filter context: a sort by fields only leaves ``_score`` null, and constant scores are the same anyway.

Totals and aggregations are over the matches, which are the same.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from memory_plugin.dsl.clauses import (
    BlendedTerm,
    Bool,
    Clause,
    ConstantScore,
    Disjunction,
    Exists,
    Ids,
    MatchAll,
    MatchNone,
    Pattern,
    Phrase,
    Range,
    Term,
    TermScore,
)
from memory_plugin.dsl.mapping import DYNAMIC, FLAT_OBJECT, KEYWORD
from memory_plugin.dsl.parse import SearchBody
from memory_plugin.dsl.values import as_float, parse_date, without_keyword_suffix

#: Required terms a store selects candidates by, at most: a few already select few docs, and SQLite compounds at
#: most 500 SELECTs while a query may hold 1,024 clauses.  Any subset still selects every match.
MAX_PUSHED_TERMS = 16
#: Clauses that match a doc by the doc alone, and score it by nothing else either.
_CONSTANT_LEAVES = (MatchAll, MatchNone, Range, Exists, Pattern, Ids)
#: Clauses that match a doc by the doc alone but score it by the corpus' statistics.
_CORPUS_SCORED = (TermScore, Phrase, BlendedTerm)


@dataclass(frozen=True)
class RequiredTerms:
    """Every match holds one of ``values`` at one of ``paths`` (a ``.keyword`` path may read its base path)."""

    paths: tuple[str, ...]
    values: tuple[str, ...]


def _plain(value: object) -> bool:
    """A value a ``term`` compares as nothing but the same string: not a number, boolean or date in disguise
    (``values_equal`` coerces those)."""
    return (
        isinstance(value, str)
        and value.lower() not in ("true", "false")
        and as_float(value) is None
        and parse_date(value) is None
    )


def _matches_by_doc(clause: Clause) -> bool:
    """Whether ``clause`` matches a doc whatever the other docs are."""
    if isinstance(clause, Bool):
        return all(_matches_by_doc(c) for c in (*clause.must, *clause.filter, *clause.should, *clause.must_not))
    if isinstance(clause, Disjunction):
        return all(_matches_by_doc(c) for c in clause.clauses)
    if isinstance(clause, ConstantScore):
        return _matches_by_doc(clause.filter)
    return isinstance(clause, (*_CONSTANT_LEAVES, *_CORPUS_SCORED, Term))


def _scores_by_doc(clause: Clause) -> bool:
    """Whether ``clause``'s score is the same whatever the other docs are (filter context is not scored)."""
    if isinstance(clause, Bool):
        return all(_scores_by_doc(c) for c in (*clause.must, *clause.should))
    if isinstance(clause, Disjunction):
        return all(_scores_by_doc(c) for c in clause.clauses)
    if isinstance(clause, Term):
        return clause.constant or clause.kind not in (KEYWORD, FLAT_OBJECT)
    return isinstance(clause, (*_CONSTANT_LEAVES, ConstantScore))


def _required(clause: Clause, indexed: Callable[[str], bool], out: list[RequiredTerms]) -> None:
    if isinstance(clause, Bool):
        for inner in (*clause.must, *clause.filter):
            _required(inner, indexed, out)
    elif isinstance(clause, ConstantScore):
        _required(clause.filter, indexed, out)
    elif (
        isinstance(clause, Term)
        and clause.field != "_id"
        and not clause.case_insensitive
        and clause.kind in (DYNAMIC, KEYWORD, FLAT_OBJECT)
        and clause.values
        and all(_plain(value) for value in clause.values)
    ):
        # ``field_values`` reads ``x.keyword`` as ``x`` when the doc has no ``x.keyword``
        paths = tuple(dict.fromkeys((clause.field, without_keyword_suffix(clause.field))))
        if all(indexed(path) for path in paths):
            out.append(RequiredTerms(paths, tuple(dict.fromkeys(str(value) for value in clause.values))))


def required_terms(
    query: SearchBody, indexed: Callable[[str], bool], *, scores_shown: bool = True
) -> list[RequiredTerms]:
    """The exact values on ``indexed`` paths that every match of ``query`` holds, when candidates selected by
    them give the same answer as every doc; empty when they would not (then every doc is evaluated).
    ``scores_shown``: False when only which docs match counts (a delete by query)."""
    if not _matches_by_doc(query.query):
        return []
    needs_scores = scores_shown and (query.scores_tracked or query.min_score is not None)
    if needs_scores and not _scores_by_doc(query.query):
        return []
    found: list[RequiredTerms] = []
    _required(query.query, indexed, found)
    return found[:MAX_PUSHED_TERMS]


@dataclass(frozen=True)
class SortedPage:
    """A query whose matches are exactly the docs its required terms select, sorted by one top-level field only:
    a store can count them and hand over just the first ``limit`` by that field (oldest first among equals),
    when every one of them holds a single number there.  ``count_up_to``: how far counting must go for
    ``hits.total`` to show the same (None: all; 0: it is not shown)."""

    required: tuple[RequiredTerms, ...]
    field: str
    descending: bool
    limit: int
    count_up_to: int | None = None


def count_up_to(track_total_hits: bool | int) -> int | None:
    """How many matches to count so that ``total_hits`` renders as for all of them: one past an integer bound
    (then ``gte``), all for true, none when the total is not shown."""
    if track_total_hits is True:
        return None
    if track_total_hits is False or track_total_hits < 0:
        return 0
    return track_total_hits + 1


def _exact(clause: Clause, indexed: Callable[[str], bool]) -> bool:
    """Whether ``clause`` matches exactly the docs its required terms select: nothing but such terms, under
    ``must``/``filter`` of bools (or a ``constant_score``), without the ``.keyword`` fallback."""
    if isinstance(clause, Bool):
        inner = (*clause.must, *clause.filter)
        return bool(inner) and not (clause.should or clause.must_not) and all(_exact(c, indexed) for c in inner)
    if isinstance(clause, ConstantScore):
        return _exact(clause.filter, indexed)
    found: list[RequiredTerms] = []
    _required(clause, indexed, found)
    return len(found) == 1 and found[0].paths == (clause.field,) if isinstance(clause, Term) else False


def sorted_page(query: SearchBody, indexed: Callable[[str], bool]) -> SortedPage | None:
    """The page a store can pick itself (``SortedPage``), or None when the query needs its matches evaluated."""
    if (
        len(query.sort) != 1
        or query.aggregations
        or query.search_after is not None
        or query.min_score is not None
        or query.highlight is not None
        or not _exact(query.query, indexed)
    ):
        return None
    (spec,) = query.sort
    if spec.missing != "_last" or not spec.field or "." in spec.field or spec.field.startswith("_"):
        return None
    found: list[RequiredTerms] = []
    _required(query.query, indexed, found)
    if len(found) > MAX_PUSHED_TERMS:  # its page is exact only when selected by every one of them
        return None
    return SortedPage(
        tuple(found), spec.field, spec.order == "desc", query.from_ + query.size, count_up_to(query.track_total_hits)
    )
