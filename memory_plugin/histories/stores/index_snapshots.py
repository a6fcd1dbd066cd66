"""Snapshots of a ``TypeIndex`` that reopen without reading every vector back from SQLite.

A snapshot is one folder per record type and generation, ``hnsw-<type>.<generation>/``::

    index.faiss     the HNSW graph with its vectors (positions 0..n-1)
    index.ids.npy   the chunk id at each position (what the SQLite fallback checks against)
    state.npz       ids, organisation codes (-1: dead), the top-level filter columns and their
                    dictionaries (NUL-joined; in meta.json if a value holds a NUL) (zip: CRC-checked)
    metadata.npz    the metadata keys kept as filter columns (``metadata_columns``), when there are any
    meta.json       the mark below, the organisation names of the codes, the metadata keys, file sizes (CRC-checked)

and a row of ``index_snapshots`` in SQLite, the *mark*: the generation, the
highest chunk id it holds and the last ``deleted_chunks`` seq it has applied.
SQLite is still the truth.  ``open()`` loads the folder the mark names,
checks it cheaply (the generation and mark written inside it, file sizes,
CRCs of the small arrays, ids increasing, the live count and a sample of
vectors against SQLite), then reads from SQLite only the chunks written after
``last_id`` and the deletes logged after ``deleted_seq``.  Anything that
disagrees falls back to reading every chunk from SQLite (the path before this
module, which still reuses the graph when its vectors agree).

Crash safety: the folder is written under a temporary name, fsynced and
renamed; only then does the mark move to it, in one transaction that also
trims the delete log to what every mark covers; old folders are removed
after.  A crash before the mark commits leaves the old mark naming the old,
untouched folder; after, the new one.  Leftover folders are removed at open.
The metadata columns come back only when no chunk was written after the mark
(a clean close saves one): otherwise a filter naming a key builds it again in
one pass, as a key seen for the first time.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import zlib
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from memory_plugin.files import fresh_private_file, fsync_dir, make_private_dir, write_npz
from memory_plugin.histories.stores.filter_columns import Row
from memory_plugin.histories.stores.metadata_columns import KeyColumn
from memory_plugin.histories.stores.vector_index import IndexParams, TypeIndex
from memory_plugin.sorted_ids import sorted_distinct

_FORMAT = 1
#: Live vectors compared with SQLite at open: a snapshot of another database fails here.
_SAMPLE = 16


@dataclass(frozen=True, slots=True)
class Mark:
    """What a snapshot holds, as recorded in SQLite (``index_snapshots``) and inside the snapshot."""

    generation: str
    last_id: int
    deleted_seq: int
    positions: int


def folder_of(base: Path, generation: str) -> Path:
    return base.with_name(f"{base.name}.{generation}")


# -- SQLite side (the mark and the delete log) ------------------------------------


def read_marks(connection: sqlite3.Connection) -> dict[str, Mark]:
    rows = connection.execute(
        "SELECT record_type, generation, last_id, deleted_seq, positions FROM index_snapshots"
    ).fetchall()
    return {row[0]: Mark(*row[1:]) for row in rows}


def deleted_seq(connection: sqlite3.Connection) -> int:
    """The last seq the delete log has handed out (AUTOINCREMENT keeps it even when the log is trimmed)."""
    row = connection.execute("SELECT seq FROM sqlite_sequence WHERE name = 'deleted_chunks'").fetchone()
    return int(row[0]) if row else 0


def commit_mark(connection: sqlite3.Connection, record_type: str, mark: Mark | None) -> None:
    """Point ``record_type`` at ``mark`` (or at no snapshot) and drop the log entries every mark covers."""
    if mark is None:
        connection.execute("DELETE FROM index_snapshots WHERE record_type = ?", (record_type,))
    else:
        connection.execute(
            "INSERT OR REPLACE INTO index_snapshots (record_type, generation, last_id, deleted_seq, positions)"
            " VALUES (?, ?, ?, ?, ?)",
            (record_type, mark.generation, mark.last_id, mark.deleted_seq, mark.positions),
        )
    # a record type without a mark is rebuilt from its chunks: it needs no log
    connection.execute(
        "DELETE FROM deleted_chunks WHERE seq <= coalesce((SELECT min(deleted_seq) FROM index_snapshots),"
        " (SELECT seq FROM sqlite_sequence WHERE name = 'deleted_chunks'))"
    )


def changes_since(
    connection: sqlite3.Connection, *, mark: Mark, sample: Sequence[int]
) -> tuple[np.ndarray, dict[int, bytes]]:
    """``(ids deleted after the mark, vectors of the sampled ids)``; raise if SQLite never reached the mark."""
    cursor = connection.cursor()
    cursor.row_factory = None
    handed = cursor.execute("SELECT seq FROM sqlite_sequence WHERE name = 'chunks'").fetchone()
    if mark.last_id > (handed[0] if handed else 0) or mark.deleted_seq > deleted_seq(connection):
        raise ValueError("snapshot mark is ahead of the database")
    deleted = np.fromiter(
        (row[0] for row in cursor.execute("SELECT chunk_id FROM deleted_chunks WHERE seq > ?", (mark.deleted_seq,))),
        np.int64,
    )
    marks = ",".join("?" * len(sample))
    vectors = dict(cursor.execute(f"SELECT id, vector FROM chunks WHERE id IN ({marks})", list(sample)).fetchall())
    return sorted_distinct(deleted), vectors


# -- files --------------------------------------------------------------------------


def write_snapshot(
    index: TypeIndex, base: Path, mark: Mark, org_names: list[str], graph_from: Path | None = None
) -> None:
    """Write ``index`` (read lock held) as the folder of ``mark``; the caller commits the mark after.

    ``graph_from``: the folder of the current snapshot when only deletes happened since, whose
    graph is linked, not written again (deletes change the organisation codes, never the graph).
    """
    n = index.n
    folder = folder_of(base, mark.generation)
    staging = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        make_private_dir(staging)
        if graph_from is None:
            index.save(staging / "index")
        else:
            for name in ("index.faiss", "index.ids.npy"):
                os.link(graph_from / name, staging / name)
        arrays, dictionaries = index.columns.saved(n)
        arrays |= {"ids": index.ids[:n], "orgs": index.orgs[:n]}
        counts = {field: len(values) for field, values in dictionaries.items()}
        for field in list(dictionaries):
            if not any("\x00" in value for value in dictionaries[field]):
                # one NUL-joined text: split in C at open, where JSON decodes a string at a time
                joined = "\x00".join(dictionaries.pop(field)).encode("utf-8", "surrogatepass")
                arrays[f"v.{field}"] = np.frombuffer(joined, dtype=np.uint8)
        write_npz(staging / "state.npz", arrays)
        metadata, metadata_arrays = _metadata_saved(index)
        if metadata:
            write_npz(staging / "metadata.npz", metadata_arrays)
        files = ("index.faiss", "state.npz", *(("metadata.npz",) if metadata else ()))
        body = {
            "format": _FORMAT,
            "mark": [mark.generation, mark.last_id, mark.deleted_seq, mark.positions],
            "dimension": index.params.dimension,
            "sizes": {name: (staging / name).stat().st_size for name in files},
            "organizations": org_names,
            "dictionaries": dictionaries,
            "counts": counts,
            "metadata": metadata,
        }
        text = json.dumps(body, separators=(",", ":"))
        with os.fdopen(fresh_private_file(staging / "meta.json"), "w", encoding="utf-8") as file:
            file.write(json.dumps({"crc": zlib.crc32(text.encode()), "body": text}))
            file.flush()
            os.fsync(file.fileno())
        fsync_dir(staging)
        os.replace(staging, folder)
        fsync_dir(folder.parent)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _metadata_saved(index: TypeIndex) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
    """The kept metadata keys, least recently used first, as meta.json entries and the arrays of metadata.npz."""
    entries: list[dict[str, Any]] = []
    arrays: dict[str, np.ndarray] = {}
    for number, (key, column) in enumerate(list(index.columns.metadata.columns.items())):
        held, values, big = column.saved()
        arrays |= {f"{number}.{name}": array for name, array in held.items()}
        entry: dict[str, Any] = {"key": key, "big": big, "count": len(values)}
        if any("\x00" in value for value in values):
            entry["values"] = values
        else:
            arrays[f"{number}.values"] = np.frombuffer("\x00".join(values).encode("utf-8", "surrogatepass"), np.uint8)
        entries.append(entry)
    return entries, arrays


def _metadata_restored(folder: Path, entries: list[dict[str, Any]], used: int) -> list[tuple[str, KeyColumn]]:
    """The key columns ``_metadata_saved`` wrote; ``ValueError`` if any does not hold together."""
    if not entries:
        return []
    columns: list[tuple[str, KeyColumn]] = []
    with np.load(folder / "metadata.npz", allow_pickle=False) as saved:  # zipfile checks each member's CRC
        for number, entry in enumerate(entries):
            arrays = {name.split(".", 1)[1]: saved[name] for name in saved.files if name.startswith(f"{number}.")}
            values = entry.get("values")
            if values is None:
                text = arrays.pop("values").tobytes().decode("utf-8", "surrogatepass")
                values = text.split("\x00") if entry["count"] else []
            if len(values) != entry["count"]:
                raise ValueError(f"saved metadata key {entry['key']!r} has {len(values)} values, not {entry['count']}")
            columns.append((entry["key"], KeyColumn.restored(arrays, values, entry["big"], used)))
    return columns


def remove_other_snapshots(base: Path, keep: str | None) -> None:
    """Remove the folders of ``base`` but ``keep``'s, leftovers of interrupted writes and the old flat files."""
    for path in base.parent.glob(f"{base.name}.*"):
        if path.is_dir() and (keep is None or path.name != f"{base.name}.{keep}"):
            shutil.rmtree(path, ignore_errors=True)
        elif path.is_file() and keep is not None:  # hnsw-<type>.faiss/.ids.npy of the format before
            with suppress(OSError):
                path.unlink()


@dataclass(slots=True)
class Loaded:
    """A snapshot read back and checked on its own, before SQLite is asked."""

    hnsw: faiss.Index
    arrays: dict[str, np.ndarray]
    organizations: list[str]
    dictionaries: dict[str, list[str]]
    #: The graph is a read-only view of the file (``TypeIndex.mapped``).
    mapped: bool
    #: The metadata keys kept as columns, least recently used first.
    metadata: list[tuple[str, KeyColumn]]

    def sample(self) -> list[int]:
        """Ids of a few live positions, spread over the index, to compare with SQLite."""
        live = np.flatnonzero(self.arrays["orgs"] >= 0)
        picked = live[np.linspace(0, len(live) - 1, min(_SAMPLE, len(live))).astype(np.int64)] if len(live) else live
        return [int(chunk) for chunk in self.arrays["ids"][picked]]


def read_snapshot(params: IndexParams, base: Path, mark: Mark, mapped: bool) -> Loaded:
    """The folder ``mark`` names, if it is whole and says it is that mark's; raise ``ValueError`` if not.

    ``mapped``: memory-map the graph (milliseconds, not seconds at a million chunks) instead of reading it.
    """
    folder = folder_of(base, mark.generation)
    outer = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    if zlib.crc32(outer["body"].encode()) != outer["crc"]:
        raise ValueError("snapshot meta.json is damaged")
    body: dict[str, Any] = json.loads(outer["body"])
    if body["format"] != _FORMAT or body["dimension"] != params.dimension:
        raise ValueError("snapshot has another format or dimension")
    if Mark(*body["mark"]) != mark:
        raise ValueError("snapshot is not the one SQLite marks")
    for name, size in body["sizes"].items():
        if (folder / name).stat().st_size != size:
            raise ValueError(f"snapshot {name} has {(folder / name).stat().st_size} bytes, not {size}")
    with np.load(folder / "state.npz", allow_pickle=False) as state:  # zipfile checks each member's CRC
        arrays = {name: state[name] for name in state.files}
    dictionaries: dict[str, list[str]] = body["dictionaries"]
    for field, count in body["counts"].items():
        if field not in dictionaries:
            text = arrays.pop(f"v.{field}").tobytes().decode("utf-8", "surrogatepass")
            dictionaries[field] = text.split("\x00") if count else []
        if len(dictionaries[field]) != count:
            raise ValueError(f"snapshot dictionary of {field} has {len(dictionaries[field])} values, not {count}")
    ids = arrays["ids"]
    if any(len(array) != mark.positions for array in arrays.values()):
        raise ValueError("snapshot arrays disagree with the mark on their length")
    if len(ids) and (ids[-1] != mark.last_id or (len(ids) > 1 and not np.all(np.diff(ids) > 0))):
        raise ValueError("snapshot ids are not increasing up to the mark")
    organizations = body["organizations"]
    if len(ids) and arrays["orgs"].max() >= len(organizations):
        raise ValueError("snapshot organisation codes beyond its names")
    metadata = _metadata_restored(folder, body.get("metadata", []), mark.positions)
    hnsw = faiss.read_index(str(folder / "index.faiss"), faiss.IO_FLAG_MMAP_IFC if mapped else 0)
    if hnsw.d != params.dimension or hnsw.metric_type != faiss.METRIC_INNER_PRODUCT or hnsw.ntotal != mark.positions:
        raise ValueError("snapshot graph disagrees with the mark")
    return Loaded(hnsw, arrays, organizations, dictionaries, mapped, metadata)


def restore(
    params: IndexParams,
    loaded: Loaded,
    org_codes: np.ndarray,
    checks: tuple[np.ndarray, dict[int, bytes]],
    added: tuple[np.ndarray, np.ndarray, np.ndarray, list[Row]],
) -> TypeIndex:
    """The index from ``loaded`` (org codes mapped to the store's), the chunks ``added`` and the deletes since.

    ``checks`` is what ``changes_since`` read; a disagreement raises ``ValueError``.  A graph read
    memory-mapped stays so (``TypeIndex.mapped``) when nothing was added since the mark.
    """
    deleted, sampled = checks
    hnsw, arrays = loaded.hnsw, loaded.arrays
    n = hnsw.ntotal
    storage = faiss.downcast_index(hnsw.storage)  # type: ignore[attr-defined]
    stored = faiss.rev_swig_ptr(storage.get_xb(), n * hnsw.d).reshape(n, hnsw.d)  # type: ignore[attr-defined]
    ids = arrays["ids"]
    for chunk, blob in sampled.items():
        at = int(np.searchsorted(ids, chunk))
        if not np.array_equal(stored[at], np.frombuffer(blob, dtype=np.float32)):
            raise ValueError("snapshot vectors differ from the database")
    if set(sampled) != set(loaded.sample()) - set(deleted.tolist()):
        raise ValueError("snapshot holds live chunks the database lacks")
    hnsw.hnsw.efSearch = params.ef_search  # type: ignore[attr-defined]
    index = TypeIndex(params, hnsw, n + len(added[0]), with_vectors=not loaded.mapped)
    if loaded.mapped:
        index.vectors, index.mapped = stored, True
    else:
        index.vectors[:n] = stored
    index.ids[:n] = ids
    saved_orgs = arrays["orgs"]
    index.orgs[:n] = np.where(saved_orgs >= 0, org_codes[np.maximum(saved_orgs, 0)], -1)
    index.columns.restore(arrays, loaded.dictionaries)
    if not len(added[0]):  # chunks written since have no values of the keys here: built again when named
        for key, column in loaded.metadata:
            index.columns.metadata.install(key, column)
        index.columns.metadata.unsaved = False  # the snapshot holds them
    index.n = n
    index.kill(deleted)
    live = int(np.count_nonzero(index.orgs[:n] >= 0))
    if n > 1000 and live < n / 2:
        raise ValueError("snapshot is mostly dead chunks: compacting")
    index.append(*added)
    index.unsaved = len(added[0])
    return index


def org_table(organizations: list[str], org_code: Callable[[str], int]) -> np.ndarray:
    """The store's code of each organisation named in a snapshot (the store's codes are per process)."""
    return np.asarray([org_code(name) for name in organizations] or [0], dtype=np.int32)
