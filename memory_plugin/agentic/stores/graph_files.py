"""The agentic containers' HNSW graphs on disk, so that a restart does not build them again (14.5 s at 100k
memories on the 2-core AMD EPYC, the scan answering meanwhile at twice the walk's time).

Two files per container, named by the sha256 of its id: ``<hash>.faiss``, the graph as faiss writes it,
and ``<hash>.npz``, the seq at each of its positions with the size and CRC-32 of the graph's file.  The
build thread writes them after each build (temporary files, fsynced, renamed graph first, the folder
fsynced), and opening reads the graph straight from its file once its CRC matches: a crash between the
two renames leaves a graph its CRC disowns.  They are a cache, and SQLite stays the truth: at open
(``vectors.Matrix.restored``) a matrix is laid out in its graph's order, a position whose memory is gone
or whose stored vector differs from the graph's is a dead row, and every other memory follows in seq
order as the graph's tail.  So a graph of any age, or even another container's, can cost recall but never
a wrong score (the walk's finds are scored from SQLite's vectors), and a torn or foreign file fails its
checks and is built again.
"""

from __future__ import annotations

import hashlib
import logging
import os
import zlib
from contextlib import suppress
from pathlib import Path

import faiss
import numpy as np

from memory_plugin.files import fresh_private_file, fsync_dir, make_private_dir, write_npz

_FORMAT = 2
_READ_STEP = 16 << 20
_log = logging.getLogger(__name__)


def graph_folder(database: Path) -> Path:
    return database.with_name(database.name + ".graphs")


def graph_file(folder: Path, container_id: str) -> Path:
    """The container's seqs file (its graph's is beside it): hashed, since a container id may hold any character."""
    return folder / f"{hashlib.sha256(container_id.encode('utf-8', 'surrogatepass')).hexdigest()[:32]}.npz"


def save_graph(file: Path, hnsw: faiss.Index, seqs: np.ndarray) -> None:
    """Write the graph and the seq at each of its positions, each file replaced whole or not at all."""
    make_private_dir(file.parent)
    graph, staged_graph, staged_seqs = _graph_of(file), file.with_suffix(".faiss.tmp"), file.with_suffix(".tmp")
    try:
        os.close(fresh_private_file(staged_graph))  # faiss keeps the mode of the file it truncates
        faiss.write_index(hnsw, str(staged_graph))
        with open(staged_graph, "rb") as written:
            os.fsync(written.fileno())
        size, crc = _size_and_crc(staged_graph)
        write_npz(staged_seqs, {"format": np.asarray([_FORMAT, size, crc], dtype=np.int64), "seqs": seqs})
        os.replace(staged_graph, graph)
        os.replace(staged_seqs, file)
        fsync_dir(file.parent)
    finally:
        for staged in (staged_graph, staged_seqs):
            with suppress(FileNotFoundError):
                os.unlink(staged)


def load_graph(file: Path, dimension: int) -> tuple[faiss.Index, np.ndarray] | None:
    """The graph and its seqs, or None when there is none or it does not hold together (logged)."""
    graph = _graph_of(file)
    if not file.exists() or not graph.exists():
        return None
    try:
        with np.load(file, allow_pickle=False) as saved:  # zipfile checks each member's CRC
            form, size, crc = saved["format"].tolist()
            seqs = np.asarray(saved["seqs"], dtype=np.int64)
        if form != _FORMAT:
            raise ValueError(f"format {form}")
        if _size_and_crc(graph) != (size, crc):
            raise ValueError("the graph is not the one its seqs were saved with")
        hnsw = faiss.read_index(str(graph))
        if not isinstance(hnsw, faiss.IndexHNSWFlat) or hnsw.metric_type != faiss.METRIC_INNER_PRODUCT:
            raise ValueError(f"a {type(hnsw).__name__}, not an inner-product HNSW graph")
        if hnsw.d != dimension or hnsw.ntotal != len(seqs):
            raise ValueError(f"{hnsw.ntotal} vectors of {hnsw.d} dimensions for {len(seqs)} seqs of {dimension}")
        return hnsw, seqs
    except Exception as error:  # any damage: build it again from SQLite
        _log.warning("ignoring the saved graph %s (%s): it is built again", file, error)
        return None


def remove_graph(file: Path) -> None:
    for path in (file, _graph_of(file)):
        with suppress(FileNotFoundError):
            os.unlink(path)


def remove_other_graphs(folder: Path, keep: set[Path]) -> None:
    """Remove the files of containers gone and the leftovers of interrupted writes."""
    kept = keep | {_graph_of(file) for file in keep}
    if folder.is_dir():
        for path in folder.iterdir():
            if path not in kept:
                with suppress(FileNotFoundError):
                    os.unlink(path)


def _graph_of(file: Path) -> Path:
    return file.with_suffix(".faiss")


def _size_and_crc(path: Path) -> tuple[int, int]:
    """Read in steps: a graph of a million memories is 1.8 GB."""
    crc, size = 0, 0
    with open(path, "rb") as file:
        while step := file.read(_READ_STEP):
            crc, size = zlib.crc32(step, crc), size + len(step)
    return size, crc
