"""The embedded store's vectors in memory: one matrix per container, ranked exactly (the rows that pass
read in place, ``vector_scan``: at 100k rows, 10% of them in 3.5 ms and all in 7.7, where numpy took 6.0
gathering the 10% first and 11 multiplying every row), or, in a container of :data:`GRAPH_MIN_ROWS` rows
or more, through an HNSW graph when the planner (``vector_plan``, the histories' measured costs) finds
the walk cheaper: a large share of the rows passing, as Lucene and Qdrant choose.

A matrix changes on the event loop once the write that changes it has committed; a search on the reader
thread ranks a snapshot of it (``Matrix.rows``).  The graph is built on a thread of its own over the
rows then written and never changed after: the rows written since (its tail) are scanned and merged
in, until they reach a quarter of it and it is built again; dead rows stay in it, excluded by the
walk's selector; a compaction (rows move) drops it.  It is not kept on disk: after a restart the scan
answers until it is built again.  The walk's hits are scored by the same scan as the exact path.
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

from memory_plugin.vector_plan import plan, walk
from memory_plugin.vector_scan import exact_scores, scan_shares

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

    def __init__(self, dimension: int) -> None:
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

    def stop(self) -> None:
        """No more graph builds (the store closes, the container is deleted): one running ends within a step."""
        self._stopped = True

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
        _BUILDS.submit(self._build, self.vectors, self.n, self.generation)

    def _build(self, vectors: np.ndarray, rows: int, generation: int) -> None:
        """On the build thread: rows below ``rows`` of ``vectors`` are never written again (a resize makes new
        arrays), so they are read here while the event loop appends."""
        try:
            hnsw = faiss.IndexHNSWFlat(vectors.shape[1], HNSW_M, faiss.METRIC_INNER_PRODUCT)
            hnsw.hnsw.efConstruction = EF_CONSTRUCTION
            for start in range(0, rows, BUILD_STEP):
                if self._stopped or generation != self.generation:
                    return
                hnsw.add(vectors[start : min(rows, start + BUILD_STEP)])
            self.graph = Graph(hnsw, rows, generation)  # one reference: a search sees the old graph or this
        except Exception:  # the scan answers meanwhile, and the next write tries again
            _log.exception("building the graph of %d agentic memories failed", rows)
        finally:
            self._building = False
        self._plan_graph()  # the rows written meanwhile may be a long tail already, and no write may follow

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
        scores = exact_scores(self.vectors, positions, query)
        seqs = self.seqs[positions]
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        ordered = top[np.lexsort((seqs[top], -scores[top]))]
        return [(int(seqs[i]), float(scores[i])) for i in ordered]

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


def drop_matrices(matrices: dict[str, Matrix], *container_ids: str) -> None:
    """Forget the containers' matrices (every one when none is named), stopping their graph builds."""
    for container_id in container_ids or list(matrices):
        matrix = matrices.pop(container_id, None)
        if matrix is not None:
            matrix.stop()


def load_vectors(c: sqlite3.Connection, path: Path) -> dict[str, Matrix]:
    """Every container's matrix, from the stored vectors."""
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
    for container_id, (seqs, blobs, owners) in by_container.items():
        if len({len(blob) for blob in blobs}) > 1:
            raise RuntimeError(f"{path}: container {container_id} holds vectors of different dimensions")
        vectors = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(seqs), -1)
        indexes[container_id] = Matrix(vectors.shape[1])
        indexes[container_id].add(np.asarray(seqs, dtype=np.int64), vectors, owners)
    return indexes
