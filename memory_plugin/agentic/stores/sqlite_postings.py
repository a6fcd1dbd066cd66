"""Postings of the embedded store: the exact values a ``term`` query can name, per container and memory type,
so that a query-DSL ``_search`` reads only the docs its required terms allow (``dsl.pushdown``) instead of
decoding every doc of the container.

A doc's postings are, for every field path under ``INDEXED_ROOTS`` (``namespace.session_id``, ``tags.topic``,
``session_id``, ...), the string values the DSL itself reads at that path (``field_values``): a ``term`` on
such a path with a plain string value matches only docs among that path's postings of the value, so the
candidates are always a superset of the matches, and the full query then decides.  They are written in the
transaction of the doc's insert or rewrite, and go with the doc (``ON DELETE CASCADE``).

``owner_id`` and ``memory_container_id`` are left out on purpose: every doc a search reads has the same
value there (searches are scoped by both), so their postings would select the whole container.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from memory_plugin.agentic.models import valid_unicode
from memory_plugin.agentic.stores.base import ExactTerms, StoredDoc, owner_key
from memory_plugin.auth import Principal
from memory_plugin.dsl.values import field_values
from memory_plugin.sqlite import run_script

#: Top-level fields (a path's first segment) whose exact values are indexed: the keyword fields and the
#: ``flat_object`` maps of ml-commons' memory indices that a client filters by.
INDEXED_ROOTS = frozenset(
    {
        "namespace",
        "tags",
        "metadata",
        "session_id",
        "payload_type",
        "checkpoint_id",
        "message_id",
        "strategy_id",
        "strategy_type",
        "memory_id",
        "action",
    }
)
#: Maps whose own path (every leaf of the map at once) is not indexed: a term on them scans.
MAP_ROOTS = frozenset({"namespace", "tags", "metadata"})


def indexed_path(path: str) -> bool:
    """Whether a term on ``path`` can be answered from the postings."""
    return path.split(".", 1)[0] in INDEXED_ROOTS and path not in MAP_ROOTS


def _node_paths(value: Any, path: str) -> Iterator[str]:
    """``path`` and every dotted path below it through objects (arrays are transparent, as in ``lookup``)."""
    yield path
    if isinstance(value, Mapping):
        for key, inner in value.items():
            yield from _node_paths(inner, f"{path}.{key}")
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _node_paths(item, path)


def postings(doc: Mapping[str, Any]) -> set[tuple[str, str]]:
    """``(path, value)`` for every indexed path of ``doc`` and string value the DSL reads there.  Every path a
    DSL lookup can resolve is a chain of the doc's keys, so a match on an indexed path is always among these."""
    paths: set[str] = set()
    for key, value in doc.items():
        if key.split(".", 1)[0] in INDEXED_ROOTS:
            paths.update(_node_paths(value, key))
    found: set[tuple[str, str]] = set()
    for path in paths - MAP_ROOTS:
        found.update((path, value) for value in field_values(doc, path) if isinstance(value, str))
    return found


#: Top-level numbers each posting carries, so that a page sorted by them is picked from the postings alone.
SORT_FIELDS = ("created_time", "last_updated_time")
#: Integers a double holds exactly: beyond, the DSL's float keys could tie where SQLite's integers do not.
_EXACT_FLOAT = 2**53


def schema_postings(connection: sqlite3.Connection) -> None:
    """Schema v4: the ``postings`` table, filled for every doc already stored (nothing is re-read later).  Each
    row also holds its doc's owner and sort numbers: counting and paging a session reads no doc."""
    run_script(
        connection,
        """
        CREATE TABLE postings (
            container_id TEXT NOT NULL,
            memory_type TEXT NOT NULL,
            field TEXT NOT NULL,
            value TEXT NOT NULL,
            seq INTEGER NOT NULL REFERENCES memories (seq) ON DELETE CASCADE,
            organization_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            created_time,
            last_updated_time,
            PRIMARY KEY (container_id, memory_type, field, value, seq)
        ) WITHOUT ROWID;
        CREATE INDEX postings_seq ON postings (seq);
        """,
    )
    rows = connection.execute(
        "SELECT seq, container_id, memory_type, organization_id, user_id, doc FROM memories ORDER BY seq"
    )
    for seq, container_id, memory_type, organization_id, user_id, doc in rows:
        _insert_postings(connection, seq, container_id, memory_type, (organization_id, user_id), json.loads(doc))


def schema_sort_indexes(connection: sqlite3.Connection) -> None:
    """Schema v5: a term's postings in the order of each sort number, so that a session's page is its first
    entries and its count stops at ``track_total_hits``, however long the session."""
    for field in SORT_FIELDS:
        connection.execute(
            f"CREATE INDEX postings_by_{field} ON postings "
            f"(container_id, memory_type, field, value, organization_id, user_id, {field}, seq)"
        )


def _sort_number(value: Any) -> int | float | None:
    """A sort field's value as the DSL orders it, when it is one number it orders exactly so."""
    if isinstance(value, int | float) and not isinstance(value, bool) and abs(value) < _EXACT_FLOAT:
        return value
    return None


def _insert_postings(
    c: sqlite3.Connection,
    seq: int,
    container_id: str,
    memory_type: str,
    owner: tuple[str, str],
    doc: Mapping[str, Any],
) -> None:
    numbers = tuple(_sort_number(doc.get(name)) for name in SORT_FIELDS)
    c.executemany(
        "INSERT OR IGNORE INTO postings VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (container_id, memory_type, valid_unicode(path), valid_unicode(value), seq, *owner, *numbers)
            for path, value in postings(doc)
        ],
    )


def index_postings(
    c: sqlite3.Connection,
    seq: int,
    container_id: str,
    memory_type: str,
    owner: tuple[str, str],
    doc: Mapping[str, Any],
    *,
    new: bool,
) -> None:
    """A doc's postings, replacing its earlier ones unless it is ``new``, in the caller's transaction."""
    if not new:
        c.execute("DELETE FROM postings WHERE seq = ?", (seq,))
    _insert_postings(c, seq, container_id, memory_type, owner, doc)


#: One value of one path, of the owner's docs: a prefix of the sort indexes.
_TERM = "container_id = ? AND memory_type = ? AND field = ? AND value = ? AND organization_id = ? AND user_id = ?"
#: One required term's postings of the owner's docs.
_POSTED = (
    "SELECT seq{columns} FROM postings WHERE container_id = ? AND memory_type = ? AND field IN "
    "(SELECT value FROM json_each(?)) AND value IN (SELECT value FROM json_each(?)) AND organization_id = ? "
    "AND user_id = ?"
)


def _posted(
    owner: Principal, container_id: str, memory_type: str, paths: Sequence[str], values: Sequence[str]
) -> list[Any]:
    return [
        container_id,
        memory_type,
        json.dumps([valid_unicode(p) for p in paths]),
        json.dumps([valid_unicode(v) for v in values]),
        *owner_key(owner),
    ]


def _candidates(owner: Principal, container_id: str, memory_type: str, required: ExactTerms) -> tuple[str, list[Any]]:
    """The owner's seqs with, for each ``(paths, values)``, a posting of one of the paths and one of the values."""
    selects, parameters = [], []
    for paths, values in required:
        selects.append(_POSTED.format(columns=""))
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
    if field in SORT_FIELDS:  # from the postings alone: the first term's, among the other terms' seqs
        (paths, values), rest = required[0], required[1:]
        more: list[Any] = []
        if rest:
            others, more = _candidates(owner, container_id, memory_type, rest)
        among = f" AND seq IN ({others})" if rest else ""
        if len(paths) == 1 and len(values) == 1:  # a posting per doc: the sort index holds count and page
            return _indexed_page(
                c, owner, container_id, memory_type, (paths[0], values[0]), among, more, sort, count_up_to
            )
        sql = _POSTED.format(columns=f", {field} AS key") + among
        parameters = [*_posted(owner, container_id, memory_type, paths, values), *more]
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
    if any(key is None or abs(key) >= _EXACT_FLOAT for key in numbers.values()):
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
    """One term's count and page read along ``postings_by_<field>`` in sort order: the page is its first
    ``limit`` entries and the count stops at ``count_up_to``, however many docs the term selects."""
    field, descending, limit = sort
    where, index = f"{_TERM}{among}", f"INDEXED BY postings_by_{field}"  # whatever the statistics say
    parameters = [container_id, memory_type, valid_unicode(term[0]), valid_unicode(term[1]), *owner_key(owner), *more]
    if c.execute(f"SELECT 1 FROM postings WHERE {where} AND {field} IS NULL LIMIT 1", parameters).fetchone():
        return None  # a doc with anything but a single number there: the DSL sorts
    bound = -1 if count_up_to is None else count_up_to
    (total,) = c.execute(
        f"SELECT count(*) FROM (SELECT 1 FROM postings {index} WHERE {where} LIMIT ?)", [*parameters, bound]
    ).fetchone()
    order = f"{field} {'DESC' if descending else 'ASC'}, seq"
    ranked = c.execute(f"SELECT seq FROM postings {index} WHERE {where} ORDER BY {order} LIMIT ?", [*parameters, limit])
    return total, sorted(seq for (seq,) in ranked)
