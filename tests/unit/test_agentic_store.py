"""The embedded agentic store's own logic: the vector mirror (deletes, compaction, filters, reload at open),
FTS5 ranking scoped to owner and container, embeddings that only land on current text, and a session's touch."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import numpy as np
import pytest

from memory_plugin.agentic.models import LONG_TERM, SESSIONS, WORKING
from memory_plugin.agentic.stores import vectors
from memory_plugin.agentic.stores.base import LongTermScope, MemoryAdd, SessionWrite
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


@pytest.fixture
def wide_walks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Graphs from 2,000 rows, walks planned as narrow (on 3,000 rows they beat the scan) and made wide (the
    exact top k on so few rows); the walks taken, by candidate count.  Built with a third of the server's
    efConstruction (the planner does not read it; the builds were most of these tests' time)."""
    monkeypatch.setattr(vectors, "GRAPH_MIN_ROWS", 2_000)
    monkeypatch.setattr(vectors, "EF_CONSTRUCTION", 40)
    monkeypatch.setattr(vectors, "EF_SEARCH", 128)
    walks: list[int] = []

    def counted(hnsw, query, k, candidates, mask, ef):  # type: ignore[no-untyped-def]
        walks.append(len(candidates))
        return walk(hnsw, query, k, candidates, mask, max(ef, 1_024))

    monkeypatch.setattr(vectors, "walk", counted)
    return walks


@pytest.mark.slow
async def test_a_large_containers_graph_follows_its_writes_and_comes_back_at_reopening(tmp_path, wide_walks: list[int]):  # type: ignore[no-untyped-def]
    store = SqliteAgenticStore(tmp_path / "a.sqlite3")
    await store.open(128)
    await fill(store, ALICE, "c1", [f"memory number {n}" for n in range(3000)], dim=128)
    matrix = store._indexes["c1"]
    await until(lambda: matrix.graph_ready and not matrix.building)  # built again until its tail is short
    saved = matrix.graph.rows  # type: ignore[union-attr]
    assert 3000 * 0.8 <= saved <= 3000
    hits = await store.knn(LongTermScope(ALICE, "c1"), unit(7, 128), 3)
    assert hits[0][0].id == "c1-7" and wide_walks == [saved]  # all pass: the walk
    assert (await store.knn(LongTermScope(ALICE, "c1"), unit(2999, 128), 1))[0][0].id == "c1-2999"  # graph or tail
    assert await store.knn(LongTermScope(BOB, "c1"), unit(7, 128), 3) == []
    await store.close()
    reopened = SqliteAgenticStore(tmp_path / "a.sqlite3")
    await reopened.open(128)
    matrix = reopened._indexes["c1"]
    assert matrix.graph_ready and matrix.graph.rows == saved and not matrix.building  # type: ignore[union-attr]
    assert (await reopened.knn(LongTermScope(ALICE, "c1"), unit(2500, 128), 1))[0][0].id == "c1-2500"
    assert wide_walks[-1] == saved and len(wide_walks) == 3  # walked at once: the saved graph, not built again
    await reopened.close()


@pytest.mark.slow
async def test_a_saved_graph_is_checked_against_sqlite_at_reopening(tmp_path, wide_walks: list[int]):  # type: ignore[no-untyped-def]
    """Memories deleted or given new vectors after the graph was saved are dead rows of it, new ones its tail;
    a torn file is built again, and the files of containers gone are removed."""
    store = SqliteAgenticStore(tmp_path / "a.sqlite3")
    await store.open(128)
    seqs = await fill(store, ALICE, "c1", [f"memory number {n}" for n in range(3000)], dim=128)
    await fill(store, ALICE, "c2", [f"other memory {n}" for n in range(2500)], dim=128)
    one, two = store._indexes["c1"], store._indexes["c2"]
    await until(lambda: all(m.graph_ready and not m.building for m in (one, two)))
    saved = one.graph.rows  # type: ignore[union-attr]
    await store.delete_ids(ALICE, "c1", LONG_TERM, [f"c1-{n}" for n in range(0, 3000, 10)])
    moved = {n: unit(10_000 + n, 128) for n in (7, 501, 1503)}  # rewritten: each now points elsewhere
    for n in moved:
        doc = {"memory": f"moved {n}", "namespace": {"user_id": f"u{n % 2}"}, "namespace_size": 1}
        assert await store.replace(ALICE, "c1", LONG_TERM, f"c1-{n}", doc) is not None
    assert await store.store_embeddings([(seqs[n], f"moved {n}", vector) for n, vector in moved.items()]) == 3
    await fill(store, ALICE, "c3", [f"third {n}" for n in range(10)], dim=128)
    await store.delete_container(ALICE, "c3")
    await store.close()
    folder = tmp_path / "a.sqlite3.graphs"
    files = {path.name: path for path in folder.iterdir()}
    assert len(files) == 4  # c3's was never built; c1's and c2's were saved (graph and seqs)
    (folder / "0123456789abcdef0123456789abcdef.npz").write_bytes(b"a container gone")
    torn = two.graph_file
    torn.write_bytes(torn.read_bytes()[: torn.stat().st_size // 2])  # type: ignore[union-attr]

    reopened = SqliteAgenticStore(tmp_path / "a.sqlite3")
    await reopened.open(128)
    one, two = reopened._indexes["c1"], reopened._indexes["c2"]
    assert one.graph_ready and one.graph.rows == saved  # type: ignore[union-attr]
    assert np.count_nonzero(~one.live[:saved]) == 300 + 3  # the deleted and the re-embedded
    assert one.size == 2700 and not two.graph_ready  # the torn file: built again
    assert sorted(path.name for path in folder.iterdir()) == sorted(files)
    scope = LongTermScope(ALICE, "c1")
    for n in (7, 501, 1503):
        assert (await reopened.knn(scope, moved[n], 1))[0][0].id == f"c1-{n}"  # its new vector, in the tail
        assert [doc.id for doc, _ in await reopened.knn(scope, unit(n, 128), 3)][0] != f"c1-{n}"  # not the old
    walked = len(wide_walks)
    for n in (1, 22, 2999):
        found = [doc.id for doc, _ in await reopened.knn(scope, unit(n, 128), 5)]
        assert found[0] == f"c1-{n}" and f"c1-{n - n % 10}" not in found[1:]  # deleted ones never come back
    assert len(wide_walks) == walked + 3
    await until(lambda: two.graph_ready and not two.building)
    assert (await reopened.knn(LongTermScope(ALICE, "c2"), unit(4, 128), 1))[0][0].id == "c2-4"
    await reopened.delete_container(ALICE, "c1")
    assert not one.graph_file.exists()  # type: ignore[union-attr]
    await reopened.close()


async def test_an_add_touches_its_session_in_sql_keeping_every_other_byte_of_it(tmp_path):
    store = SqliteAgenticStore(tmp_path / "agentic.sqlite3")
    await store.open(8)
    try:
        await store.insert_container(ALICE, "c1", {"name": "c1"})
        doc = {"summary": "caf\u00e9 \ud800 \U0001f600", "big": 10**30, "created_time": 1, "last_updated_time": 1}
        first = SessionWrite("s1", doc, touched_time=1)
        assert await store.add_memory(ALICE, "c1", MemoryAdd("w1", {"session_id": "s1"}, first))
        assert first.created
        before = await store.get(ALICE, "c1", SESSIONS, "s1")
        touch = SessionWrite("s1", doc, touched_time=7)
        assert await store.add_memory(ALICE, "c1", MemoryAdd("w2", {"session_id": "s1"}, touch))
        after = await store.get(ALICE, "c1", SESSIONS, "s1")
        assert not touch.created and after.source == {**doc, "last_updated_time": 7}
        assert list(after.source) == list(doc)  # the field keeps its place
        assert after.version == before.version + 1
        working = await store.get(ALICE, "c1", WORKING, "w2")
        assert after.seq_no == working.seq_no - 1  # taken in order, none lost
        # Bob's add naming Alice's session neither touches it nor creates his own of that id
        other = SessionWrite("s1", {"created_time": 2}, touched_time=9)
        assert await store.add_memory(BOB, "c1", MemoryAdd("w3", {"session_id": "s1"}, other))
        assert not other.created and (await store.get(ALICE, "c1", SESSIONS, "s1")).source == after.source
        assert (await store.get(BOB, "c1", WORKING, "w3")).seq_no == working.seq_no + 1  # no seq_no for no touch
    finally:
        await store.close()
