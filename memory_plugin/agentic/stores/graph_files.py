"""The agentic containers' HNSW graphs on disk, so that a restart does not build them again (14.5 s at 100k
memories on the 2-core AMD EPYC, the scan answering meanwhile at twice the walk's time).

One file per container, ``<database>.graphs/<sha256 of the container id>.npz``: the graph as faiss
serializes it and the seq at each of its positions.  The build thread writes it after each build (a
temporary file, fsynced, renamed, the folder fsynced).  It is a cache, and SQLite stays the truth: at open
(``vectors.restored_matrix``) a matrix is laid out in its graph's order, a position whose memory is gone or
whose stored vector differs from the graph's is a dead row, and every other memory follows in seq order
as the graph's tail.  So a graph of any age, or even another container's, can cost recall but never a
wrong score (the walk's finds are scored from SQLite's vectors), and a torn or foreign file fails its
checks and is built again.
"""

from __future__ import annotations

import hashlib
import logging
import os
from contextlib import suppress
from pathlib import Path

import faiss
import numpy as np

from memory_plugin.files import fsync_dir, make_private_dir, write_npz

_FORMAT = 1
_log = logging.getLogger(__name__)


def graph_folder(database: Path) -> Path:
    return database.with_name(database.name + ".graphs")


def graph_file(folder: Path, container_id: str) -> Path:
    """The container's file: hashed, since a container id may hold any character."""
    return folder / f"{hashlib.sha256(container_id.encode('utf-8', 'surrogatepass')).hexdigest()[:32]}.npz"


def save_graph(file: Path, hnsw: faiss.Index, seqs: np.ndarray) -> None:
    """Write the graph and the seq at each of its positions, replacing the file whole or not at all."""
    make_private_dir(file.parent)
    staging = file.with_suffix(".tmp")
    try:
        write_npz(
            staging,
            {"format": np.asarray([_FORMAT]), "index": faiss.serialize_index(hnsw), "seqs": seqs},
        )
        os.replace(staging, file)
        fsync_dir(file.parent)
    finally:
        with suppress(FileNotFoundError):
            os.unlink(staging)


def load_graph(file: Path, dimension: int) -> tuple[faiss.Index, np.ndarray] | None:
    """The graph and its seqs, or None when there is no file or it does not hold together (logged)."""
    if not file.exists():
        return None
    try:
        with np.load(file, allow_pickle=False) as saved:  # zipfile checks each member's CRC
            if saved["format"].tolist() != [_FORMAT]:
                raise ValueError(f"format {saved['format'].tolist()}")
            seqs = np.asarray(saved["seqs"], dtype=np.int64)
            hnsw = faiss.deserialize_index(saved["index"])
        if not isinstance(hnsw, faiss.IndexHNSWFlat) or hnsw.metric_type != faiss.METRIC_INNER_PRODUCT:
            raise ValueError(f"a {type(hnsw).__name__}, not an inner-product HNSW graph")
        if hnsw.d != dimension or hnsw.ntotal != len(seqs):
            raise ValueError(f"{hnsw.ntotal} vectors of {hnsw.d} dimensions for {len(seqs)} seqs of {dimension}")
        return hnsw, seqs
    except Exception as error:  # noqa: BLE001 - any damage: build it again from SQLite
        _log.warning("ignoring the saved graph %s (%s): it is built again", file, error)
        return None


def remove_graph(file: Path) -> None:
    with suppress(FileNotFoundError):
        os.unlink(file)


def remove_other_graphs(folder: Path, keep: set[Path]) -> None:
    """Remove the files of containers gone and the leftovers of interrupted writes."""
    if folder.is_dir():
        for path in folder.iterdir():
            if path not in keep:
                remove_graph(path)
