"""The embedded agentic store's k-NN: the caller's rows that pass, read in place, ranked exactly as brute force
ranks them, whether they are few of a shared container's rows or most of them; in a large container, through
its graph when most rows pass."""

from __future__ import annotations

import time
from pathlib import Path

import faiss
import numpy as np
import pytest

from memory_plugin.agentic.stores import vectors
from memory_plugin.agentic.stores.graph_files import load_graph, save_graph
from memory_plugin.agentic.stores.vectors import Matrix
from memory_plugin.vector_plan import walk

DIM = 32
ALICE, DAVE = ("org-1", "alice"), ("org-1", "dave")


def shared_matrix(
    rows: int, alice_share: float, seed: int = 0, dim: int = DIM, graph_file: Path | None = None
) -> tuple[Matrix, np.ndarray, list[tuple[str, str]]]:
    rng = np.random.default_rng(seed)
    matrix = Matrix(dim, graph_file)
    stored = rng.standard_normal((rows, dim), dtype=np.float32)
    stored /= np.linalg.norm(stored, axis=1, keepdims=True)
    owners = [ALICE if draw < alice_share else DAVE for draw in rng.random(rows)]
    matrix.add(np.arange(1, rows + 1, dtype=np.int64), stored, owners)
    return matrix, stored, owners


def brute_force(
    stored: np.ndarray, owners: list[tuple[str, str]], query: np.ndarray, k: int, seqs: set[int]
) -> list[int]:
    scores = stored.astype(np.float64) @ query.astype(np.float64)
    ranked = sorted((seq for seq in seqs if owners[seq - 1] == ALICE), key=lambda seq: (-scores[seq - 1], seq))
    # the order compared is exact on any CPU: neighbours in it differ by far more than float32 rounding
    # (under 1e-6 for unit vectors of 32 dimensions), whatever kernel the machine's faiss picks
    assert all(scores[a - 1] - scores[b - 1] > 1e-5 for a, b in zip(ranked[: k + 1], ranked[1 : k + 1]))
    return ranked[:k]


@pytest.mark.parametrize("alice_share", [0.02, 0.6])
def test_the_callers_rows_rank_as_brute_force(alice_share: float) -> None:
    matrix, stored, owners = shared_matrix(12_000, alice_share)  # 60%: a scan shared among the CPUs
    matrix.remove(range(1, 12_001, 7))  # dead rows are never ranked
    live = set(range(1, 12_001)) - set(range(1, 12_001, 7))
    rng = np.random.default_rng(1)
    namespace = np.asarray(sorted(rng.choice(sorted(live), 800, replace=False)), dtype=np.int64)
    for query in stored[rng.choice(12_000, 5)]:
        for candidates, passing in ((None, live), (namespace, set(namespace.tolist()))):
            found = matrix.rows().search(query, 10, candidates, ALICE)
            assert [seq for seq, _ in found] == brute_force(stored, owners, query, 10, passing)
            assert all(abs(score - float(stored[seq - 1] @ query)) < 1e-5 for seq, score in found)
    assert matrix.rows().search(stored[0], 10, np.asarray([], dtype=np.int64), ALICE) == []
    assert matrix.rows().search(stored[0], 0, None, ALICE) == []
    assert matrix.rows().search(stored[0], 10, None, ("org-2", "alice")) == []  # another organisation's writer


def built(matrix: Matrix) -> Matrix:
    """The matrix once its graph has settled (built on the build thread, again until its tail is short)."""
    deadline = time.monotonic() + 60
    while not matrix.graph_ready or matrix.building:
        assert time.monotonic() < deadline, "the graph was never built"
        time.sleep(0.01)
    return matrix


@pytest.fixture
def graph_paths(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Graphs from 2,000 rows on; the walks taken (by candidate count), each made wide enough to find the
    exact top k on these few rows, so that results compare exactly (the planner chooses with its own
    efSearch; ``scripts/bench_agentic.py`` measures the recall it gives).  Built with a third of the
    server's efConstruction: the planner does not read it, the wide walks stay exact, and the builds took
    most of these tests' time."""
    monkeypatch.setattr(vectors, "GRAPH_MIN_ROWS", 2_000)
    monkeypatch.setattr(vectors, "EF_CONSTRUCTION", 40)
    walks: list[int] = []

    def counted(hnsw, query, k, candidates, mask, ef):  # type: ignore[no-untyped-def]
        walks.append(len(candidates))
        return walk(hnsw, query, k, candidates, mask, max(ef, 2_048))

    monkeypatch.setattr(vectors, "walk", counted)
    return walks


@pytest.mark.slow
def test_a_large_container_walks_its_graph_when_most_rows_pass_and_scans_a_few(graph_paths: list[int]) -> None:
    matrix, stored, owners = shared_matrix(8_000, 0.9, dim=128)
    built(matrix)
    live = set(range(1, 8_001))
    rng = np.random.default_rng(2)
    few = np.asarray(sorted(rng.choice(8_000, 80, replace=False) + 1), dtype=np.int64)  # 1%: below the graph's reach
    for query in stored[rng.choice(8_000, 5)]:
        walks = len(graph_paths)
        found = matrix.rows().search(query, 10, None, ALICE)
        assert len(graph_paths) == walks + 1  # most rows pass: the walk
        assert [seq for seq, _ in found] == brute_force(stored, owners, query, 10, live)
        assert all(abs(score - float(stored[seq - 1] @ query)) < 1e-5 for seq, score in found)  # scored as the scan
        found = matrix.rows().search(query, 10, few, ALICE)
        assert len(graph_paths) == walks + 1  # a few rows pass: the scan
        assert [seq for seq, _ in found] == brute_force(stored, owners, query, 10, set(few.tolist()))


def test_rows_written_or_removed_after_the_graph_are_ranked_at_once(graph_paths: list[int]) -> None:
    matrix, stored, owners = shared_matrix(8_000, 1.0, dim=128)
    built(matrix)
    rng = np.random.default_rng(3)
    tail = rng.standard_normal((500, 128), dtype=np.float32)
    tail /= np.linalg.norm(tail, axis=1, keepdims=True)
    matrix.add(np.arange(8_001, 8_501, dtype=np.int64), tail, [ALICE] * 500)  # under a quarter: the graph stays
    matrix.remove(range(2, 8_001, 10))  # dead rows, in the graph still
    assert matrix.graph_ready and matrix.graph.rows == 8_000  # type: ignore[union-attr]
    everything = np.concatenate((stored, tail))
    live = set(range(1, 8_501)) - set(range(2, 8_001, 10))
    for query in (tail[7], stored[3], everything[rng.choice(8_500)]):
        found = matrix.rows().search(query, 10, None, ALICE)
        assert [seq for seq, _ in found] == brute_force(everything, [ALICE] * 8_500, query, 10, live)
    assert graph_paths  # ranked through the walk and the tail
    assert matrix.rows().search(tail[7], 1, None, ALICE)[0][0] == 8_008


@pytest.mark.slow
def test_a_compaction_drops_the_graph_and_a_new_one_follows(graph_paths: list[int]) -> None:
    matrix, stored, owners = shared_matrix(8_000, 1.0, dim=128)
    first = built(matrix).graph
    matrix.remove(range(1, 5_001))  # most rows gone: the matrix compacts, its positions move
    assert matrix.graph is first and not matrix.graph_ready  # the old graph names old positions: never used
    assert matrix.rows().graph is None
    live = set(range(5_001, 8_001))
    query = stored[6_000]
    assert [seq for seq, _ in matrix.rows().search(query, 10, None, ALICE)] == brute_force(
        stored, owners, query, 10, live
    )
    assert built(matrix).graph is not first and matrix.graph.rows == 3_000  # type: ignore[union-attr]
    assert [seq for seq, _ in matrix.rows().search(query, 10, None, ALICE)] == brute_force(
        stored, owners, query, 10, live
    )


def test_a_stopped_matrix_builds_no_graph(graph_paths: list[int]) -> None:
    matrix = Matrix(16)
    matrix.stop()
    matrix.add(
        np.arange(1, 3_001, dtype=np.int64), np.eye(16, dtype=np.float32)[np.arange(3_000) % 16], [ALICE] * 3_000
    )
    time.sleep(0.2)
    assert matrix.graph is None


def test_a_saved_graph_comes_back_with_the_memories_stored_now(
    graph_paths: list[int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Laid out in the graph's order: the memories gone or changed since are dead rows, the new ones its tail."""
    monkeypatch.setattr(vectors, "EF_SEARCH", 128)  # walks planned as narrow: on 4,000 rows they beat the scan
    file = tmp_path / "graph.npz"
    matrix, stored, owners = shared_matrix(4_000, 0.9, dim=128, graph_file=file)
    rows = built(matrix).graph.rows  # type: ignore[union-attr]
    hnsw, graph_seqs = load_graph(file, 128)  # type: ignore[misc]
    assert graph_seqs.tolist() == list(range(1, rows + 1)) and hnsw.ntotal == rows
    assert load_graph(file, 64) is None and load_graph(tmp_path / "none.npz", 128) is None
    now = stored.copy()
    now[99] = -now[99]  # seq 100 stored again with another vector
    gone = set(range(3, rows + 1, 4))  # a quarter deleted
    extra = np.random.default_rng(9).standard_normal((300, 128), dtype=np.float32)
    extra /= np.linalg.norm(extra, axis=1, keepdims=True)
    everything = np.concatenate((now, extra))
    everyone = owners + [ALICE] * 300
    seqs = np.asarray([seq for seq in range(1, 4_301) if seq not in gone], dtype=np.int64)
    restored = Matrix.restored(
        hnsw, graph_seqs, seqs, everything[seqs - 1], [everyone[seq - 1] for seq in seqs.tolist()], file
    )
    assert restored is not None and restored.graph_ready and restored.graph.hnsw is hnsw  # type: ignore[union-attr]
    assert restored.size == len(seqs) and restored.n == rows + (len(seqs) - (rows - len(gone) - 1))
    assert not restored.live[99] and restored.position[100] >= rows  # the changed one: in the tail
    for query in (everything[99], everything[4_100], stored[99], everything[11]):
        found = restored.rows().search(query, 10, None, ALICE)
        assert [seq for seq, _ in found] == brute_force(everything, everyone, query, 10, set(seqs.tolist()))
    assert graph_paths  # walked
    # fewer than half the graph's memories left: not worth restoring (a compaction would drop it)
    assert Matrix.restored(hnsw, graph_seqs, seqs[: rows // 3], stored[: rows // 3], owners[: rows // 3]) is None


def test_a_memory_saved_twice_in_a_graph_is_restored_once(tmp_path: Path) -> None:
    vectors = np.eye(4, dtype=np.float32)
    hnsw = faiss.IndexHNSWFlat(4, 8, faiss.METRIC_INNER_PRODUCT)
    hnsw.add(vectors[[0, 1, 0, 2]])  # seq 1 at positions 0 and 2 (stored again with the same vector)
    save_graph(tmp_path / "g.npz", hnsw, np.asarray([1, 2, 1, 7]))  # seq 7 is gone
    loaded, graph_seqs = load_graph(tmp_path / "g.npz", 4)  # type: ignore[misc]
    seqs = np.asarray([1, 2, 3], dtype=np.int64)
    matrix = Matrix.restored(loaded, graph_seqs, seqs, vectors[:3], [ALICE] * 3)
    assert matrix is not None and matrix.live[:5].tolist() == [True, True, False, False, True]
    assert matrix.position == {1: 0, 2: 1, 3: 4}
    assert [seq for seq, _ in matrix.rows().search(vectors[0], 5, None, ALICE)] == [1, 2, 3]
    graph = (tmp_path / "g.faiss").read_bytes()
    (tmp_path / "g.faiss").write_bytes(graph[:-1] + bytes([graph[-1] ^ 1]))  # one bit flipped: its CRC fails
    assert load_graph(tmp_path / "g.npz", 4) is None
    (tmp_path / "g.faiss").write_bytes(graph)
    assert load_graph(tmp_path / "g.npz", 4) is not None
    (tmp_path / "g.npz").write_bytes((tmp_path / "g.npz").read_bytes()[:-40])  # torn
    assert load_graph(tmp_path / "g.npz", 4) is None


@pytest.mark.parametrize("rows", [200, 12_000])
def test_equal_scores_at_the_kth_place_go_to_the_lower_seqs(rows: int) -> None:
    """An updated memory moves to the end of the matrix with its old seq: a tie is broken by seq, not position."""
    rng = np.random.default_rng(rows)
    matrix = Matrix(DIM)
    others = rng.standard_normal((rows, DIM)).astype(np.float32)
    matrix.add(
        np.arange(1, rows + 1, dtype=np.int64), others / np.linalg.norm(others, axis=1, keepdims=True), [ALICE] * rows
    )
    same = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)
    copies = np.arange(rows + 1, rows + 41, dtype=np.int64)
    matrix.add(copies, np.repeat(same[None, :], 40, axis=0), [ALICE] * 40)  # one text written 40 times
    matrix.add(np.asarray([150, 3], dtype=np.int64), np.repeat(same[None, :], 2, axis=0), [ALICE] * 2)  # updated to it
    found = matrix.rows().search(same, 5, None, ALICE)
    assert [seq for seq, _ in found] == [3, 150, rows + 1, rows + 2, rows + 3]
    assert len({score for _, score in found}) == 1
