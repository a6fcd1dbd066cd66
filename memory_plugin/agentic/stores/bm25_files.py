"""The BM25 mirror (``bm25.LexicalIndex``) on disk, so that a clean restart does not build it again from FTS5's
postings (4.7 s at 100k memories on the 2-core AMD EPYC, FTS5 ranking every match meanwhile).

One file beside the database, ``<name>.bm25.npz``, written when the store closes: the mirror's arrays as they
are, every frozen segment's included, and the mark of the last ``lt_fts`` change it holds (``fts.drain``
draws a new random mark in SQLite's ``counters`` with every write that changes the table).  Opening uses the
file only when its mark is SQLite's now, and its row and token counts FTS5's: a write after the file was
saved (a crash since, or a build that never wrote it) draws another mark, even in a database restored from a
backup and written again, and the mirror is built again from FTS5, as before.  So the file is a cache that
can cost time, never a wrong score; ``np.load`` checks each member's CRC, and a torn or foreign file fails to
load and is ignored.
"""

from __future__ import annotations

import json
import logging
import os
import zipfile
from contextlib import suppress
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np

from memory_plugin.agentic.stores.bm25 import LexicalIndex, Segment, Shard
from memory_plugin.files import fsync_dir, write_npz

_FORMAT = 1
#: A Segment's arrays, each saved as all segments' concatenated with their lengths.
_SEGMENT_ARRAYS = [f.name for f in fields(Segment) if f.name != "low"]
_log = logging.getLogger(__name__)


def mirror_file(database: Path) -> Path:
    return database.with_name(database.name + ".bm25.npz")


def save_mirror(file: Path, index: LexicalIndex) -> None:
    """Write ``index`` (held still by the caller) whole or not at all."""
    staged = file.with_name(file.name + ".tmp")
    try:
        write_npz(staged, _arrays(index))
        os.replace(staged, file)
        fsync_dir(file.parent)
    except OSError as error:  # a full disk: the next open builds the mirror from FTS5
        _log.warning("the BM25 mirror was not saved to %s (%s)", file, error)
        with suppress(FileNotFoundError):
            staged.unlink()


def load_mirror(file: Path, mark: int, rows: int, tokens: int) -> LexicalIndex | None:
    """The saved mirror if it holds exactly ``lt_fts`` at ``mark`` with FTS5's ``rows`` and ``tokens``, else None."""
    try:
        with np.load(file, allow_pickle=False) as saved:
            head = saved["format"].tolist()
            if head != [_FORMAT, mark, rows, tokens]:
                return None
            return _index({name: saved[name] for name in saved.files})
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, json.JSONDecodeError) as error:
        _log.warning("the saved BM25 mirror %s is unreadable (%s): built again from FTS5", file, error)
        return None


def _text(value: Any) -> np.ndarray:
    return np.frombuffer(json.dumps(value).encode("utf-8", "surrogatepass"), dtype=np.uint8)


def _untext(array: np.ndarray) -> Any:
    return json.loads(array.tobytes().decode("utf-8", "surrogatepass"))


def _joined(parts: list[np.ndarray], dtype: type) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.asarray([len(part) for part in parts], dtype=np.int64)
    return (np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype=dtype)), lengths


def _split(joined: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
    return np.split(joined, np.cumsum(lengths)[:-1]) if len(lengths) else []


def _arrays(index: LexicalIndex) -> dict[str, np.ndarray]:
    words = list(index.vocabulary)  # in id order: ids are handed out as words arrive
    unowned = [(seq, place) for seq, (_, place) in index.where.items() if isinstance(place, tuple)]  # no container's
    out: dict[str, np.ndarray] = {
        "format": np.asarray([_FORMAT, index.mark, index.rows, index.tokens], dtype=np.int64),
        "words": _text(words),
        "df": index.df[: len(words)],
        "owners": _text(list(index.owners)),
        "containers": _text(list(index.shards)),
        "unowned_seqs": np.asarray([seq for seq, _ in unowned], dtype=np.int64),
        "unowned_lengths": np.asarray([place[2] for _, place in unowned], dtype=np.int64),
    }
    out["unowned_terms"], out["unowned_counts"] = _joined([place[0] for _, place in unowned], np.int64)
    out["unowned_tfs"], _ = _joined([place[1] for _, place in unowned], np.float64)
    for number, shard in enumerate(index.shards.values()):
        segments, pending = shard.state
        prefix, n = f"s{number}.", shard.n
        out[prefix + "head"] = np.asarray([n, shard.dead], dtype=np.int64)
        for name in ("seq_of", "doclen", "owner_of", "live"):
            out[prefix + name] = getattr(shard, name)[:n]
        out[prefix + "lows"] = np.asarray([segment.low for segment in segments], dtype=np.int64)
        for name in _SEGMENT_ARRAYS:
            parts = [getattr(segment, name) for segment in segments]
            dtype = parts[0].dtype.type if parts else np.float64
            out[prefix + name], out[prefix + name + ".lengths"] = _joined(parts, dtype)
        out[prefix + "pending_terms"], out[prefix + "pending_counts"] = _joined([t for t, _ in pending], np.int64)
        out[prefix + "pending_tfs"], _ = _joined([f for _, f in pending], np.float64)
    return out


def _index(saved: dict[str, np.ndarray]) -> LexicalIndex:
    index = LexicalIndex()
    _, index.mark, index.rows, index.tokens = saved["format"].tolist()
    index.vocabulary = {word: n for n, word in enumerate(_untext(saved["words"]))}
    index.df = saved["df"].astype(np.int64)
    index.owners = {(organization, user): n for n, (organization, user) in enumerate(_untext(saved["owners"]))}
    counts = saved["unowned_counts"]
    for seq, length, terms, tfs in zip(
        saved["unowned_seqs"].tolist(),
        saved["unowned_lengths"].tolist(),
        _split(saved["unowned_terms"], counts),
        _split(saved["unowned_tfs"], counts),
    ):
        index.where[seq] = (None, (terms, tfs, length))
    for number, container_id in enumerate(_untext(saved["containers"])):
        prefix = f"s{number}."
        n, dead = saved[prefix + "head"].tolist()
        shard = Shard(
            seq_of=saved[prefix + "seq_of"],
            doclen=saved[prefix + "doclen"],
            owner_of=saved[prefix + "owner_of"],
            live=saved[prefix + "live"],
            n=n,
            dead=dead,
        )
        parts = {name: _split(saved[prefix + name], saved[prefix + name + ".lengths"]) for name in _SEGMENT_ARRAYS}
        lows = saved[prefix + "lows"].tolist()
        segments = tuple(
            Segment(low, **{name: parts[name][i] for name in _SEGMENT_ARRAYS}) for i, low in enumerate(lows)
        )
        counts = saved[prefix + "pending_counts"]
        pending = list(
            zip(_split(saved[prefix + "pending_terms"], counts), _split(saved[prefix + "pending_tfs"], counts))
        )
        shard.state = (segments, pending)
        index.shards[container_id] = shard
        live = np.flatnonzero(shard.live[:n])
        index.where.update(
            (seq, (container_id, ordinal)) for seq, ordinal in zip(shard.seq_of[live].tolist(), live.tolist())
        )
    return index
