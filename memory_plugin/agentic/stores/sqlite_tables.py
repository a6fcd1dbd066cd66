"""The embedded agentic store's tables, and the statements its reads and writes share.

Embedded layout (one SQLite file, WAL, ``synchronous=FULL``):

* ``containers`` and ``memories`` hold the documents as JSON; ``memories``
  has every type (sessions, working, long-term, history), keyed by
  ``(container_id, type, id)`` and by an AUTOINCREMENT ``seq`` that is the
  vector id and the rowid in FTS5.
* ``terms`` indexes long-term ``namespace.*``, ``tags.*``, ``strategy_id`` and
  ``namespace_size`` for the exact term filters of k-NN and BM25; ``postings``
  (``sqlite_postings``) every type's exact values by container, for the
  query-DSL ``_search``.
* ``lt_fts`` is an FTS5 table of long-term ``memory`` text (BM25), written only through ``fts.fts_put`` and
  ``fts.fts_delete`` so that the in-memory BM25 mirror (``bm25``) follows every committed change.
* ``pending = 1`` marks a long-term memory whose embedding is not computed
  yet; ``infer_jobs`` holds inferring adds not yet applied.  Both are written
  in the same transaction as what caused them, and drained by background
  tasks that resume at start, so a SIGKILL loses nothing.
* Vectors are stored in SQLite (float32 BLOB, L2-normalised) and mirrored
  per container in a matrix, rebuilt at open: k-NN is exact, one BLAS
  matrix-vector product (over the term-filter candidates only, when there are
  filters).  A faiss flat index was measured 2-5x slower for one query at 100k
  vectors on this machine (it runs one query on one core), and HNSW would give
  up exactness for a size where exact search is fast enough.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from memory_plugin.agentic.models import LONG_TERM, SESSIONS, flat_object_terms, valid_unicode
from memory_plugin.agentic.stores.base import LongTermScope, StoredDoc, memory_text, owner_id, owner_key, owner_of
from memory_plugin.agentic.stores.bm25 import LexicalIndex
from memory_plugin.agentic.stores.fts import (
    MARK,
    Tokenizer,
    fts_delete,
    fts_put,
    fts_query,
    fts_ranked,
    query_words,
    totals,
)
from memory_plugin.agentic.stores.sources import SOURCES, sources_of, without_sources
from memory_plugin.agentic.stores.sqlite_postings import (
    index_postings,
    schema_posted_scopes,
    schema_postings,
    schema_retired,
)
from memory_plugin.auth import Principal
from memory_plugin.sorted_ids import sorted_distinct
from memory_plugin.sqlite import run_script


def _schema_v1(connection: sqlite3.Connection) -> None:
    run_script(
        connection,
        """
        CREATE TABLE containers (
            container_id TEXT PRIMARY KEY,
            organization_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            doc TEXT NOT NULL,
            version INTEGER NOT NULL,
            seq_no INTEGER NOT NULL
        );
        CREATE INDEX containers_owner ON containers (organization_id, user_id);
        CREATE TABLE memories (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            container_id TEXT NOT NULL,
            memory_type TEXT NOT NULL,
            memory_id TEXT NOT NULL,
            organization_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            doc TEXT NOT NULL,
            version INTEGER NOT NULL,
            seq_no INTEGER NOT NULL,
            vector BLOB,
            pending INTEGER NOT NULL DEFAULT 0,
            UNIQUE (container_id, memory_type, memory_id)
        );
        CREATE INDEX memories_pending ON memories (pending) WHERE pending = 1;
        CREATE TABLE terms (
            seq INTEGER NOT NULL REFERENCES memories (seq) ON DELETE CASCADE,
            field TEXT NOT NULL,
            value TEXT NOT NULL
        );
        CREATE INDEX terms_lookup ON terms (field, value, seq);
        CREATE INDEX terms_seq ON terms (seq);
        CREATE VIRTUAL TABLE lt_fts USING fts5 (memory, tokenize = 'unicode61 remove_diacritics 2');
        CREATE TABLE infer_jobs (
            job_id INTEGER PRIMARY KEY AUTOINCREMENT,
            container_id TEXT NOT NULL,
            organization_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            request TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0
        );
        CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
        INSERT INTO counters VALUES ('seq_no', 0);
        """,
    )


def _schema_v2(connection: sqlite3.Connection) -> None:
    """The mark of the last write that changed ``lt_fts`` (``fts.drain``), which a saved BM25 mirror is checked
    against; a build without it refuses this file rather than write past a saved mirror."""
    connection.execute("INSERT INTO counters VALUES (?, 0)", (MARK,))


def _schema_v3(connection: sqlite3.Connection) -> None:
    """An infer job's LLM answers so far (``keep_infer_answers``), by step: a retried run reuses them."""
    connection.execute("ALTER TABLE infer_jobs ADD COLUMN answers TEXT NOT NULL DEFAULT '{}'")


MIGRATIONS = [
    _schema_v1,
    _schema_v2,
    _schema_v3,
    schema_retired,
    schema_retired,
    schema_postings,
    schema_posted_scopes,
]
CONTAINER_OWNER = "container_id = ? AND organization_id = ? AND user_id = ?"
#: The containers a caller may use (``base.may_use``, in SQL): of its organisation, and its own, or any for an
#: organisation key, or shared with one of its roles.  Parameters: organisation, admin (0/1), user, roles (JSON).
CONTAINER_USABLE = (
    "organization_id = ? AND (? OR user_id = ? OR EXISTS (SELECT 1 FROM json_each(containers.doc, '$.backend_roles') "
    "AS shared WHERE shared.value IN (SELECT value FROM json_each(?))))"
)
MEMORY_OWNER = "container_id = ? AND memory_type = ? AND organization_id = ? AND user_id = ?"
#: Host parameters per statement, well under SQLite's limit.
BATCH = 500
#: A term is probed for the candidates left, rather than its seqs read whole, when it matches more than
#: this many times as many docs: a probe is an index seek per candidate, a read a sequential index scan.
PROBE_RATIO = 8


def next_seq_no(c: sqlite3.Connection) -> int:
    return int(c.execute("UPDATE counters SET value = value + 1 WHERE name = 'seq_no' RETURNING value").fetchone()[0])


def row_doc(row: sqlite3.Row, id_column: str) -> StoredDoc:
    seq = row["seq"] if "seq" in row.keys() else 0
    # ``memory_sources`` is ours: no answer shows it (``sources``)
    return StoredDoc(row[id_column], without_sources(json.loads(row["doc"])), row["version"], row["seq_no"], seq)


def container_doc(row: sqlite3.Row) -> StoredDoc:
    """A container row, with its owner."""
    return replace(row_doc(row, "container_id"), owner=owner_of(row["organization_id"], row["user_id"]))


def usable_params(caller: Principal) -> tuple[Any, ...]:
    """``CONTAINER_USABLE``'s parameters."""
    return (caller.organization_id, int(caller.organization_admin), owner_id(caller), json.dumps(caller.backend_roles))


def dumps(doc: dict[str, Any]) -> str:
    # ASCII escapes keep lone surrogates (valid JSON, invalid UTF-8) storable.
    return json.dumps(doc, separators=(",", ":"))


def batches(ids: Iterable[str]) -> Iterator[tuple[list[str], str]]:
    """Distinct ``ids`` in parts SQLite can bind, each with its ``?,?,...`` placeholders."""
    wanted = list(dict.fromkeys(ids))
    for start in range(0, len(wanted), BATCH):
        part = wanted[start : start + BATCH]
        yield part, ",".join("?" * len(part))


def _long_term_terms(doc: dict[str, Any]) -> list[tuple[str, str]]:
    pairs = flat_object_terms(doc)
    for name in ("strategy_id", "namespace_size", "strategy_type"):
        if doc.get(name) is not None:
            pairs.append((name, str(doc[name])))
    # what ``sqlite_forgetting`` finds a doc's sources by; no term filter a caller builds can name this field
    pairs += [(SOURCES, str(entry.get("working_memory_id"))) for entry in sources_of(doc)]
    return pairs


def index_terms(c: sqlite3.Connection, seq: int, doc: dict[str, Any]) -> None:
    """A long-term doc's exact terms, replacing any earlier ones."""
    c.execute("DELETE FROM terms WHERE seq = ?", (seq,))
    c.executemany(
        "INSERT INTO terms VALUES (?, ?, ?)",
        [(seq, valid_unicode(name), valid_unicode(value)) for name, value in _long_term_terms(doc)],
    )


def rewrite(c: sqlite3.Connection, seq: int, doc: dict[str, Any], *, reembed: bool = False) -> int:
    """Store a doc's next version, with its postings, and return its seq_no; ``reembed`` (a long-term doc's text
    changed) drops its vector, queues the new text for embedding and re-indexes it for BM25."""
    seq_no = next_seq_no(c)
    if reembed:
        row = c.execute(
            "UPDATE memories SET doc = ?, version = version + 1, seq_no = ?, vector = NULL, pending = 1 WHERE seq = ? "
            "RETURNING container_id, memory_type, organization_id, user_id",
            (dumps(doc), seq_no, seq),
        ).fetchone()
        fts_put(c, seq, memory_text(doc), new=False)
    else:
        row = c.execute(
            "UPDATE memories SET doc = ?, version = version + 1, seq_no = ? WHERE seq = ? "
            "RETURNING container_id, memory_type, organization_id, user_id",
            (dumps(doc), seq_no, seq),
        ).fetchone()
    if row is not None:
        index_postings(c, seq, row[0], row[1], (row[2], row[3]), doc, new=False)
    return seq_no


def remove_memory(c: sqlite3.Connection, seq: int, memory_type: str) -> None:
    c.execute("DELETE FROM memories WHERE seq = ?", (seq,))
    if memory_type == LONG_TERM:
        fts_delete(c, [seq])


def _seqs(c: sqlite3.Connection, sql: str, parameters: Sequence[Any]) -> np.ndarray:
    """The sorted distinct seqs ``sql`` selects, joined into one string in SQLite: a row per seq through
    Python costs several times more than parsing the string."""
    (joined,) = c.execute(f"SELECT group_concat(seq) FROM ({sql})", parameters).fetchone()
    return sorted_distinct(np.fromstring(joined or "", dtype=np.int64, sep=","))


def _term_matches(c: sqlite3.Connection, terms: Sequence[tuple[str, str]]) -> np.ndarray:
    """Sorted seqs carrying every term, planned as a search engine intersects posting lists: counts
    first (index-only), then the rarest term's seqs, then each further term either read whole and
    intersected, or probed for the candidates left when they are far fewer than its matches.  A term
    that matches nothing ends the plan before any list is read."""
    pairs = list(dict.fromkeys((valid_unicode(name), valid_unicode(value)) for name, value in terms))
    postings = "SELECT seq FROM terms WHERE field = ? AND value = ?"
    if len(pairs) == 1:  # nothing to plan: counting its matches would take a third of reading them
        return _seqs(c, postings, pairs[0])
    count = "SELECT count(*) FROM terms WHERE field = ? AND value = ?"
    sized = sorted((c.execute(count, pair).fetchone()[0], pair) for pair in pairs)
    if sized[0][0] == 0:
        return np.empty(0, dtype=np.int64)
    seqs = _seqs(c, postings, sized[0][1])
    for matches, pair in sized[1:]:
        if len(seqs) == 0:
            break
        if len(seqs) * PROBE_RATIO < matches:
            probe = postings + " AND seq IN (SELECT value FROM json_each(?))"
            seqs = _seqs(c, probe, (*pair, json.dumps(seqs.tolist())))
        else:
            seqs = np.intersect1d(seqs, _seqs(c, postings, pair), assume_unique=True)
    return seqs


def candidates(c: sqlite3.Connection, scope: LongTermScope) -> np.ndarray | None:
    """Seqs matching every term (and among ``only_ids``, the owner's long-term docs of the container);
    None when nothing restricts.  Term matches may include other containers' seqs: the per-container
    vectors and the hydration by owner and container drop those."""
    if not scope.terms and scope.only_ids is None:
        return None
    matching = _term_matches(c, scope.terms) if scope.terms else None
    if scope.only_ids is None:
        return matching
    sql = f"SELECT seq FROM memories WHERE {MEMORY_OWNER}"
    base: list[Any] = [scope.container_id, LONG_TERM, *owner_key(scope.owner)]
    seqs: list[int] = []
    for part, marks in batches(scope.only_ids):
        seqs += [row[0] for row in c.execute(sql + f" AND memory_id IN ({marks})", [*base, *part])]
    listed = sorted_distinct(np.asarray(seqs, dtype=np.int64))
    return listed if matching is None else np.intersect1d(listed, matching, assume_unique=True)


def hydrate(
    c: sqlite3.Connection,
    scope: LongTermScope,
    scored: list[tuple[int, float]],
    limit: int | None = None,
    *,
    embedded: bool = False,
) -> list[tuple[StoredDoc, float]]:
    """The scored seqs' docs, in order, keeping only the owner's long-term docs of the container, and with
    ``embedded`` only those with a vector: a k-NN search ranks a snapshot of the vectors, and a doc whose text
    changed since has none until it is embedded again."""
    out: list[tuple[StoredDoc, float]] = []
    sql = f"SELECT seq, memory_id, doc, version, seq_no FROM memories WHERE seq = ? AND {MEMORY_OWNER}"
    if embedded:
        sql += " AND vector IS NOT NULL"
    for seq, score in scored:
        if limit is not None and len(out) >= limit:
            break
        row = c.execute(sql, (seq, scope.container_id, LONG_TERM, *owner_key(scope.owner))).fetchone()
        if row is not None:
            out.append((row_doc(row, "memory_id"), score))
    return out


def bm25_top(
    c: sqlite3.Connection, scope: LongTermScope, query: str, k: int, lexical: LexicalIndex, tokenizer: Tokenizer
) -> list[tuple[StoredDoc, float]]:
    """The top ``k`` by FTS5's BM25.  The mirror scores exactly as FTS5 does when it holds what FTS5 holds and
    every query word is one FTS5 token (a phrase of several needs FTS5's positions): top k without scoring
    every match.  Otherwise FTS5 ranks every match, and the owner's docs of the container are kept until k."""
    matching = candidates(c, scope)
    if matching is not None and len(matching) == 0:
        return []
    if totals(c) == (lexical.rows, lexical.tokens):
        tokens = tokenizer.query_tokens(query_words(query))
        if all(len(token) == 1 for token in tokens):
            words = [token[0] for token in tokens]
            return hydrate(c, scope, lexical.search(scope.container_id, owner_key(scope.owner), words, k, matching))
    allowed = None if matching is None else set(matching.tolist())
    kept: list[tuple[StoredDoc, float]] = []
    ranked = fts_ranked(c, fts_query(query) or "", allowed)
    try:
        for scored in ranked:
            kept += hydrate(c, scope, scored, limit=k - len(kept))
            if len(kept) >= k:
                break
    finally:
        ranked.close()
    return kept


def touch_session(c: sqlite3.Connection, owner: Principal, container_id: str, session_id: str, time: int) -> bool:
    """The owner's session's next version, its ``last_updated_time`` set by SQLite (``SessionWrite.touched``):
    no posting holds that field, so none is written, and no Python decodes the doc.  False if there is none
    (then no seq_no is taken)."""
    key = (container_id, SESSIONS, *owner_key(owner), session_id)
    taken = c.execute(
        "UPDATE counters SET value = value + 1 WHERE name = 'seq_no' "
        f"AND EXISTS (SELECT 1 FROM memories WHERE {MEMORY_OWNER} AND memory_id = ?) RETURNING value",
        key,
    ).fetchone()
    if taken is None:
        return False
    c.execute(
        "UPDATE memories SET doc = json_set(doc, '$.last_updated_time', ?), version = version + 1, seq_no = ? "
        f"WHERE {MEMORY_OWNER} AND memory_id = ?",
        (time, taken[0], *key),
    )
    return True


def session_taken(c: sqlite3.Connection, container_id: str, session_id: str) -> bool:
    """Session ids are unique per container, whoever asks: a custom id never overwrites."""
    row = c.execute(
        "SELECT 1 FROM memories WHERE container_id = ? AND memory_type = ? AND memory_id = ?",
        (container_id, SESSIONS, session_id),
    ).fetchone()
    return row is not None
