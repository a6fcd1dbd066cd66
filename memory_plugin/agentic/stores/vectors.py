"""The embedded store's vectors in memory: one matrix per container, searched exactly (one BLAS
matrix-vector product).  A matrix changes on the event loop once the write that changes it has committed;
a search on the reader thread ranks a snapshot of it (``Matrix.rows``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np


class Matrix:
    """One container's vectors in a growable float32 matrix, by seq; deletions leave dead rows until compaction."""

    def __init__(self, dimension: int) -> None:
        self.vectors = np.zeros((256, dimension), dtype=np.float32)
        self.seqs = np.zeros(256, dtype=np.int64)
        self.live = np.zeros(256, dtype=bool)
        self.n = 0
        self.position: dict[int, int] = {}

    @property
    def size(self) -> int:
        return len(self.position)

    @property
    def dimension(self) -> int:
        return int(self.vectors.shape[1])

    def add(self, seqs: np.ndarray, vectors: np.ndarray) -> None:
        self.remove(seqs.tolist())
        end = self.n + len(seqs)
        if end > len(self.seqs):
            self._resize(max(end, 2 * len(self.seqs)))
        self.vectors[self.n : end] = vectors
        self.seqs[self.n : end] = seqs
        self.live[self.n : end] = True
        for offset, seq in enumerate(seqs.tolist()):
            self.position[seq] = self.n + offset
        self.n = end

    def remove(self, seqs: Iterable[int]) -> None:
        for seq in seqs:
            position = self.position.pop(int(seq), None)
            if position is not None:
                self.live[position] = False
        if self.n > 1024 and self.size < self.n // 2:
            self._resize(max(256, 2 * self.size))

    def _resize(self, capacity: int) -> None:
        """New arrays holding the live rows only, in order."""
        keep = np.flatnonzero(self.live[: self.n])
        vectors = np.zeros((capacity, self.vectors.shape[1]), dtype=np.float32)
        seqs = np.zeros(capacity, dtype=np.int64)
        live = np.zeros(capacity, dtype=bool)
        vectors[: len(keep)], seqs[: len(keep)], live[: len(keep)] = self.vectors[keep], self.seqs[keep], True
        self.vectors, self.seqs, self.live, self.n = vectors, seqs, live, len(keep)
        self.position = {seq: position for position, seq in enumerate(seqs[: self.n].tolist())}

    def rows(self) -> Rows:
        """The matrix as it is now, for a search on the reader thread while the event loop changes it: rows
        below ``n`` are never written again (a resize makes new arrays), and ``live`` is copied."""
        return Rows(self.vectors[: self.n], self.seqs[: self.n], self.live[: self.n].copy())


@dataclass(frozen=True)
class Rows:
    """A matrix's rows at one moment (``Matrix.rows``)."""

    vectors: np.ndarray
    seqs: np.ndarray
    live: np.ndarray

    def search(self, query: np.ndarray, k: int, candidates: np.ndarray | None) -> list[tuple[int, float]]:
        """Top ``k`` ``(seq, cosine)`` among ``candidates`` (None: all), ties by seq."""
        if candidates is None:
            scores = self.vectors @ query
            scores[~self.live] = -np.inf
            seqs = self.seqs
        else:
            positions = np.flatnonzero(self.live & np.isin(self.seqs, candidates))
            if len(positions) == 0:
                return []
            scores = self.vectors[positions] @ query
            seqs = self.seqs[positions]
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        ordered = top[np.lexsort((seqs[top], -scores[top]))]
        return [(int(seqs[i]), float(scores[i])) for i in ordered if scores[i] > -np.inf]


def load_vectors(c: sqlite3.Connection, path: Path) -> dict[str, Matrix]:
    """Every container's matrix, from the stored vectors."""
    by_container: dict[str, tuple[list[int], list[bytes]]] = {}
    rows = c.execute("SELECT seq, container_id, vector FROM memories WHERE vector IS NOT NULL ORDER BY seq")
    for seq, container_id, blob in rows:
        seqs, blobs = by_container.setdefault(container_id, ([], []))
        seqs.append(seq)
        blobs.append(blob)
    indexes: dict[str, Matrix] = {}
    for container_id, (seqs, blobs) in by_container.items():
        if len({len(blob) for blob in blobs}) > 1:
            raise RuntimeError(f"{path}: container {container_id} holds vectors of different dimensions")
        vectors = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(seqs), -1)
        indexes[container_id] = Matrix(vectors.shape[1])
        indexes[container_id].add(np.asarray(seqs, dtype=np.int64), vectors)
    return indexes
