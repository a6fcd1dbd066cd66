"""The search planner: its choice, and that both paths it chooses between rank like brute force."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Literal

import numpy as np
import pytest

from memory_plugin import vector_plan as planner
from memory_plugin import vector_scan
from memory_plugin.histories.stores import vector_index
from memory_plugin.histories.stores.filters import Condition, Filter, matches
from memory_plugin.histories.stores.sqlite import SqliteHistoryStore
from memory_plugin.vector_plan import MODEL, graph_ef, plan
from tests.support.store_contract import DIM, StoreContract, unit
from tests.unit.test_metadata_columns import random_condition, write_random

DEFAULTS = {"k": 10, "ef_search": 128, "hnsw_m": 32, "dimension": 384, "exact_threshold": 20_000}


def test_small_candidate_sets_are_scanned_large_ones_walked() -> None:
    for total in (20_000, 100_000, 1_000_000):
        assert plan(total // 100, total, **DEFAULTS).exact  # 1%: a scan reads fewer rows than the walk visits
        assert not plan(total, total, **DEFAULTS).exact  # no filter: the graph
        assert not plan(total // 2, total, **DEFAULTS).exact
    assert plan(5, 1_000_000, **DEFAULTS).exact
    # the estimates order the same way as the choice
    small, large = plan(500, 100_000, **DEFAULTS), plan(90_000, 100_000, **DEFAULTS)
    assert small.exact_ns < small.graph_ns and large.graph_ns < large.exact_ns


def test_choice_grows_with_dimension_and_count() -> None:
    """Somewhere between 1% and 100% the choice flips once, and never back."""
    total = 100_000
    choices = [plan(count, total, **DEFAULTS).exact for count in range(100, total + 1, 100)]
    flips = sum(a != b for a, b in zip(choices, choices[1:]))
    assert choices[0] and not choices[-1] and flips == 1


def test_exact_threshold_is_a_ceiling_and_recall_a_floor() -> None:
    assert not plan(100, 100_000, **{**DEFAULTS, "exact_threshold": 0}).exact  # 0 forces the graph
    assert not plan(30_000, 100_000, **{**DEFAULTS, "exact_threshold": 20_000}).exact
    # a model under which the walk always looks cheaper still scans below the recall floor
    cheap_walk = replace(MODEL, graph_ns_per_unit=0.0, graph_fixed_ns=0.0, bitmap_ns_per_row=0.0)
    below = int(MODEL.min_graph_selectivity * 100_000) - 1
    assert plan(below, 100_000, **DEFAULTS, model=cheap_walk).exact
    assert not plan(below + 2, 100_000, **DEFAULTS, model=cheap_walk).exact
    assert plan(10, 100_000, **DEFAULTS, model=cheap_walk).exact  # no more candidates than k


def test_a_scan_shared_among_threads_is_chosen_for_more_candidates() -> None:
    one = [plan(count, 100_000, **DEFAULTS).exact for count in range(1000, 100_001, 1000)]
    two = [plan(count, 100_000, **DEFAULTS, scan_threads=2).exact for count in range(1000, 100_001, 1000)]
    assert sum(two) > sum(one) and all(b for a, b in zip(one, two) if a)  # every count scanned alone still is
    assert plan(5000, 100_000, **DEFAULTS, scan_threads=2).exact_ns < plan(5000, 100_000, **DEFAULTS).exact_ns


def test_a_larger_graph_is_walked_more_widely() -> None:
    """Up to 100k nodes the configured efSearch; beyond, wider (recall at 1M), then a filter widens it more."""
    assert graph_ef(100_000, 100_000, 10, 128) == 128
    assert graph_ef(20_000, 20_000, 10, 128) == 128
    widths = [graph_ef(total, total, 10, 128) for total in (200_000, 500_000, 1_000_000, 3_000_000)]
    assert widths == sorted(widths) and len(set(widths)) == 4 and 900 <= widths[2] <= 1100
    assert graph_ef(300_000, 1_000_000, 10, 128) > widths[2]  # 30% pass: more of the walk is wasted
    assert graph_ef(10, 10**9, 10, 128) == planner.MAX_EF  # capped
    assert graph_ef(5, 5, 50, 16) == 50  # never below k


class TestPlannerAlwaysScansContract(StoreContract):
    """The contract with the planner told that walks are dear: every search is an exact scan."""

    @pytest.fixture
    async def store(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[SqliteHistoryStore]:
        dear = replace(MODEL, graph_fixed_ns=1e18)
        monkeypatch.setattr(planner, "MODEL", dear)
        monkeypatch.setattr(vector_index, "plan", lambda *a, **kw: plan(*a, **{**kw, "model": dear}))
        store = SqliteHistoryStore(tmp_path / "usa", exact_threshold=10**9)
        await store.open(DIM)
        yield store
        await store.close()


def brute_force(index: vector_index.TypeIndex, positions: np.ndarray, query: np.ndarray, k: int) -> list[int]:
    """Chunk ids of the best ``k`` by inner product, ties by chunk id."""
    ids = index.ids[positions]
    scores = index.vectors[positions] @ query
    order = sorted(range(len(ids)), key=lambda i: (-float(scores[i]), int(ids[i])))
    return [int(ids[i]) for i in order[:k]]


@pytest.mark.slow
async def test_both_paths_agree_with_brute_force_over_random_filters(tmp_path: Path) -> None:
    """Hundreds of random filters on a seeded store: the scan, the walk and the planner's pick rank as brute force."""
    rng = random.Random(21)
    store = SqliteHistoryStore(tmp_path, ef_search=1024, exact_threshold=10**9)
    await store.open(DIM)
    try:
        items = await write_random(store, random.Random(8), 0, 1500)
        records = {f"r{i}": record for i, (record, _) in enumerate(items)}
        index = store._indexes["voice"]
        queries = unit(np.random.default_rng(4), 40)
        chunk_records = await store._db.run(
            lambda c: dict(c.execute("SELECT c.id, r.record_id FROM chunks c JOIN records r ON r.rid = c.rid"))
        )
        position_records = [records[chunk_records[int(chunk)]] for chunk in index.ids[: index.n]]
        paths: tuple[Literal["exact", "graph", "plan"], ...] = ("exact", "graph", "plan")
        compared = 0
        for round_ in range(300):
            conditions = [random_condition(rng) for _ in range(rng.randint(0, 2))]
            if round_ % 3 == 0:
                conditions.append(Condition("user_id", "in", tuple(rng.sample(["u0", "u1", "u2"], rng.randint(1, 2)))))
            where = Filter(tuple(conditions))
            org = f"org-{round_ % 2}"
            await store._keep_metadata(index, "voice", [c.field[9:] for c in conditions if c.is_metadata])
            passing = np.array(
                [
                    position
                    for position, record in enumerate(position_records)
                    if record.organization_id == org and matches(where, record)
                ],
                dtype=np.int64,
            )
            query = queries[round_ % len(queries)]
            k = rng.choice([1, 10, 50])
            truth = brute_force(index, passing, query, k)
            code = store._org_codes[org]
            for path in paths:
                found = [chunk for chunk, _ in index.search(query, code, k, where=where, path=path)]
                assert found == truth, (path, where, k)
            compared += bool(truth)
        assert compared > 150
    finally:
        await store.close()


@pytest.mark.parametrize("cpus", [1, 2, 3])
def test_a_scan_shared_among_cpus_scores_every_row_as_one_thread_does(
    monkeypatch: pytest.MonkeyPatch, cpus: int
) -> None:
    rng = np.random.default_rng(4)
    vectors = rng.standard_normal((30_000, DIM)).astype(np.float32)
    positions = np.sort(rng.choice(len(vectors), 9_001, replace=False))
    query = rng.standard_normal(DIM).astype(np.float32)
    monkeypatch.setattr(vector_scan, "SPLIT_ROWS", 10**9)
    alone = vector_scan.exact_scores(vectors, positions, query)
    monkeypatch.setattr(vector_scan, "SPLIT_ROWS", 1000)
    monkeypatch.setattr(vector_scan, "_CPUS", cpus)
    shared = vector_scan.exact_scores(vectors, positions, query)
    assert np.array_equal(shared, alone)  # bit for bit: the same kernel on each row, only the threads differ
    np.testing.assert_allclose(alone, vectors[positions] @ query, rtol=1e-5, atol=1e-5)


def test_a_scan_runs_each_share_on_one_openmp_thread_and_restores_the_callers(monkeypatch: pytest.MonkeyPatch) -> None:
    """faiss opens an OpenMP team per call; a team of more than one would leave its idle threads spinning."""
    import faiss

    kernel = faiss.fvec_inner_products_by_idx
    teams: list[int] = []

    def recording(*args: object) -> None:
        teams.append(faiss.omp_get_max_threads())
        kernel(*args)

    monkeypatch.setattr(faiss, "fvec_inner_products_by_idx", recording)
    monkeypatch.setattr(vector_scan, "SPLIT_ROWS", 1000)
    monkeypatch.setattr(vector_scan, "_CPUS", 2)
    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((5_000, DIM)).astype(np.float32)
    query = rng.standard_normal(DIM).astype(np.float32)
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(3)
    try:
        scores = vector_scan.exact_scores(vectors, np.arange(4_000), query)
        assert faiss.omp_get_max_threads() == 3  # the caller's own setting is back
    finally:
        faiss.omp_set_num_threads(before)
    assert teams == [1, 1]  # two shares, each on a team of one
    alone = np.empty(4_000, dtype=np.float32)
    vector_scan._scan(vectors, np.arange(4_000), query, alone, 0, 4_000)
    assert np.array_equal(scores, alone)  # bit for bit: the same kernel on each row, whatever the team


def spied_full_scans(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The rows of each full score array ``exact_top`` falls back to."""
    full_scan = vector_scan.exact_scores
    scans: list[int] = []

    def spied(vectors: np.ndarray, positions: np.ndarray, query: np.ndarray) -> np.ndarray:
        scans.append(len(positions))
        return full_scan(vectors, positions, query)

    monkeypatch.setattr(vector_scan, "exact_scores", spied)
    return scans


@pytest.mark.parametrize(
    ("cpus", "split", "rows", "k"), [(1, 1000, 9_001, 10), (2, 1000, 9_001, 1), (3, 1000, 9_001, 40), (3, 5, 20, 10)]
)
def test_the_heaps_keep_the_full_scans_k_best_bit_for_bit(
    monkeypatch: pytest.MonkeyPatch, cpus: int, split: int, rows: int, k: int
) -> None:
    """Each share's heap, merged, is the k best of every score (``split`` 5: shares of fewer rows than the heap)."""
    rng = np.random.default_rng(cpus * k)
    vectors = rng.standard_normal((30_000, DIM)).astype(np.float32)
    positions = np.sort(rng.choice(len(vectors), rows, replace=False))
    query = rng.standard_normal(DIM).astype(np.float32)
    full = vector_scan.exact_scores(vectors, positions, query)
    monkeypatch.setattr(vector_scan, "SPLIT_ROWS", split)
    monkeypatch.setattr(vector_scan, "_CPUS", cpus)
    scans = spied_full_scans(monkeypatch)
    kept, scores = vector_scan.exact_top(vectors, positions, query, k)
    assert scans == []  # no score is tied: the heaps alone answer
    assert sorted(kept.tolist()) == sorted(np.argsort(-full, kind="stable")[:k].tolist())
    assert np.array_equal(scores, full[kept])  # the same kernel: the same scores to the bit


@pytest.mark.parametrize("cpus", [1, 2])
def test_scores_tied_with_the_kth_beyond_the_heaps_are_all_kept(monkeypatch: pytest.MonkeyPatch, cpus: int) -> None:
    """Which of equal scores a heap keeps is not the caller's tie-break: every row tied with the k-th comes back."""
    rng = np.random.default_rng(cpus)
    base = rng.standard_normal((4, DIM)).astype(np.float32)
    vectors = base[rng.integers(0, 4, 6_000)]  # the same few vectors again and again: scores tied bit for bit
    positions = np.arange(0, 6_000, 2)
    query = base[0] + 0.1 * base[1]
    full = vector_scan.exact_scores(vectors, positions, query)
    monkeypatch.setattr(vector_scan, "SPLIT_ROWS", 1000)
    monkeypatch.setattr(vector_scan, "_CPUS", cpus)
    scans = spied_full_scans(monkeypatch)
    kept, scores = vector_scan.exact_top(vectors, positions, query, 10)
    assert scans == [len(positions)]
    assert sorted(kept.tolist()) == np.flatnonzero(full == full.max()).tolist()  # hundreds, not 10
    assert np.array_equal(scores, full[kept])
    ids = np.arange(len(vectors), dtype=np.int64) * 3
    top = vector_index.best_k(ids, positions[kept], scores, 10)
    assert [chunk for chunk, _ in top] == (ids[positions[np.flatnonzero(full == full.max())[:10]]]).tolist()


@pytest.mark.parametrize("k", [1, 3, 10, 40])
def test_best_k_reads_ids_through_positions_ties_by_id(k: int) -> None:
    """The k best of the scores given for ``positions``, named by ``ids[position]``, equal scores by id."""
    rng = np.random.default_rng(k)
    ids = rng.permutation(10_000).astype(np.int64) * 3 + 7  # chunk ids in no order: a position is not an id
    positions = np.sort(rng.choice(len(ids), 300, replace=False))
    scores = rng.choice(np.float32([0.25, 0.5, 0.75, 0.9]), len(positions))  # many exact ties
    expected = sorted(zip(ids[positions].tolist(), scores.tolist()), key=lambda hit: (-hit[1], hit[0]))[:k]
    assert vector_index.best_k(ids, positions, scores, k) == expected
    assert vector_index.best_k(ids, positions[::-1], scores[::-1], k) == expected  # whatever the input order
