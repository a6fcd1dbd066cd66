"""The one interface every region store implements.

The SQLite store (SQLite + faiss) and the OpenSearch store both implement
it, and one contract suite (``tests/support/store_contract.py``) runs against both.
A record's identity is ``(organization_id, record_id)``; every operation is
scoped to one organisation.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from memory_plugin.errors import InvalidArgument
from memory_plugin.histories.stores.claims import RecordClaims
from memory_plugin.histories.stores.filters import Filter
from memory_plugin.histories.stores.local_claims import LocalRecordClaims
from memory_plugin.histories.stores.records import Chunk, DeleteCounts, Hit, Record


class HistoryStore(abc.ABC):
    """A region's store of record chunks and their vectors."""

    @abc.abstractmethod
    async def open(self, dimension: int) -> None:
        """Create or load what the store needs; vectors have ``dimension`` floats."""

    @abc.abstractmethod
    async def close(self) -> None: ...

    @abc.abstractmethod
    async def write_records(self, items: Sequence[tuple[Record, Sequence[Chunk]]]) -> list[str]:
        """Write each record with its chunks, replacing any chunks it had before.

        Each record is atomic: after a crash it has all of its new chunks or
        all of its old ones, never a mix. Returns what ``following`` would for the written ids: the stored
        records whose context the write changed (the write already finds them to lend them its words).
        """

    @abc.abstractmethod
    async def preceding_texts(self, records: Sequence[tuple[Record, str]]) -> dict[str, tuple[int, str]]:
        """For records about to be written, each with its last chunk's text: ``record_id →`` the record just
        before it in its user's timeline here (the batch's own records count as well): its
        ``record_created_at`` in microseconds since the epoch, and its last chunk's text.

        A record without a ``user_id``, or first in its timeline, has none. What is read is what is stored
        now: a concurrent writer may change it before these records are written.
        """

    @abc.abstractmethod
    async def following(self, organization_id: str, record_ids: Sequence[str]) -> list[str]:
        """The id of the record just after each of ``record_ids`` in its user's timeline here, unless it is one
        of them: the records whose context writing or deleting ``record_ids`` changes. Ask after a write,
        before a delete."""

    @abc.abstractmethod
    async def read_records(self, organization_id: str, record_ids: Sequence[str]) -> list[tuple[Record, list[Chunk]]]:
        """Those of ``record_ids`` stored here, each with its chunks in order, vectors included."""

    @abc.abstractmethod
    async def record_owners(self, organization_id: str, record_ids: Sequence[str]) -> dict[str, str | None]:
        """``record_id → user_id`` for those of ``record_ids`` the organisation has here."""

    @abc.abstractmethod
    async def delete_record(self, organization_id: str, record_id: str) -> int:
        """Delete one record; return how many chunks went (0 when unknown)."""

    @abc.abstractmethod
    async def delete_matching(self, organization_id: str, where: Filter) -> DeleteCounts:
        """Delete every record of the organisation whose fields match ``where``."""

    @abc.abstractmethod
    async def search(
        self,
        organization_id: str,
        record_type: str,
        vector: np.ndarray,
        where: Filter,
        k: int,
        min_score: float | None = None,
    ) -> list[Hit]:
        """The ``k`` chunks nearest to ``vector`` by cosine, best first.

        ``where`` applies before ranking (efficient filtering), so a filter
        never starves the result of matches that exist.
        """

    @abc.abstractmethod
    async def keyword_search(
        self, organization_id: str, record_type: str, text: str, where: Filter, k: int
    ) -> list[Hit]:
        """The ``k`` chunks that best match ``text``'s words by BM25 (any word may match), best first.

        A chunk's words are its text and, for a record with a ``user_id``, the last chunk of the record
        before it in that user's timeline (a conversation's previous turn). Scores are BM25's, so they
        compare within one region, as a shard's do.
        """

    @abc.abstractmethod
    async def neighbours(self, organization_id: str, hits: Sequence[Hit]) -> dict[str, list[Hit]]:
        """For each hit (by ``Hit.id``), the chunks just before and after it, with score 0: the same record's,
        else the last chunk of the record before it and the first of the record after it in the user's timeline.

        Filters do not apply: the caller keeps the neighbours its query may see.
        """

    async def hybrid_search(
        self, organization_id: str, record_type: str, vector: np.ndarray, text: str, where: Filter, k: int
    ) -> list[Hit] | None:
        """The ``k`` best of the hybrid ranking (``histories.stores.fusion``: both lists fused, neighbours lifted) ranked
        on chunk ids inside the store, only the ``k`` read; None where the store has no such path, and the
        service composes it from ``search``, ``keyword_search`` and ``neighbours``."""
        return None

    @abc.abstractmethod
    async def health(self) -> dict[str, Any]:
        """A small JSON-able status; raises when the store cannot serve."""

    def record_claims(self) -> RecordClaims:
        """The record-id claims of a deployment whose home region this is: this process's locks, enough for a
        store only this process writes; a store that many processes share holds them where they all see them."""
        return LocalRecordClaims()


def unit_vector(vector: np.ndarray, dimension: int) -> np.ndarray:
    """``vector`` as float32 of unit length; a 400 if it has the wrong dimension, is not finite, or is zero."""
    array = np.asarray(vector, dtype=np.float32).reshape(-1)
    if array.shape[0] != dimension:
        raise InvalidArgument(f"vector has {array.shape[0]} dimensions, the store has {dimension}")
    norm = float(np.linalg.norm(array))
    if not math.isfinite(norm) or norm == 0.0:
        raise InvalidArgument("vector must be finite and non-zero")
    return array / np.float32(norm)
