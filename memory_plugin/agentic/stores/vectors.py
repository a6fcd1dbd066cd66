"""The embedded store's vectors in memory: one matrix per container, ranked exactly (the rows that pass
read in place, ``vector_scan``: at 100k rows, 10% of them in 3.5 ms and all in 7.7, where numpy took 6.0
gathering the 10% first and 11 multiplying every row), or, in a container of :data:`GRAPH_MIN_ROWS` rows
or more, through an HNSW graph when the planner (``vector_plan``, the histories' measured costs) finds
the walk cheaper: a large share of the rows passing, as Lucene and Qdrant choose.

A matrix changes on the event loop once the write that changes it has committed; a search on the reader
thread ranks a snapshot of it (``Matrix.rows``).  The graph is built on a thread of its own over the
rows then written and never changed after: the rows written since (its tail) are scanned and merged
in, until they reach a quarter of it and it is built again; dead rows stay in it, excluded by the
walk's selector; a compaction (rows move) drops it.  Each build is saved (``graph_files``), and a
restart lays the matrix out in the saved graph's order instead of building it again.  The walk's hits
are scored by the same scan as the exact path.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import faiss
import numpy as np

from memory_plugin.agentic.stores.graph_files import (
    graph_file,
    graph_folder,
    load_graph,
    remove_graph,
    remove_other_graphs,
    save_graph,
)
from memory_plugin.vector_plan import plan, walk
from memory_plugin.vector_scan import exact_top, scan_shares

#: Who wrote a memory: its organisation and ``owner_id`` (``base.owner_key``).
OwnerKey = tuple[str, str]

#: A container with fewer live rows is always scanned (20k rows of 384 dimensions: about 1.5 ms).
GRAPH_MIN_ROWS = 20_000
#: The graph is built again once the rows written after it reach this share of it.
GRAPH_TAIL_SHARE = 0.25
#: Wider than the histories' (efConstruction 64, efSearch 128): over ``scripts/bench_agentic.py``'s 100k
#: memories (mixed from 1,000 real paragraphs' embeddings, mean pairwise cosine 0.87) and real query
#: embeddings, those gave recall@10 0.69; efConstruction 128 and efSearch 512 / 1024 / 2048 give 0.971 /
#: 0.994 / 0.999 at 1.3 / 2.4 / 5.4 ms a walk, against 7.5 ms for the scan (a build: 13 s on 2 cores).
HNSW_M, EF_CONSTRUCTION, EF_SEARCH, EXACT_THRESHOLD = 32, 128, 1024, 200_000
#: Rows added to a graph per step of its build: a stopped or outdated build ends within one step.
BUILD_STEP = 4096
#: Saved graph positions compared with SQLite's vectors at a time (at 384 dimensions, 100 MB).
_COMPARE_STEP = 65_536
#: One build at a time, whatever the containers: a build takes both CPUs (faiss's threads) while it runs.
_BUILDS = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentic-graph")
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Graph:
    """HNSW over the matrix positions below ``rows`` of one generation of its arrays."""

    hnsw: faiss.Index
    rows: int
    generation: int


class Matrix:
    """One container's vectors in a growable float32 matrix, by seq; deletions leave dead rows until compaction.

    Each row also holds its writer (a code of ``owners``): a shared container holds several writers'
    memories, and a search ranks only the caller's, so that others' never take its top k.
    """

    def __init__(self, dimension: int, graph_file: Path | None = None) -> None:
        #: Where each build is saved (``graph_files``); None: kept in memory only.
        self.graph_file = graph_file
        self.vectors = np.zeros((256, dimension), dtype=np.float32)
        self.seqs = np.zeros(256, dtype=np.int64)
        self.live = np.zeros(256, dtype=bool)
        self.writers = np.zeros(256, dtype=np.int32)
        self.owners: dict[OwnerKey, int] = {}
        self.n = 0
        self.position: dict[int, int] = {}
        #: Bumped when rows move (``_resize``): a graph of another generation names wrong positions.
        self.generation = 0
        self.graph: Graph | None = None
        self._building = False
        self._stopped = False
        self._discarded = False

    @classmethod
    def restored(
        cls,
        graph: faiss.Index,
        graph_seqs: np.ndarray,
        seqs: np.ndarray,
        vectors: np.ndarray,
        owners: list[OwnerKey],
        graph_file: Path | None = None,
    ) -> Matrix | None:
        """The matrix of the memories ``seqs`` (ascending), laid out in the order of a saved ``graph`` with it:
        its positions whose memory is gone or changed are dead rows, the other memories its tail.  None when
        fewer than half its positions still hold their memory (a compaction would drop it at once)."""
        kept = _unchanged(graph, graph_seqs, seqs, vectors)
        live = kept >= 0
        if 2 * np.count_nonzero(live) < len(kept):
            return None
        placed = np.zeros(len(seqs), dtype=bool)
        placed[kept[live]] = True
        order = np.concatenate((kept, np.flatnonzero(~placed)))  # the memory at each position, -1: dead
        live = order >= 0
        matrix = cls(vectors.shape[1], graph_file)
        matrix._resize(max(256, len(order)))
        n = matrix.n = len(order)
        matrix.vectors[:n][live] = vectors[order[live]]
        matrix.seqs[:n] = np.where(live, seqs[order], -1)
        matrix.live[:n] = live
        codes = [matrix.owners.setdefault(owner, len(matrix.owners)) for owner in owners]
        matrix.writers[:n][live] = np.asarray(codes, dtype=np.int32)[order[live]]
        matrix.position = {
            seq: position for position, seq in zip(np.flatnonzero(live).tolist(), seqs[order[live]].tolist())
        }
        matrix.graph = Graph(graph, len(kept), matrix.generation)
        matrix._plan_graph()  # a long tail: built again, the saved graph walked meanwhile
        return matrix

    @property
    def size(self) -> int:
        return len(self.position)

    @property
    def dimension(self) -> int:
        return int(self.vectors.shape[1])

    def add(self, seqs: np.ndarray, vectors: np.ndarray, owners: list[OwnerKey]) -> None:
        self.remove(seqs.tolist())
        end = self.n + len(seqs)
        if end > len(self.seqs):
            self._resize(max(end, 2 * len(self.seqs)), compact=not self.graph_ready)
        self.vectors[self.n : end] = vectors
        self.seqs[self.n : end] = seqs
        self.live[self.n : end] = True
        self.writers[self.n : end] = [self.owners.setdefault(owner, len(self.owners)) for owner in owners]
        for offset, seq in enumerate(seqs.tolist()):
            self.position[seq] = self.n + offset
        self.n = end
        self._plan_graph()

    def remove(self, seqs: Iterable[int]) -> None:
        for seq in seqs:
            position = self.position.pop(int(seq), None)
            if position is not None:
                self.live[position] = False
        if self.n > 1024 and self.size < self.n // 2:
            self._resize(max(256, 2 * self.size))
            self._plan_graph()

    def _resize(self, capacity: int, *, compact: bool = True) -> None:
        """New arrays holding the live rows only, in order, or (``compact`` false) every row where it is:
        a graph names positions, so a matrix with one grows without moving them."""
        keep = np.flatnonzero(self.live[: self.n]) if compact else np.arange(self.n)
        vectors = np.zeros((capacity, self.vectors.shape[1]), dtype=np.float32)
        seqs = np.zeros(capacity, dtype=np.int64)
        live = np.zeros(capacity, dtype=bool)
        writers = np.zeros(capacity, dtype=np.int32)
        vectors[: len(keep)], seqs[: len(keep)], live[: len(keep)] = (
            self.vectors[keep],
            self.seqs[keep],
            self.live[keep],
        )
        writers[: len(keep)] = self.writers[keep]
        moved = len(keep) < self.n
        self.vectors, self.seqs, self.live, self.writers, self.n = vectors, seqs, live, writers, len(keep)
        if moved:
            self.position = {seq: position for position, seq in enumerate(seqs[: self.n].tolist())}
            self.generation += 1

    @property
    def graph_ready(self) -> bool:
        """Whether a graph of the current rows is built (the rows written since it are scanned)."""
        return self.graph is not None and self.graph.generation == self.generation

    @property
    def building(self) -> bool:
        """Whether a graph build is queued or running."""
        return self._building

    def stop(self, *, discard: bool = False) -> None:
        """No more graph builds (the store closes, the container is deleted): one running ends within a step.
        ``discard``: the saved graph goes too (a build saving now removes what it wrote)."""
        self._stopped = True
        if discard and self.graph_file is not None:
            self._discarded = True
            remove_graph(self.graph_file)

    def _plan_graph(self) -> None:
        """Start a build when the container is large enough and has no graph, an outdated one, or a long tail."""
        if self._building or self._stopped or self.size < GRAPH_MIN_ROWS:
            return
        graph = self.graph
        if (
            graph is not None
            and graph.generation == self.generation
            and self.n - graph.rows <= graph.rows * GRAPH_TAIL_SHARE
        ):
            return
        self._building = True
        _BUILDS.submit(self._build, self.vectors, self.seqs, self.n, self.generation)

    def _build(self, vectors: np.ndarray, seqs: np.ndarray, rows: int, generation: int) -> None:
        """On the build thread: rows below ``rows`` of ``vectors`` and ``seqs`` are never written again (a
        resize makes new arrays), so they are read here while the event loop appends.  Saved before the
        build counts as done."""
        try:
            hnsw = faiss.IndexHNSWFlat(vectors.shape[1], HNSW_M, faiss.METRIC_INNER_PRODUCT)
            hnsw.hnsw.efConstruction = EF_CONSTRUCTION
            for start in range(0, rows, BUILD_STEP):
                if self._stopped or generation != self.generation:
                    return
                hnsw.add(vectors[start : min(rows, start + BUILD_STEP)])
            self.graph = Graph(hnsw, rows, generation)  # one reference: a search sees the old graph or this
            self._save(hnsw, seqs[:rows])
        except Exception:  # the scan answers meanwhile, and the next write tries again
            _log.exception("building the graph of %d agentic memories failed", rows)
            return
        finally:
            self._building = False
        self._plan_graph()  # the rows written meanwhile may be a long tail already, and no write may follow

    def _save(self, hnsw: faiss.Index, seqs: np.ndarray) -> None:
        """On the build thread: keep the graph for the next open (its rows' seqs are never written again)."""
        if self.graph_file is None or self._stopped:
            return
        try:
            save_graph(self.graph_file, hnsw, seqs)
        except Exception:  # the graph serves this process all the same; a restart builds it again
            _log.exception("saving the graph of %d agentic memories to %s failed", len(seqs), self.graph_file)
        if self._discarded:  # the container was deleted while this was written
            remove_graph(self.graph_file)

    def rows(self) -> Rows:
        """The matrix as it is now, for a search on the reader thread while the event loop changes it: rows
        below ``n`` are never written again (a resize makes new arrays), and ``live`` is copied."""
        return Rows(
            self.vectors[: self.n],
            self.seqs[: self.n],
            self.live[: self.n].copy(),
            self.writers[: self.n],
            dict(self.owners),
            self.graph if self.graph_ready else None,
        )


@dataclass(frozen=True)
class Rows:
    """A matrix's rows at one moment (``Matrix.rows``)."""

    vectors: np.ndarray
    seqs: np.ndarray
    live: np.ndarray
    writers: np.ndarray
    owners: dict[OwnerKey, int]
    graph: Graph | None = None

    def search(
        self, query: np.ndarray, k: int, candidates: np.ndarray | None, owner: OwnerKey
    ) -> list[tuple[int, float]]:
        """Top ``k`` ``(seq, cosine)`` of ``owner``'s rows among ``candidates`` (None: all), ties by seq."""
        code = self.owners.get(owner)
        if code is None or k <= 0:
            return []
        ranked = self.live if len(self.owners) == 1 else self.live & (self.writers == code)
        if candidates is not None:
            ranked = ranked & np.isin(self.seqs, candidates)
        positions = np.flatnonzero(ranked)
        if len(positions) == 0:
            return []
        if self.graph is not None:
            positions = self._planned(query, k, ranked, positions, self.graph)
        kept, scores = exact_top(self.vectors, positions, query, k)
        seqs = self.seqs[positions[kept]]
        ordered = np.lexsort((seqs, -scores))[:k]
        return list(zip(seqs[ordered].tolist(), scores[ordered].tolist()))

    def _planned(
        self, query: np.ndarray, k: int, ranked: np.ndarray, positions: np.ndarray, graph: Graph
    ) -> np.ndarray:
        """The positions to score: every passing one (the scan), or the walk's finds among those the graph
        holds and every passing one of its tail, whichever the planner finds cheaper."""
        covered = int(np.searchsorted(positions, graph.rows))
        choice = plan(
            covered,
            graph.rows,
            k=k,
            ef_search=EF_SEARCH,
            hnsw_m=HNSW_M,
            dimension=self.vectors.shape[1],
            exact_threshold=EXACT_THRESHOLD,
            scan_threads=scan_shares(covered),
        )
        if choice.exact:
            return positions
        found = walk(graph.hnsw, query, k, positions[:covered], ranked[: graph.rows], choice.ef)
        return np.concatenate((np.sort(found), positions[covered:]))


def container_matrix(database: Path, container_id: str, dimension: int) -> Matrix:
    """A new, empty matrix for a container of the store at ``database``, its graph saved beside it."""
    return Matrix(dimension, graph_file(graph_folder(database), container_id))


def drop_matrices(matrices: dict[str, Matrix], *container_ids: str, discard: bool = False) -> None:
    """Forget the containers' matrices (every one when none is named), stopping their graph builds;
    ``discard``: their saved graphs too (the containers are deleted)."""
    for container_id in container_ids or list(matrices):
        matrix = matrices.pop(container_id, None)
        if matrix is not None:
            matrix.stop(discard=discard)


def load_vectors(c: sqlite3.Connection, path: Path) -> dict[str, Matrix]:
    """Every container's matrix, from the stored vectors, with its saved graph where that still fits."""
    by_container: dict[str, tuple[list[int], list[bytes], list[OwnerKey]]] = {}
    rows = c.execute(
        "SELECT seq, container_id, vector, organization_id, user_id FROM memories WHERE vector IS NOT NULL ORDER BY seq"
    )
    for seq, container_id, blob, organization_id, user_id in rows:
        seqs, blobs, owners = by_container.setdefault(container_id, ([], [], []))
        seqs.append(seq)
        blobs.append(blob)
        owners.append((organization_id, user_id))
    indexes: dict[str, Matrix] = {}
    folder = graph_folder(path)
    for container_id, (seqs, blobs, owners) in by_container.items():
        if len({len(blob) for blob in blobs}) > 1:
            raise RuntimeError(f"{path}: container {container_id} holds vectors of different dimensions")
        vectors = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(seqs), -1)
        file = graph_file(folder, container_id)
        saved = load_graph(file, vectors.shape[1])
        ordered = np.asarray(seqs, dtype=np.int64)
        matrix = None if saved is None else Matrix.restored(*saved, ordered, vectors, owners, file)
        if matrix is None:
            matrix = Matrix(vectors.shape[1], file)
            matrix.add(ordered, vectors, owners)
        indexes[container_id] = matrix
    remove_other_graphs(folder, {graph_file(folder, container_id) for container_id in indexes})
    return indexes


def _unchanged(graph: faiss.Index, graph_seqs: np.ndarray, seqs: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """For each position of a saved graph, the index in ``seqs`` of the memory it holds, or -1 where that
    memory is gone, its vector is not the graph's (bit for bit), or it already sits at an earlier position
    (stored again with the same vector)."""
    at = np.searchsorted(seqs, graph_seqs)
    found = at < len(seqs)
    found[found] = seqs[at[found]] == graph_seqs[found]
    storage = faiss.downcast_index(graph.storage)  # type: ignore[attr-defined]  # an IndexFlat: read in place
    pointer = storage.get_xb()  # type: ignore[attr-defined]
    saved = faiss.rev_swig_ptr(pointer, graph.ntotal * graph.d).reshape(graph.ntotal, graph.d)
    for start in range(0, len(graph_seqs), _COMPARE_STEP):  # bounded memory: a step's vectors at a time
        held = start + np.flatnonzero(found[start : start + _COMPARE_STEP])
        same = np.all(saved[held] == vectors[at[held]], axis=1)
        found[held[~same]] = False
    kept = np.where(found, at, -1)
    repeats = np.ones(np.count_nonzero(found), dtype=bool)
    repeats[np.unique(kept[found], return_index=True)[1]] = False
    kept[np.flatnonzero(found)[repeats]] = -1
    return kept
