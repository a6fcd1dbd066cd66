"""The SQLite store's keyword and hybrid rankings on chunk ids, run on a search thread (``SqliteHistoryStore``).

The hybrid ranking reads each candidate's place (record id, chunk index, user and time: what hits tie by and
what the sittings group by) from the index's in-memory columns, not from SQLite: at 100,000 chunks the two
statements that read the 200 candidates and their neighbours took 2 ms of a search, most of it in pages of
the chunks table (each row holds its vector) touched for the first time. A chunk's place never changes (a
record rewritten gets new chunk ids), so the columns give what SQLite would. The chunk index is read from
SQLite only for chunks whose record has another chunk among the candidates, the only ties it can break; a
chunk the index does not hold (yet) is read from SQLite too. The timeline neighbours stay SQLite's
(``lexical.adjacent``), and only the ``k`` hits returned are read whole. The scores are ``fusion``'s, computed over
arrays of candidate positions (``fusion_arrays``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from memory_plugin.histories.stores import fusion, fusion_arrays, lexical
from memory_plugin.histories.stores.filters import Filter
from memory_plugin.histories.stores.records import SCORE_DECIMALS, Hit
from memory_plugin.histories.stores.sqlite_filters import compile_filter, register_functions
from memory_plugin.histories.stores.sqlite_tables import hit_rows, hits
from memory_plugin.histories.stores.vector_index import TypeIndex

#: Keyword hits checked against the organisation and filters at a time, best first.
KEYWORD_BATCH = 256


def allowed_ids(index: TypeIndex, org: int, where: Filter | None, candidates: np.ndarray | None) -> np.ndarray | None:
    """The sorted chunk ids a filter passes (None: no filter): SQL's positions, or the columns' answer."""
    ids: np.ndarray | None = None
    if candidates is not None:
        ids = index.ids[candidates]
    elif where:
        ids = index.ids[index.selected(org, where)[1]]
    return ids


def fts5_keyword(
    connection: sqlite3.Connection, organization_id: str, record_type: str, text: str, where: Filter, k: int
) -> list[Hit]:
    """FTS5's ranking, the best first until ``k`` pass the filter: while the mirror is being built, or for a word
    of several tokens."""
    sql, sql_params = compile_filter(where)
    allowed_sql = (
        "SELECT c.id FROM chunks c JOIN records r ON r.rid = c.rid WHERE c.id IN ({ids})"
        f" AND r.organization_id = ? AND r.record_type = ? AND {sql}"
    )
    register_functions(connection)  # a reader's own connection: the filter's functions, once each
    ranked = lexical.lucene_bm25(connection, text)
    top: list[tuple[int, float]] = []
    for start in range(0, len(ranked), KEYWORD_BATCH):
        batch = ranked[start : start + KEYWORD_BATCH]
        ids = [chunk for chunk, _ in batch]
        query = allowed_sql.format(ids=",".join("?" * len(ids)))
        allowed = {row[0] for row in connection.execute(query, [*ids, organization_id, record_type, *sql_params])}
        top += [(chunk, round(score, SCORE_DECIMALS)) for chunk, score in batch if chunk in allowed]
        if len(top) >= k:
            break
    top = top[:k]
    return hits(top, hit_rows(connection, [chunk for chunk, _ in top])) if top else []


class ChunkPlace(NamedTuple):
    """A live chunk's place: what hits tie by, and its record's timeline (the sittings')."""

    record_id: str
    chunk_index: int
    user_id: str | None
    created: int

    @property
    def tie(self) -> tuple[str, int]:
        return self.record_id, self.chunk_index


def chunk_places(connection: sqlite3.Connection, chunk_ids: list[int]) -> dict[int, ChunkPlace]:
    """Each live chunk's place, read from SQLite."""
    if not chunk_ids:
        return {}
    cursor = connection.cursor()
    cursor.row_factory = None
    rows = cursor.execute(
        "SELECT c.id, r.record_id, c.chunk_index, r.user_id, r.record_created_at"
        " FROM chunks c JOIN records r ON r.rid = c.rid"
        f" WHERE c.id IN ({','.join('?' * len(chunk_ids))})",
        chunk_ids,
    )
    return {chunk: ChunkPlace(*place) for chunk, *place in rows}


class Places:
    """The places of the chunks a hybrid search meets, from the index's columns (see the module docstring)."""

    def __init__(self, connection: sqlite3.Connection, index: TypeIndex, org: int) -> None:
        self.connection, self.index, self.org = connection, index, org
        self.found: dict[int, ChunkPlace] = {}
        self._indexed: set[int] = set()  # chunks whose chunk index is SQLite's, not a stand-in
        self._of_record: dict[str, list[int]] = {}  # the chunks found of each record

    def add(self, chunk_ids: Iterable[int]) -> None:
        wanted = np.asarray(sorted(set(chunk_ids) - self.found.keys()), dtype=np.int64)
        if not len(wanted):
            return
        index, n = self.index, self.index.n
        at = np.minimum(np.searchsorted(index.ids[:n], wanted), max(n - 1, 0))
        held = (index.ids[at] == wanted) & (index.orgs[at] == self.org) if n else np.zeros(len(wanted), dtype=bool)
        columns = index.columns
        record_ids, users = columns.dictionaries["record_id"].values, columns.dictionaries["user_id"].values
        record_codes = columns.strings["record_id"][at[held]].tolist()
        user_codes = columns.strings["user_id"][at[held]].tolist()
        created = columns.dates["record_created_at"][at[held]].tolist()
        found, of_record = self.found, self._of_record
        touched: set[str] = set()
        for chunk, record, user, moment in zip(wanted[held].tolist(), record_codes, user_codes, created):
            record_id = record_ids[record] or ""
            found[chunk] = ChunkPlace(record_id, 0, users[user], moment)
            if record_id in of_record:
                touched.add(record_id)
            of_record.setdefault(record_id, []).append(chunk)
        fresh = chunk_places(self.connection, wanted[~held].tolist())
        for chunk, place in fresh.items():
            found[chunk] = place
            if place.record_id in of_record:
                touched.add(place.record_id)
            of_record.setdefault(place.record_id, []).append(chunk)
        self._indexed.update(fresh)
        # a stand-in chunk index is 0: right wherever the record has no other chunk here to tie with
        missing = [c for record_id in touched for c in of_record[record_id] if c not in self._indexed]
        if missing:
            cursor = self.connection.cursor()
            cursor.row_factory = None
            marks = ",".join("?" * len(missing))
            for chunk, chunk_index in cursor.execute(
                f"SELECT id, chunk_index FROM chunks WHERE id IN ({marks})", missing
            ):
                self.found[chunk] = self.found[chunk]._replace(chunk_index=chunk_index)
            self._indexed.update(missing)


def fused_ranking(
    connection: sqlite3.Connection,
    index: TypeIndex,
    org: int,
    organization_id: str,
    dense: list[tuple[int, float]],
    keyword: list[tuple[int, float]],
    allowed: np.ndarray | None,
    k: int,
) -> list[Hit]:
    """``fusion.fuse`` then ``fusion.spread`` and ``fusion.lift_sittings`` on chunk ids, as the service composes them
    from hits: ties by record id and chunk index, a neighbour kept only where the filter (``allowed``, sorted chunk
    ids) passes it."""
    known = Places(connection, index, org)
    known.add(chunk for chunk, _ in (*dense, *keyword))
    places = known.found
    listed = [dict((c, s) for c, s in found if c in places) for found in (dense, keyword)]  # live chunks only
    chunks = list(dict.fromkeys(c for found in listed for c in found))
    position = {chunk: at for at, chunk in enumerate(chunks)}
    ties = tie_ranks([places[chunk].tie for chunk in chunks])

    def ranked(found: dict[int, float], shown: np.ndarray) -> np.ndarray:
        """The positions in the order ``hits`` gives their hits: by shown score, then record id and chunk index."""
        at = np.fromiter((position[chunk] for chunk in found), dtype=np.intp, count=len(found))
        order: np.ndarray = at[fusion_arrays.best_first(shown, ties[at])]
        return order

    dense_scores, keyword_scores = (np.fromiter(found.values(), dtype=np.float64) for found in listed)
    fused = fusion_arrays.fused_scores(
        ranked(listed[0], fusion_arrays.rounded(np.clip(dense_scores, -1.0, 1.0))),
        ranked(listed[1], fusion_arrays.rounded(keyword_scores)),
        len(chunks),
    )
    lenders = fusion_arrays.best_first(fused, ties)[: fusion.LENDERS].tolist()
    around = lexical.adjacent(
        connection, organization_id, [(places[chunks[at]].record_id, chunks[at]) for at in lenders], by_chunk=True
    )
    near = {chunk for found in around for chunk in found}
    known.add(near)
    passing: set[int] | None = None
    if allowed is not None and len(allowed):
        wanted = np.asarray(sorted(near), dtype=np.int64)
        at = np.minimum(np.searchsorted(allowed, wanted), len(allowed) - 1)
        passing = set(wanted[allowed[at] == wanted].tolist())
    else:
        passing = None if allowed is None else set()
    neighbours = []
    for found in around:
        visible = [chunk for chunk in found if chunk in places and (passing is None or chunk in passing)]
        neighbours.append([position.setdefault(chunk, len(position)) for chunk in visible])
    chunks = list(position)
    spread = fusion_arrays.spread_scores(fused, len(chunks), lenders, neighbours)
    users: dict[str | None, int] = {}
    codes = np.fromiter((users.setdefault(places[c].user_id, len(users)) for c in chunks), dtype=np.int64)
    times = np.fromiter((places[c].created for c in chunks), dtype=np.int64, count=len(chunks))
    scores = fusion_arrays.sitting_scores(spread, codes, times)
    best = fusion_arrays.best_first(scores, tie_ranks([places[chunk].tie for chunk in chunks]))[:k].tolist()
    top = [chunks[at] for at in best]
    return hits([(chunks[at], float(scores[at])) for at in best], hit_rows(connection, top)) if top else []


def tie_ranks(ties: list[tuple[str, int]]) -> np.ndarray:
    """Each tie's rank among them (equal ties, equal ranks), for ``fusion_arrays.best_first``."""
    ranks = np.empty(len(ties), dtype=np.intp)
    last: tuple[str, int] | None = None
    rank = -1
    for at in sorted(range(len(ties)), key=ties.__getitem__):
        if ties[at] != last:
            rank, last = rank + 1, ties[at]
        ranks[at] = rank
    return ranks
