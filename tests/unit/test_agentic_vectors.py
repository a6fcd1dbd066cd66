"""The embedded agentic store's k-NN: the caller's rows that pass, read in place, ranked exactly as brute force
ranks them, whether they are few of a shared container's rows or most of them."""

from __future__ import annotations

import numpy as np
import pytest

from memory_plugin.agentic.stores.vectors import Matrix

DIM = 32
ALICE, DAVE = ("org-1", "alice"), ("org-1", "dave")


def shared_matrix(rows: int, alice_share: float, seed: int = 0) -> tuple[Matrix, np.ndarray, list[tuple[str, str]]]:
    rng = np.random.default_rng(seed)
    matrix = Matrix(DIM)
    stored = rng.standard_normal((rows, DIM), dtype=np.float32)
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
