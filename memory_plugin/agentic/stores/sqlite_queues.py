"""The embedded store's background queues: long-term docs waiting for their embedding (``pending = 1``) and
inferring adds waiting for their LLM work (``infer_jobs``), both written in the transaction that caused them.
Applying an infer job's result stays with the store (``SqliteAgenticStore.apply_infer``): it writes memories."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import numpy as np

from memory_plugin.agentic.stores.base import InferJob, PendingEmbedding, memory_text, normalised, owner_of
from memory_plugin.agentic.stores.fts import LoggedDatabase
from memory_plugin.agentic.stores.sqlite_tables import BATCH, dumps
from memory_plugin.agentic.stores.vectors import Matrix, OwnerKey

T = TypeVar("T")


class SqliteQueues:
    """Mixed into ``SqliteAgenticStore``, which provides the database, its writes and the vector mirror."""

    db: LoggedDatabase

    async def _write(self, work: Callable[[sqlite3.Connection], T], after: Callable[[T], None] | None = None) -> T:
        raise NotImplementedError

    def _index(self, container_id: str, dimension: int) -> Matrix:
        raise NotImplementedError

    async def pending_embeddings(self, limit: int, skip: Iterable[str] = ()) -> list[PendingEmbedding]:
        skipped = sorted(skip)[:BATCH]
        sql = (
            "SELECT seq, organization_id, user_id, container_id, doc FROM memories WHERE pending = 1 "
            f"AND container_id NOT IN ({', '.join('?' * len(skipped))}) ORDER BY seq LIMIT ?"
        )

        def read(c: sqlite3.Connection) -> list[PendingEmbedding]:
            return [
                PendingEmbedding(seq, owner_of(organization, user), container_id, memory_text(json.loads(doc)))
                for seq, organization, user, container_id, doc in c.execute(sql, (*skipped, limit))
            ]

        return await self.db.read(read)

    async def pending_count(self) -> int:
        return int(
            await self.db.read(lambda c: c.execute("SELECT count(*) FROM memories WHERE pending = 1").fetchone()[0])
        )

    async def infer_job_count(self) -> int:
        return int(await self.db.read(lambda c: c.execute("SELECT count(*) FROM infer_jobs").fetchone()[0]))

    async def store_embeddings(self, rows: Sequence[tuple[Any, str, np.ndarray]]) -> int:
        def store(c: sqlite3.Connection) -> list[tuple[str, int, np.ndarray, OwnerKey]]:
            stored = []
            for seq, text, vector in rows:
                row = c.execute(
                    "SELECT container_id, doc, organization_id, user_id FROM memories WHERE seq = ? AND pending = 1",
                    (seq,),
                ).fetchone()
                if row is None or memory_text(json.loads(row[1])) != text:
                    continue  # deleted or changed meanwhile: a newer embedding is pending
                unit = normalised(vector)
                c.execute("UPDATE memories SET vector = ?, pending = 0 WHERE seq = ?", (unit.tobytes(), seq))
                stored.append((row[0], seq, unit, (row[2], row[3])))
            return stored

        def index(stored: list[tuple[str, int, np.ndarray, OwnerKey]]) -> None:
            for container_id, seq, unit, owner in stored:
                self._index(container_id, len(unit)).add(
                    np.asarray([seq], dtype=np.int64), unit.reshape(1, -1), [owner]
                )

        stored = await self._write(store, index)
        return len(stored)

    async def infer_jobs(self, limit: int) -> list[InferJob]:
        def read(c: sqlite3.Connection) -> list[InferJob]:
            rows = c.execute("SELECT * FROM infer_jobs ORDER BY job_id LIMIT ?", (limit,))
            return [
                InferJob(
                    row["job_id"],
                    owner_of(row["organization_id"], row["user_id"]),
                    row["container_id"],
                    json.loads(row["request"]),
                    row["attempts"],
                    answers=json.loads(row["answers"]),
                )
                for row in rows
            ]

        return await self.db.read(read)

    async def keep_infer_answers(self, job: InferJob) -> bool:
        answers = dumps(job.answers)
        await self._write(
            lambda c: c.execute("UPDATE infer_jobs SET answers = ? WHERE job_id = ?", (answers, job.job_id))
        )
        return True

    async def count_infer_attempt(self, job: InferJob) -> None:
        await self._write(
            lambda c: c.execute("UPDATE infer_jobs SET attempts = attempts + 1 WHERE job_id = ?", (job.job_id,))
        )
