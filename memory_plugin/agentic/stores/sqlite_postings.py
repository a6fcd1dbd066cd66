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
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from memory_plugin.agentic.models import valid_unicode
from memory_plugin.agentic.stores.base import ExactTerms, StoredDoc, owner_key
from memory_plugin.auth import Principal
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


def postings(doc: Mapping[str, Any]) -> set[tuple[str, str]]:
    """``(path, value)`` for every indexed path of ``doc`` and string value the DSL reads there: each string
    leaf under each of the paths that lead to it (arrays are transparent, and a path holding an object reads
    every leaf below it, as ``field_values`` does).  Every path a DSL lookup can resolve is a chain of the
    doc's keys, so a match on an indexed path is always among these."""
    found: set[tuple[str, str]] = set()

    def walk(value: Any, paths: tuple[str, ...]) -> None:
        if isinstance(value, str):
            found.update((path, value) for path in paths if path not in MAP_ROOTS)
        elif isinstance(value, Mapping):
            for key, inner in value.items():
                walk(inner, (*paths, f"{paths[-1]}.{key}"))
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item, paths)

    for key, value in doc.items():
        if key.partition(".")[0] not in INDEXED_ROOTS:
            continue
        if isinstance(value, str):  # the usual shapes first: a string, a map of strings (``namespace``)
            if key not in MAP_ROOTS:
                found.add((key, value))
        elif type(value) is dict and all(type(inner) is str for inner in value.values()):
            found.update((f"{key}.{inner_key}", inner) for inner_key, inner in value.items())
            if key not in MAP_ROOTS:
                found.update((key, inner) for inner in value.values())
        else:
            walk(value, (key,))
    return found


#: The one number each posting carries, so that a page sorted by it is picked from the postings alone (the
#: order the LangGraph checkpointer and the Strands client load a session in).
SORT_FIELD = "created_time"
#: What a posting carries for a doc without one exact number there: text sorts after every number in SQLite,
#: so one seek at the end of a term's postings finds it.
NOT_A_NUMBER = ""
#: New docs whose postings wait in ``recent_postings``, at most: those of every doc since the last seq that is a
#: multiple of it.  They are in the order of their docs, so a commit dirties the table's last page or two; a
#: read scans them all (about 0.1 ms for this many conversational adds).
RECENT_DOCS = 512
#: Postings of a new doc that wait with the recent ones, at most: however many values a caller sends, a read
#: scans at most ``RECENT_DOCS`` times this many recent postings.
RECENT_PAIRS = 16
#: Integers a double holds exactly: beyond, the DSL's float keys could tie where SQLite's integers do not.
_EXACT_FLOAT = 2**53


def schema_retired(connection: sqlite3.Connection) -> None:
    """Schemas v4 and v5 held the postings that v6 replaces (a row of every string per posting, in four
    B-trees): a database still before them goes straight to v6's."""


def schema_postings(connection: sqlite3.Connection) -> None:
    """Schema v6: the postings of every doc already stored (nothing is re-read later), narrow rows that name
    their term by id.  A term is one value of one path of one owner's docs of a type in a container, so
    counting and paging a session reads no doc; a posting's key carries its doc's ``created_time``, so a
    term's postings are a session in that order.  A term goes with its last posting (a trigger), so that
    the dictionary does not keep the ids of sessions long forgotten.

    A new doc's postings are written to ``recent_postings``, with their terms spelled out, and moved to
    ``postings`` ``RECENT_DOCS`` docs at a time, their terms named then, as Lucene flushes a segment: an add
    is one insert at the end of a small table, whatever its terms, not a write at the end of each of its
    terms' postings (nor a dictionary lookup).  A rewrite's go straight to ``postings``: a (term, doc) is
    in one table or the other."""
    run_script(
        connection,
        """
        DROP TABLE IF EXISTS postings;
        CREATE TABLE posting_terms (
            term_id INTEGER PRIMARY KEY,
            container_id TEXT NOT NULL,
            memory_type TEXT NOT NULL,
            field TEXT NOT NULL,
            value TEXT NOT NULL,
            organization_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            UNIQUE (container_id, memory_type, field, value, organization_id, user_id)
        );
        CREATE TABLE postings (
            term_id INTEGER NOT NULL,
            created_time NOT NULL,
            seq INTEGER NOT NULL REFERENCES memories (seq) ON DELETE CASCADE,
            PRIMARY KEY (term_id, created_time, seq)
        ) WITHOUT ROWID;
        CREATE INDEX postings_seq ON postings (seq);
        CREATE TABLE recent_postings (
            seq INTEGER NOT NULL REFERENCES memories (seq) ON DELETE CASCADE,
            field TEXT NOT NULL,
            value TEXT NOT NULL,
            created_time NOT NULL,
            container_id TEXT NOT NULL,
            memory_type TEXT NOT NULL,
            organization_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            PRIMARY KEY (seq, field, value)
        ) WITHOUT ROWID;
        """,
    )
    connection.execute(  # one statement, whose body run_script would split
        "CREATE TRIGGER posting_terms_unused AFTER DELETE ON postings "
        "WHEN NOT EXISTS (SELECT 1 FROM postings WHERE term_id = OLD.term_id) "
        "BEGIN DELETE FROM posting_terms WHERE term_id = OLD.term_id; END"
    )
    rows = connection.execute(
        "SELECT seq, container_id, memory_type, organization_id, user_id, doc FROM memories ORDER BY seq"
    )
    for seq, container_id, memory_type, organization_id, user_id, doc in rows:
        index_postings(
            connection, seq, container_id, memory_type, (organization_id, user_id), json.loads(doc), new=True
        )


def _exact(value: Any) -> bool:
    """Whether the DSL orders ``value`` as SQLite does: one number, exactly."""
    return isinstance(value, int | float) and not isinstance(value, bool) and abs(value) < _EXACT_FLOAT


#: Pairs per statement: two host parameters each, well under SQLite's limit whatever a doc holds.
_PAIRS = 400
#: One value of one path, of one owner's docs of a type in a container.
_TERM = "container_id = ? AND memory_type = ? AND field = ? AND value = ? AND organization_id = ? AND user_id = ?"


def _insert(
    c: sqlite3.Connection,
    seq: int,
    key: Any,
    term: tuple[str, str, str, str],
    pairs: set[tuple[str, str]],
) -> None:
    """The postings of ``pairs`` in ``postings`` (a rewrite's, or a new doc's beyond ``RECENT_PAIRS``; ``term``:
    container, type, organisation, user), their terms added on first use: one statement per ``_PAIRS`` pairs
    when the terms are known."""
    ordered = sorted(pairs)
    for start in range(0, len(ordered), _PAIRS):
        batch = ordered[start : start + _PAIRS]
        values = ", ".join("(?, ?)" for _ in batch)
        flat = [part for pair in batch for part in pair]
        posted = (
            f"INSERT OR IGNORE INTO postings SELECT t.term_id, ?, ? FROM (VALUES {values}) AS p "
            "JOIN posting_terms AS t ON t.container_id = ? AND t.memory_type = ? AND t.field = p.column1 "
            "AND t.value = p.column2 AND t.organization_id = ? AND t.user_id = ?"
        )
        if c.execute(posted, [key, seq, *flat, *term]).rowcount == len(batch):
            continue
        c.execute(  # the terms first seen here, then their postings
            "INSERT OR IGNORE INTO posting_terms (container_id, memory_type, organization_id, user_id, field, value) "
            f"SELECT ?, ?, ?, ?, column1, column2 FROM (VALUES {values})",
            [*term, *flat],
        )
        c.execute(posted, [key, seq, *flat, *term])


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
    """A doc's postings, replacing its earlier ones unless it is ``new``, in the caller's transaction.  A
    rewrite that keeps them (a session's touch moves only ``last_updated_time``) writes none."""
    created = doc.get(SORT_FIELD)
    key = created if _exact(created) else NOT_A_NUMBER
    pairs = {(valid_unicode(path), valid_unicode(value)) for path, value in postings(doc)}
    term = (container_id, memory_type, *owner)
    if new:
        if len(pairs) <= RECENT_PAIRS:
            c.executemany(
                "INSERT INTO recent_postings VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(seq, field, value, key, *term) for field, value in pairs],
            )
        else:  # a doc of many values: in the term-ordered table at once, so that no read scans them
            _insert(c, seq, key, term, pairs)
        if seq % RECENT_DOCS == 0:
            _move_recent(c)
        return
    held = c.execute(
        "SELECT t.field, t.value, p.created_time FROM postings AS p JOIN posting_terms AS t USING (term_id) "
        "WHERE p.seq = ? UNION ALL SELECT field, value, created_time FROM recent_postings WHERE seq = ?",
        (seq, seq),
    ).fetchall()
    if len(held) == len(pairs) and all((field, value) in pairs and at == key for field, value, at in held):
        return
    c.execute("DELETE FROM postings WHERE seq = ?", (seq,))
    c.execute("DELETE FROM recent_postings WHERE seq = ?", (seq,))
    _insert(c, seq, key, term, pairs)


_TERM_COLUMNS = "container_id, memory_type, field, value, organization_id, user_id"


def _move_recent(c: sqlite3.Connection) -> None:
    """The recent postings into ``postings``, their terms named (added on first use), in three statements."""
    c.execute(
        f"INSERT OR IGNORE INTO posting_terms ({_TERM_COLUMNS}) SELECT {_TERM_COLUMNS} FROM recent_postings "
        "ORDER BY container_id, memory_type, field, value"
    )
    c.execute(
        "INSERT INTO postings SELECT t.term_id, r.created_time, r.seq FROM recent_postings AS r "
        f"JOIN posting_terms AS t USING ({_TERM_COLUMNS})"
    )
    c.execute("DELETE FROM recent_postings")


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
    if not all(_exact(key) for key in numbers.values()):
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
