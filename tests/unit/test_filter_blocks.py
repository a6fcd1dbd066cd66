"""Contiguous copies of a repeated filter's rows: the same scores as the rows where they are, however the
index changed in between, and within their memory budget."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from memory_plugin.histories.stores import filter_blocks
from memory_plugin.histories.stores.filter_blocks import MIN_ROWS, FilterBlocks
from memory_plugin.histories.stores.filters import DATE_FIELDS, TOP_LEVEL_FIELDS, Condition, Filter
from memory_plugin.histories.stores.vector_index import IndexParams, TypeIndex
from memory_plugin.vector_scan import exact_scores

DIM = 16


def matrix(rows: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, DIM), dtype=np.float32)


def scores_through(blocks: FilterBlocks, key: object, candidates: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    copied = blocks.rows(key, candidates, vectors, len(vectors))
    scanned, rows = copied if copied is not None else (vectors, candidates)
    return exact_scores(scanned, rows, np.ones(DIM, dtype=np.float32))


def test_a_filter_is_copied_on_its_second_search_and_scores_as_in_place() -> None:
    vectors = matrix(20_000)
    candidates = np.arange(3, 20_000, 10, dtype=np.int64)
    blocks = FilterBlocks()
    expected = exact_scores(vectors, candidates, np.ones(DIM, dtype=np.float32))
    assert np.array_equal(scores_through(blocks, "f", candidates, vectors), expected)
    assert len(blocks) == 0  # seen once: remembered, not copied
    assert np.array_equal(scores_through(blocks, "f", candidates, vectors), expected)
    assert len(blocks) == 1 and blocks.size >= len(candidates) * DIM * 4
    block, rows = blocks.rows("f", candidates, vectors, len(vectors)) or (None, None)
    assert block is not vectors and rows is not None and np.array_equal(block[rows], vectors[candidates])


def test_writes_kills_and_another_filter_under_the_key_keep_scores_exact() -> None:
    """A block extended by new rows, read with killed ones left out, and rebuilt for rows it never held."""
    vectors = matrix(60_000, seed=1)
    blocks = FilterBlocks()
    rng = np.random.default_rng(2)
    used = 10_000
    chosen = np.flatnonzero(rng.random(len(vectors)) < 0.1)
    killed = np.zeros(len(vectors), dtype=bool)
    for step in range(12):
        if step % 3 == 1:
            used += 5_000  # written since: the block is extended
        if step % 3 == 2:
            killed[rng.choice(used, 300, replace=False)] = True  # deleted since: rows left unread
        if step == 9:
            chosen = np.flatnonzero(rng.random(len(vectors)) < 0.1)  # another filter under the same key
        candidates = chosen[(chosen < used) & ~killed[chosen]]
        view = vectors[:used]
        expected = exact_scores(view, candidates, np.ones(DIM, dtype=np.float32))
        assert np.array_equal(scores_through(blocks, "user-0", candidates, view), expected), step
    assert len(blocks) == 1


def test_an_older_reader_is_answered_from_a_block_extended_past_it() -> None:
    vectors = matrix(30_000, seed=3)
    candidates = np.arange(0, 30_000, 10, dtype=np.int64)
    blocks = FilterBlocks()
    for _ in range(2):
        blocks.rows("f", candidates, vectors, len(vectors))
    older = candidates[candidates < 10_000]  # a search that began before the last writes
    expected = exact_scores(vectors, older, np.ones(DIM, dtype=np.float32))
    assert np.array_equal(scores_through(blocks, "f", older, vectors[:10_000]), expected)


def test_a_mostly_killed_block_is_copied_afresh() -> None:
    vectors = matrix(40_000, seed=4)
    blocks = FilterBlocks()
    everything = np.arange(0, 40_000, 10, dtype=np.int64)
    for _ in range(2):
        blocks.rows("f", everything, vectors, len(vectors))
    assert blocks.size >= len(everything) * DIM * 4
    survivors = everything[::4]
    expected = exact_scores(vectors, survivors, np.ones(DIM, dtype=np.float32))
    assert np.array_equal(scores_through(blocks, "f", survivors, vectors), expected)
    assert blocks.size < len(everything) * DIM * 4  # the killed rows were let go


def test_small_sets_and_long_runs_are_not_copied_and_blocks_stay_within_the_budget() -> None:
    vectors = matrix(80_000, seed=5)  # 5 MB: a quarter of it is more than the budget below
    budget = 3 * 4_000 * DIM * 4 + 3 * 4_000 * 8
    blocks = FilterBlocks(budget)
    small = np.arange(MIN_ROWS - 1, dtype=np.int64)
    runs = np.concatenate([np.arange(start, start + 100) for start in range(0, 80_000, 2_000)])
    for _ in range(3):
        assert blocks.rows("small", small, vectors, len(vectors)) is None
        assert blocks.rows("runs", runs, vectors, len(vectors)) is None  # streamed where they lie
    for name in range(6):
        candidates = np.arange(name, 80_000, 20, dtype=np.int64)  # 4,000 rows each
        for _ in range(2):
            blocks.rows(name, candidates, vectors, len(vectors))
        assert blocks.size <= budget
    assert len(blocks) == 3  # the three most recent
    assert blocks.rows(5, np.arange(5, 80_000, 20, dtype=np.int64), vectors, len(vectors)) is not None
    too_big = np.arange(0, 80_000, 2, dtype=np.int64)  # more than half the budget
    for _ in range(2):
        assert blocks.rows("big", too_big, vectors, len(vectors)) is None
    kept_none = FilterBlocks(0)  # filter_cache_mb = 0
    for _ in range(3):
        assert kept_none.rows("f", np.arange(5, 80_000, 20, dtype=np.int64), vectors, len(vectors)) is None
    small_index = vectors[:16_000]  # a quarter of its vectors is 256 kB: 4,000 rows would take all of it
    on_small = FilterBlocks(budget)
    for _ in range(3):
        assert on_small.rows("f", np.arange(0, 16_000, 4, dtype=np.int64), small_index, 16_000) is None


def test_parallel_searches_extending_one_block_read_exact_rows() -> None:
    vectors = matrix(80_000, seed=6)
    chosen = np.arange(1, 80_000, 9, dtype=np.int64)
    blocks = FilterBlocks()
    failures: list[int] = []

    def search(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(200):
            used = int(rng.integers(10_000, 80_001))
            candidates = chosen[chosen < used]
            copied = blocks.rows("f", candidates, vectors[:used], used)
            if copied is not None and not np.array_equal(copied[0][copied[1]], vectors[candidates]):
                failures.append(used)

    threads = [threading.Thread(target=search, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures and len(blocks) == 1


def test_the_index_scans_a_repeated_filter_from_its_block_with_the_same_results() -> None:
    params = IndexParams(dimension=DIM, hnsw_m=8, ef_construction=40, ef_search=40, exact_threshold=200_000)
    index = TypeIndex(params, TypeIndex.new_hnsw(params), 30_000)
    rng = np.random.default_rng(7)
    vectors = matrix(30_000, seed=8)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    users = [f"user-{i % 20}" for i in range(30_000)]
    rows = [tuple(0 if field in DATE_FIELDS else None for field in TOP_LEVEL_FIELDS) for _ in range(30_000)]
    rows = [(user, *row[1:]) for user, row in zip(users, rows)]
    index.append(np.arange(1, 30_001), vectors, np.zeros(30_000, dtype=np.int32), rows, to_hnsw=False)
    where = Filter((Condition("user_id", "eq", ("user-3",)),))
    query = vectors[rng.integers(30_000)]
    first = index.search(query, 0, 10, where=where, path="exact")
    again = index.search(query, 0, 10, where=where, path="exact")
    assert len(index.blocks) == 1 and first == again
    passing = np.flatnonzero(np.array(users) == "user-3")
    expected = sorted(zip((passing + 1).tolist(), (vectors[passing] @ query).tolist()), key=lambda hit: -hit[1])[:11]
    # exact on any CPU: neighbours in the order differ by far more than float32 rounding of 16-term sums
    assert all(a[1] - b[1] > 1e-5 for a, b in zip(expected, expected[1:]))
    expected = expected[:10]
    assert [chunk for chunk, _ in again] == [chunk for chunk, _ in expected]


def test_the_same_candidates_again_are_read_without_a_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """A filter's kept answer (one array, ``TypeIndex.selected``) reads its block's rows as last time; an equal
    array that is another object is checked again, and a changed one is extended."""
    vectors = matrix(20_000, seed=3)
    candidates = np.arange(5, 20_000, 11, dtype=np.int64)
    blocks = FilterBlocks()
    blocks.rows("f", candidates, vectors, len(vectors))
    first = blocks.rows("f", candidates, vectors, len(vectors))
    checks: list[int] = []
    real = filter_blocks._extended
    monkeypatch.setattr(filter_blocks, "_extended", lambda *args: checks.append(1) or real(*args))
    again = blocks.rows("f", candidates, vectors, len(vectors))
    assert first is not None and again is not None and again[1] is first[1] and checks == []
    blocks.rows("f", candidates.copy(), vectors, len(vectors))
    assert checks == [1]
    fewer = candidates[1:]
    block, rows = blocks.rows("f", fewer, vectors, len(vectors)) or (None, None)
    assert checks == [1, 1] and block is not None and np.array_equal(block[rows], vectors[fewer])
