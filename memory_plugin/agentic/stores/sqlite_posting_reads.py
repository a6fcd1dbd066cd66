"""Reads of the embedded store's postings (``sqlite_postings``): the docs a query's required terms select, and a
page sorted by a top-level number picked from them, over a container type whose postings its first such read
builds (``read_posted``)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

from memory_plugin.agentic.models import valid_unicode
from memory_plugin.agentic.stores.base import ExactTerms, StoredDoc, owner_key
from memory_plugin.agentic.stores.sqlite_postings import (
    NOT_A_NUMBER,
    POST_BATCH,
    SORT_FIELD,
    exact_number,
    post_docs,
    scope_posted,
    start_posting,
    unposted_seqs,
)
from memory_plugin.auth import Principal
from memory_plugin.sqlite import Database

T = TypeVar("T")
#: What ``read_posted``'s first read answers when the container type has no postings yet.
_UNPOSTED = object()


async def read_posted(db: Database, container_id: str, memory_type: str, read: Callable[[sqlite3.Connection], T]) -> T:
    """``read`` of the container type's postings, which its first such read builds (``post_scope``)."""
    found = await db.read(lambda c: read(c) if scope_posted(c, container_id, memory_type) else _UNPOSTED)
    if found is _UNPOSTED:
        await post_scope(db, container_id, memory_type)
        found = await db.read(read)
    return cast(T, found)


async def post_scope(db: Database, container_id: str, memory_type: str) -> None:
    """The container type's postings: every doc written from now on gets its own, and the docs so far get
    theirs ``POST_BATCH`` at a time, each batch its own write (other writes go between them).  A search
    that stops waiting leaves the rest to the next."""
    await db.write(lambda c: start_posting(c, container_id, memory_type))
    seqs = await db.read(lambda c: unposted_seqs(c, container_id, memory_type))
    for start in range(0, max(len(seqs), 1), POST_BATCH):
        batch, last = seqs[start : start + POST_BATCH], start + POST_BATCH >= len(seqs)

        def post(c: sqlite3.Connection, batch: list[int] = batch, last: bool = last) -> None:
            post_docs(c, container_id, memory_type, batch, last)

        await db.write(post)


#: One value of one path, of one owner's docs of a type in a container.
_TERM = "container_id = ? AND memory_type = ? AND field = ? AND value = ? AND organization_id = ? AND user_id = ?"

#: One of the paths and one of the values, of the owner's docs of a type in a container (both tables name a
#: term by these columns).  Parameters: container, type, paths (JSON), values (JSON), organisation, user.
_OWNED_TERM = (
    "container_id = ? AND memory_type = ? AND field IN (SELECT value FROM json_each(?)) "
    "AND value IN (SELECT value FROM json_each(?)) AND organization_id = ? AND user_id = ?"
)
#: One required term's postings of the owner's docs, in both tables, each ``{among}`` (an extra condition).
_POSTED = (
    "SELECT * FROM (SELECT seq{columns} FROM postings WHERE term_id IN "
    f"(SELECT term_id FROM posting_terms WHERE {_OWNED_TERM}){{among}} UNION ALL "
    f"SELECT seq{{columns}} FROM recent_postings WHERE {_OWNED_TERM}{{among}})"
)


def _posted(
    owner: Principal,
    container_id: str,
    memory_type: str,
    paths: Sequence[str],
    values: Sequence[str],
    more: Sequence[Any] = (),
) -> list[Any]:
    """``_POSTED``'s parameters, ``more`` those of its ``{among}``."""
    terms = [
        container_id,
        memory_type,
        json.dumps([valid_unicode(p) for p in paths]),
        json.dumps([valid_unicode(v) for v in values]),
        *owner_key(owner),
    ]
    return [*terms, *more, *terms, *more]


def _candidates(owner: Principal, container_id: str, memory_type: str, required: ExactTerms) -> tuple[str, list[Any]]:
    """The owner's seqs with, for each ``(paths, values)``, a posting of one of the paths and one of the values."""
    selects, parameters = [], []
    for paths, values in required:
        selects.append(_POSTED.format(columns="", among=""))
        parameters += _posted(owner, container_id, memory_type, paths, values)
    return " INTERSECT ".join(selects), parameters


#: The owner's docs among candidates: the candidates drive, each a rowid lookup (left to itself, SQLite walks
#: every row of the container's type instead).
_OWNED = (
    "FROM ({candidates}) AS candidates CROSS JOIN memories AS m ON m.seq = candidates.seq "
    "WHERE m.container_id = ? AND m.memory_type = ? AND m.organization_id = ? AND m.user_id = ?"
)
_DOC = "SELECT m.seq, m.memory_id, m.doc, m.version, m.seq_no "


def matching_docs(
    c: sqlite3.Connection,
    owner: Principal,
    container_id: str,
    memory_type: str,
    required: ExactTerms,
    row_doc: Callable[[sqlite3.Row, str], StoredDoc],
) -> list[StoredDoc]:
    """The owner's docs of a type in the container with, for each ``(paths, values)``, a posting of one of the
    paths and one of the values; oldest first, as ``docs`` lists them (the DSL breaks ties by that order)."""
    candidates, parameters = _candidates(owner, container_id, memory_type, required)
    sql = _DOC + _OWNED.format(candidates=candidates) + " ORDER BY m.seq"
    rows = c.execute(sql, [*parameters, container_id, memory_type, *owner_key(owner)])
    return [row_doc(row, "memory_id") for row in rows]


def sorted_page(
    c: sqlite3.Connection,
    owner: Principal,
    container_id: str,
    memory_type: str,
    required: ExactTerms,
    sort: tuple[str, bool, int],
    count_up_to: int | None,
    row_doc: Callable[[sqlite3.Row, str], StoredDoc],
) -> tuple[int, list[StoredDoc]] | None:
    """How many of the owner's docs ``matching_docs`` selects, and the first ``limit`` of them by a top-level
    ``field`` (``sort``: field, descending, limit; oldest first among equals), oldest first; None when one of
    them holds anything but a single number there (the DSL then sorts them).  The count may stop at
    ``count_up_to`` (None: all)."""
    found = _sorted_seqs(c, owner, container_id, memory_type, required, sort, count_up_to)
    if found is None:
        return None
    total, page = found
    rows = c.execute(
        "SELECT seq, memory_id, doc, version, seq_no FROM memories WHERE seq IN (SELECT value FROM json_each(?)) "
        "ORDER BY seq",
        (json.dumps(page),),
    )
    return total, [row_doc(row, "memory_id") for row in rows]


def _sorted_seqs(
    c: sqlite3.Connection,
    owner: Principal,
    container_id: str,
    memory_type: str,
    required: ExactTerms,
    sort: tuple[str, bool, int],
    count_up_to: int | None,
) -> tuple[int, list[int]] | None:
    """``sorted_page``'s count (up to ``count_up_to``) and page, oldest first."""
    field, descending, limit = sort
    if field == SORT_FIELD:  # from the postings alone: the first term's, among the other terms' seqs
        (paths, values), rest = required[0], required[1:]
        more: list[Any] = []
        if rest:
            others, more = _candidates(owner, container_id, memory_type, rest)
        among = f" AND +seq IN ({others})" if rest else ""  # "+": the term's key drives, never postings_seq
        if len(paths) == 1 and len(values) == 1:  # a posting per doc: the term's key holds count and page
            return _indexed_page(
                c, owner, container_id, memory_type, (paths[0], values[0]), among, more, sort, count_up_to
            )
        sql = _POSTED.format(columns=f", {SORT_FIELD} AS key", among=among)
        parameters = _posted(owner, container_id, memory_type, paths, values, more)
        numbers = dict(c.execute(sql, parameters).fetchall())  # a doc may have several of the term's postings
    else:
        candidates, parameters = _candidates(owner, container_id, memory_type, required)
        path = "$." + json.dumps(field)
        try:
            keys = c.execute(
                f"SELECT m.seq, json_type(m.doc, ?), json_extract(m.doc, ?) {_OWNED.format(candidates=candidates)}",
                [path, path, *parameters, container_id, memory_type, *owner_key(owner)],
            ).fetchall()
        except sqlite3.OperationalError:  # a doc SQLite's JSON does not read (Python writes NaN): the DSL sorts
            return None
        numbers = {seq: key if kind in ("integer", "real") else None for seq, kind, key in keys}
    if not all(exact_number(key) for key in numbers.values()):
        return None
    ranked_keys = sorted(numbers.items(), key=lambda row: (-row[1] if descending else row[1], row[0]))
    return len(numbers), sorted(seq for seq, _ in ranked_keys[:limit])


def _indexed_page(
    c: sqlite3.Connection,
    owner: Principal,
    container_id: str,
    memory_type: str,
    term: tuple[str, str],
    among: str,
    more: list[Any],
    sort: tuple[str, bool, int],
    count_up_to: int | None,
) -> tuple[int, list[int]] | None:
    """One term's count and page read along its postings' key, in ``created_time`` order: the page is its
    first ``limit`` entries and the count stops at ``count_up_to``, however many docs the term selects."""
    _, descending, limit = sort
    key = [container_id, memory_type, valid_unicode(term[0]), valid_unicode(term[1]), *owner_key(owner)]
    recent = c.execute(f"SELECT {SORT_FIELD}, seq FROM recent_postings WHERE {_TERM}{among}", [*key, *more]).fetchall()
    if any(isinstance(number, str) for number, _ in recent):
        return None  # a doc with anything but one exact number there: the DSL sorts
    row = c.execute(f"SELECT term_id FROM posting_terms WHERE {_TERM}", key).fetchone()
    moved, ranked = 0, recent  # the recent ones, and the moved ones' first entries
    if row is not None:
        where, parameters = f"term_id = ?{among}", [row[0], *more]
        unsure = f"SELECT 1 FROM postings WHERE term_id = ? AND {SORT_FIELD} >= ?{among} LIMIT 1"
        if c.execute(unsure, [row[0], NOT_A_NUMBER, *more]).fetchone():
            return None
        counted = f"SELECT count(*) FROM (SELECT 1 FROM postings WHERE {where} LIMIT ?)"
        (moved,) = c.execute(counted, [*parameters, -1 if count_up_to is None else count_up_to]).fetchone()
        order = f"{SORT_FIELD} {'DESC' if descending else 'ASC'}, seq"
        sql = f"SELECT {SORT_FIELD}, seq FROM postings WHERE {where} ORDER BY {order} LIMIT ?"
        ranked = [*recent, *c.execute(sql, [*parameters, limit])]
    total = moved + len(recent) if count_up_to is None else min(moved + len(recent), count_up_to)
    ranked.sort(key=lambda row: (-row[0] if descending else row[0], row[1]))
    return total, sorted(seq for _, seq in ranked[:limit])
