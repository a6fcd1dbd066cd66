"""The embedded agentic store's own logic: the vector mirror (deletes, compaction, filters, reload at open),
FTS5 ranking scoped to owner and container, and embeddings that only land on current text."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import numpy as np
import pytest

from memory_plugin.agentic.models import LONG_TERM
from memory_plugin.agentic.stores import vectors
from memory_plugin.agentic.stores.base import LongTermScope, MemoryAdd
from memory_plugin.agentic.stores.fts import fts_query
from memory_plugin.agentic.stores.sqlite import SqliteAgenticStore
from memory_plugin.auth import Principal
from memory_plugin.vector_plan import walk

ALICE, BOB = Principal("org-1", "alice"), Principal("org-1", "bob")


def unit(seed: int, dim: int = 8) -> np.ndarray:
    vector = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return vector / np.linalg.norm(vector)


async def fill(
    store: SqliteAgenticStore, owner: Principal, container_id: str, texts: list[str], dim: int = 8
) -> list[int]:
    await store.insert_container(owner, container_id, {"name": container_id})

    def insert(c):  # type: ignore[no-untyped-def]
        return [
            store._insert(
                c,
                owner,
                container_id,
                LONG_TERM,
                f"{container_id}-{n}",
                {"memory": text, "namespace": {"user_id": f"u{n % 2}"}, "namespace_size": 1},
            ).seq
            for n, text in enumerate(texts)
        ]

    seqs = await store.db.write(insert)
    assert await store.pending_count() == len(texts)
    await store.store_embeddings([(seq, text, unit(n, dim)) for n, (seq, text) in enumerate(zip(seqs, texts))])
    return list(seqs)


async def test_vectors_survive_deletes_compaction_and_reopening(tmp_path):
    store = SqliteAgenticStore(tmp_path / "a.sqlite3")
    await store.open(8)
    texts = [f"memory number {n}" for n in range(3000)]
    await fill(store, ALICE, "c1", texts)
    assert await store.pending_count() == 0
    hits = await store.knn(LongTermScope(ALICE, "c1"), unit(7), 3)
    # a float32 unit vector with itself: 8 products rounded to float32 stay within 1e-6 of 1
    assert hits[0][0].id == "c1-7" and abs(hits[0][1] - 1.0) < 1e-5
    deleted = await store.delete_ids(ALICE, "c1", LONG_TERM, [f"c1-{n}" for n in range(2000)])  # compacts
    assert deleted == 2000
    assert [doc.id for doc, _ in await store.knn(LongTermScope(ALICE, "c1"), unit(7), 3)][0] != "c1-7"
    assert (await store.knn(LongTermScope(ALICE, "c1"), unit(2500), 1))[0][0].id == "c1-2500"
    only_u0 = await store.knn(LongTermScope(ALICE, "c1", terms=[("namespace.user_id", "u0")]), unit(2501), 5)
    assert {doc.source["namespace"]["user_id"] for doc, _ in only_u0} == {"u0"} and len(only_u0) == 5
    assert await store.knn(LongTermScope(BOB, "c1"), unit(2500), 3) == []  # not bob's container
    await store.close()
    reopened = SqliteAgenticStore(tmp_path / "a.sqlite3")
    await reopened.open(8)
    assert (await reopened.knn(LongTermScope(ALICE, "c1"), unit(2500), 1))[0][0].id == "c1-2500"
    assert len(await reopened.knn(LongTermScope(ALICE, "c1"), unit(1), 5000)) == 1000
    await reopened.close()


async def test_bm25_ranks_within_owner_and_container_only(tmp_path):
    store = SqliteAgenticStore(tmp_path / "a.sqlite3")
    await store.open(8)
    await fill(store, ALICE, "c1", ["router router router", "router and modem", "invoice"])
    await fill(store, BOB, "c2", ["router " * 20] * 50)  # bob's many better matches are never alice's
    hits = await store.bm25(LongTermScope(ALICE, "c1"), "router", 5)
    assert [doc.id for doc, _ in hits] == ["c1-0", "c1-1"] and hits[0][1] > hits[1][1] > 0
    only_u1 = LongTermScope(ALICE, "c1", terms=[("namespace.user_id", "u1")])
    assert [doc.id for doc, _ in await store.bm25(only_u1, "router", 5)] == ["c1-1"]
    assert await store.bm25(LongTermScope(ALICE, "c1"), "!!! ???", 5) == []
    assert fts_query('say "NEAR" (x) OR y*') == '"say" OR "NEAR" OR "x" OR "OR" OR "y"'  # words, never operators
    await store.close()


async def test_an_embedding_lands_only_on_the_text_it_was_made_from(tmp_path):
    store = SqliteAgenticStore(tmp_path / "a.sqlite3")
    await store.open(8)
    [seq] = await fill(store, ALICE, "c1", ["old text"])
    doc = (await store.get(ALICE, "c1", LONG_TERM, "c1-0")).source  # type: ignore[union-attr]
    await store.replace(ALICE, "c1", LONG_TERM, "c1-0", {**doc, "memory": "new text"})
    assert await store.pending_count() == 1 and await store.knn(LongTermScope(ALICE, "c1"), unit(0), 1) == []
    assert await store.store_embeddings([(seq, "old text", unit(0))]) == 0  # a late answer for the old text
    assert await store.store_embeddings([(seq, "new text", unit(5))]) == 1
    assert (await store.knn(LongTermScope(ALICE, "c1"), unit(5), 1))[0][0].source["memory"] == "new text"
    await store.close()


async def test_the_infer_job_backlog_counts_every_queued_job(tmp_path):  # type: ignore[no-untyped-def]
    """What ``backlog.agentic_infer_jobs`` reads: the jobs queued and not yet applied."""
    store = SqliteAgenticStore(tmp_path / "agentic.sqlite3")
    await store.open(8)
    try:
        owner = Principal("org-1", "alice")
        assert await store.insert_container(owner, "c", {"name": "c", "configuration": {}}) is not None
        assert await store.infer_job_count() == 0
        for n in range(3):
            add = MemoryAdd(f"w{n}", {"created_time": n}, infer_request={"n": n})
            assert await store.add_memory(owner, "c", add)
        assert await store.infer_job_count() == 3
        [job, *_] = await store.infer_jobs(3)
        await store.apply_infer(job, [], [])
        assert await store.infer_job_count() == 2
    finally:
        await store.close()


async def until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, "never came true"
        await asyncio.sleep(0.01)


async def test_a_large_containers_graph_follows_its_writes_and_is_built_again_after_reopening(
    tmp_path, monkeypatch: pytest.MonkeyPatch
):  # type: ignore[no-untyped-def]
    monkeypatch.setattr(vectors, "GRAPH_MIN_ROWS", 2_000)
    monkeypatch.setattr(vectors, "EF_SEARCH", 128)  # walks planned as narrow: on 3,000 rows they beat the scan
    walks: list[int] = []

    def counted(hnsw, query, k, candidates, mask, ef):  # type: ignore[no-untyped-def]
        walks.append(len(candidates))
        return walk(hnsw, query, k, candidates, mask, max(ef, 1_024))  # wide: the exact top k on 3,000 rows

    monkeypatch.setattr(vectors, "walk", counted)
    store = SqliteAgenticStore(tmp_path / "a.sqlite3")
    await store.open(128)
    await fill(store, ALICE, "c1", [f"memory number {n}" for n in range(3000)], dim=128)
    matrix = store._indexes["c1"]
    await until(lambda: matrix.graph_ready and not matrix.building)  # built again until its tail is short
    assert 3000 * 0.8 <= matrix.graph.rows <= 3000  # type: ignore[union-attr]
    hits = await store.knn(LongTermScope(ALICE, "c1"), unit(7, 128), 3)
    assert hits[0][0].id == "c1-7" and walks == [matrix.graph.rows]  # type: ignore[union-attr]  # all pass: the walk
    assert (await store.knn(LongTermScope(ALICE, "c1"), unit(2999, 128), 1))[0][0].id == "c1-2999"  # graph or tail
    assert await store.knn(LongTermScope(BOB, "c1"), unit(7, 128), 3) == []
    await store.close()
    reopened = SqliteAgenticStore(tmp_path / "a.sqlite3")
    await reopened.open(128)
    matrix = reopened._indexes["c1"]
    assert (await reopened.knn(LongTermScope(ALICE, "c1"), unit(2500, 128), 1))[0][0].id == "c1-2500"  # scanned
    await until(lambda: matrix.graph_ready)
    assert (await reopened.knn(LongTermScope(ALICE, "c1"), unit(2500, 128), 1))[0][0].id == "c1-2500"
    assert len(walks) == 3
    await reopened.close()
