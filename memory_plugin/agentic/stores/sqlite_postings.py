"""Postings of the embedded store: the exact values a ``term`` query can name, per container and memory type,
so that a query-DSL ``_search`` reads only the docs its required terms allow (``dsl.pushdown``) instead of
decoding every doc of the container.

A doc's postings are, for every field path under ``INDEXED_ROOTS`` (``namespace.session_id``, ``tags.topic``,
``session_id``, ...), the string values the DSL itself reads at that path (``field_values``): a ``term`` on
such a path with a plain string value matches only docs among that path's postings of the value, so the
candidates are always a superset of the matches, and the full query then decides.  They are written in the
transaction of the doc's insert or rewrite, and go with the doc (``ON DELETE CASCADE``).

A container's memory type has postings from the first search that can use them (``sqlite_posting_reads``),
as a database builds an index when it is first asked for: adds into a container no term query reads write
none (a conversational add's five postings cost as much writer time as the rest of the add).

``owner_id`` and ``memory_container_id`` are left out on purpose: every doc a search reads has the same
value there (searches are scoped by both), so their postings would select the whole container.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from memory_plugin.agentic.models import valid_unicode
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
#: Docs of a container type whose postings one write builds, at most, when its first search asks for them.
POST_BATCH = 2000
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
        _post_new(connection, seq, (container_id, memory_type, organization_id, user_id), json.loads(doc))
        _move_due(connection, seq)


def schema_posted_scopes(connection: sqlite3.Connection) -> None:
    """Schema v7: the container types that have postings (``posted_scopes``); every one already stored has."""
    run_script(
        connection,
        """
        CREATE TABLE posted_scopes (
            container_id TEXT NOT NULL,
            memory_type TEXT NOT NULL,
            started INTEGER NOT NULL,
            through INTEGER NOT NULL,
            PRIMARY KEY (container_id, memory_type)
        ) WITHOUT ROWID;
        INSERT INTO posted_scopes SELECT DISTINCT container_id, memory_type, 0, 0 FROM memories;
        """,
    )


def _scope(c: sqlite3.Connection, container_id: str, memory_type: str) -> tuple[int, int] | None:
    """A posted scope's ``started`` and ``through``: the last seq when its postings were asked for, and the
    last seq of its docs before then that has them.  A doc of the scope has its postings when ``seq <=
    through`` or ``seq > started`` (written since); the scope's postings are whole once ``through`` reaches
    ``started``."""
    row = c.execute(
        "SELECT started, through FROM posted_scopes WHERE container_id = ? AND memory_type = ?",
        (container_id, memory_type),
    ).fetchone()
    return None if row is None else (row[0], row[1])


def scope_posted(c: sqlite3.Connection, container_id: str, memory_type: str) -> bool:
    """Whether every doc of the container's type has its postings: a search may read them."""
    scope = _scope(c, container_id, memory_type)
    return scope is not None and scope[1] >= scope[0]


def start_posting(c: sqlite3.Connection, container_id: str, memory_type: str) -> None:
    """The scope is posted from now on: every doc written from here has its postings (a write)."""
    c.execute(
        "INSERT OR IGNORE INTO posted_scopes SELECT ?, ?, coalesce(max(seq), 0), 0 FROM memories",
        (container_id, memory_type),
    )


def unposted_seqs(c: sqlite3.Connection, container_id: str, memory_type: str) -> list[int]:
    """The seqs of the scope's docs that have no postings yet, in order (a read, after ``start_posting``)."""
    scope = _scope(c, container_id, memory_type)
    if scope is None:
        return []
    started, through = scope
    rows = c.execute(
        "SELECT seq FROM memories WHERE container_id = ? AND memory_type = ? AND seq > ? AND seq <= ? ORDER BY seq",
        (container_id, memory_type, through, started),
    )
    return [seq for (seq,) in rows]


def post_docs(c: sqlite3.Connection, container_id: str, memory_type: str, seqs: Sequence[int], last: bool) -> None:
    """The postings of the scope's docs ``seqs`` (those still stored, as they are now), and how far the scope
    is posted: through the last of them, or whole when they are ``last`` (a write).  Those another search
    posted meanwhile are skipped: searches that build one scope at once do its work once between them."""
    scope = _scope(c, container_id, memory_type)
    if scope is None:  # the container is gone
        return
    started, through = scope
    rows = c.execute(
        "SELECT seq, organization_id, user_id, doc FROM memories WHERE seq IN (SELECT value FROM json_each(?)) "
        "AND container_id = ? AND memory_type = ?",
        (json.dumps([seq for seq in seqs if through < seq <= started]), container_id, memory_type),
    )
    for seq, organization_id, user_id, doc in rows.fetchall():
        source = json.loads(doc)
        term = (container_id, memory_type, organization_id, user_id)
        _insert(c, seq, _key(source), term, _pairs(source))
    c.execute(
        "UPDATE posted_scopes SET through = max(through, CASE WHEN ? THEN started ELSE ? END) "
        "WHERE container_id = ? AND memory_type = ?",
        (last, seqs[-1] if seqs else 0, container_id, memory_type),
    )


def _key(doc: Mapping[str, Any]) -> Any:
    """What the doc's postings carry: its ``created_time``, when that is one exact number."""
    created = doc.get(SORT_FIELD)
    return created if exact_number(created) else NOT_A_NUMBER


def _pairs(doc: Mapping[str, Any]) -> set[tuple[str, str]]:
    return {(valid_unicode(path), valid_unicode(value)) for path, value in postings(doc)}


def exact_number(value: Any) -> bool:
    """Whether the DSL orders ``value`` as SQLite does: one number, exactly."""
    return isinstance(value, int | float) and not isinstance(value, bool) and abs(value) < _EXACT_FLOAT


#: Pairs per statement: two host parameters each, well under SQLite's limit whatever a doc holds.
_PAIRS = 400


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
    """A doc's postings, replacing its earlier ones unless it is ``new``, in the caller's transaction, when its
    scope is posted (a doc its scope's postings have not reached yet gets them when they do).  A rewrite that
    keeps them (a session's touch moves only ``last_updated_time``) writes none."""
    scope = _scope(c, container_id, memory_type)
    if new:
        if scope is not None:
            _post_new(c, seq, (container_id, memory_type, *owner), doc)
        _move_due(c, seq)
        return
    if scope is None or scope[1] < seq <= scope[0]:
        return
    key, pairs = _key(doc), _pairs(doc)
    held = c.execute(
        "SELECT t.field, t.value, p.created_time FROM postings AS p JOIN posting_terms AS t USING (term_id) "
        "WHERE p.seq = ? UNION ALL SELECT field, value, created_time FROM recent_postings WHERE seq = ?",
        (seq, seq),
    ).fetchall()
    if len(held) == len(pairs) and all((field, value) in pairs and at == key for field, value, at in held):
        return
    c.execute("DELETE FROM postings WHERE seq = ?", (seq,))
    c.execute("DELETE FROM recent_postings WHERE seq = ?", (seq,))
    _insert(c, seq, key, (container_id, memory_type, *owner), pairs)


def _post_new(c: sqlite3.Connection, seq: int, term: tuple[str, str, str, str], doc: Mapping[str, Any]) -> None:
    """A new doc's postings (``term``: container, type, organisation, user)."""
    key, pairs = _key(doc), _pairs(doc)
    if len(pairs) <= RECENT_PAIRS:
        c.executemany(
            "INSERT INTO recent_postings VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [(seq, field, value, key, *term) for field, value in pairs],
        )
    else:  # a doc of many values: in the term-ordered table at once, so that no read scans them
        _insert(c, seq, key, term, pairs)


def _move_due(c: sqlite3.Connection, seq: int) -> None:
    """The recent postings move when a new doc's seq is a multiple of ``RECENT_DOCS``, whatever its scope."""
    if seq % RECENT_DOCS == 0:
        _move_recent(c)


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
