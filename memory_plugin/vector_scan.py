"""Exact inner products of a query with chosen rows of a matrix, read where they lie, on every CPU.

The embedded stores rank candidates exactly (the histories' planner when a filter passes few chunks,
the agentic store always): faiss reads each row in place with the GIL let go, so a scan of
scattered rows costs no copy of them, and a long one is shared among the CPUs.  At 100k rows of 384
dimensions on the 2-core AMD EPYC, 10% of the rows: 3.5 ms in place against 6.0 ms gathered first
by numpy; all of them: 7.7 ms against 11 ms for numpy's product.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import faiss
import numpy as np

#: From this many rows a scan is shared among the CPUs: at 1M chunks, 10k scattered rows take 3.4 ms on
#: one core of the 2-core AMD EPYC and 1.6 ms on two (``faiss`` lets the GIL go while it reads).
SPLIT_ROWS = 4096
#: Threads that only ever run a share of one scan, so a scan waiting on them can never wait on itself.
_CPUS = os.cpu_count() or 1
_SCAN_HELPERS = ThreadPoolExecutor(max_workers=max(1, _CPUS - 1), thread_name_prefix="scan")


def exact_scores(vectors: np.ndarray, positions: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``vectors[positions] @ query`` without copying the rows out first, on every CPU when there are many.

    At 1M chunks a 1% filter gathers 10k rows (15 MB) before a BLAS product
    whose worker threads then spin-wait; reading the rows in place costs a
    fifth of the CPU time (``scripts/bench_search.py``).  Each row's score is
    the same however the rows are shared out.
    """
    positions = np.ascontiguousarray(positions, dtype=np.int64)
    query = np.ascontiguousarray(query, dtype=np.float32)
    scores = np.empty(len(positions), dtype=np.float32)
    _in_shares(
        scan_shares(len(positions)),
        len(positions),
        lambda _, start, end: _scan(vectors, positions, query, scores, start, end),
    )
    return scores


def exact_top(vectors: np.ndarray, rows: np.ndarray, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``(indices into rows, scores)`` of the ``k`` best of ``vectors[rows] @ query``, and of every row tied
    with the k-th best (the caller breaks ties by its own key); any order.

    Each share keeps its best ``k + 1`` in a heap as it reads (faiss' ``knn_inner_products_by_idx``,
    the kernel of ``exact_scores``, so the scores are the same bit for bit), and no score array is
    written or partitioned.  The ``k + 1``-th best tells whether the k-th is tied beyond the heaps:
    which of equal scores a heap kept is its own choice, so then every score is taken as
    ``exact_scores`` gives them.  ``rows`` ascending.  At 100k rows of 384 dimensions on the 2-core
    AMD EPYC, 10k of them in runs of 10: 0.23 ms against 0.29 ms for every score and a partition.
    """
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    if k <= 0 or len(rows) == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
    if len(rows) > k + 1:
        untied = _heaps_top(vectors, rows, np.ascontiguousarray(query, dtype=np.float32), k)
        if untied is not None:
            return untied
    scores = exact_scores(vectors, rows, query)
    if len(scores) <= k:
        return np.arange(len(scores)), scores
    negated = -scores
    kept = np.flatnonzero(negated <= np.partition(negated, k - 1)[k - 1])
    return kept, scores[kept]


def _heaps_top(
    vectors: np.ndarray, rows: np.ndarray, query: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """``exact_top`` from a heap of ``k + 1`` per share, or None when the k-th best is tied with the next."""
    shares = scan_shares(len(rows))
    heap_scores = np.empty((shares, k + 1), dtype=np.float32)
    heap_rows = np.empty((shares, k + 1), dtype=np.int64)
    _in_shares(
        shares,
        len(rows),
        lambda share, start, end: _best(vectors, rows[start:end], query, heap_scores[share], heap_rows[share]),
    )
    filled = heap_rows >= 0  # a share of fewer than k + 1 rows leaves slots empty
    scores, found = heap_scores[filled], heap_rows[filled]
    order = np.argsort(-scores, kind="stable")
    if not scores[order[k]] < scores[order[k - 1]]:  # tied (or not comparable): the heaps chose
        return None
    best = order[:k]
    return np.searchsorted(rows, found[best]), scores[best]


def scan_shares(rows: int) -> int:
    """How many threads ``exact_scores`` shares a scan of ``rows`` among."""
    return min(_CPUS, max(1, rows // SPLIT_ROWS))


def _in_shares(shares: int, count: int, work: Callable[[int, int, int], None]) -> None:
    """``work(share, start, end)`` over ``shares`` even slices of ``range(count)``: the first on this
    thread, the others on the scan helpers at once; back when all are done."""
    bounds = [count * share // shares for share in range(shares + 1)]  # (numpy's linspace: 60 µs)
    helped = [
        _SCAN_HELPERS.submit(work, share, start, end)
        for share, (start, end) in enumerate(zip(bounds[1:-1], bounds[2:]), start=1)
    ]
    work(0, bounds[0], bounds[1])
    for share in helped:
        share.result()


def _scan(
    vectors: np.ndarray, positions: np.ndarray, query: np.ndarray, scores: np.ndarray, start: int, end: int
) -> None:
    if end > start:
        # The call opens an OpenMP team for its one query: the team's other threads get no work and
        # spin-wait for the next, taking a core from the other share (at 1M chunks, a 1% filter's
        # search used twice the CPU).  So this thread's team is of one, as long as the call lasts.
        threads = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(1)
        try:
            faiss.fvec_inner_products_by_idx(  # type: ignore[attr-defined]
                faiss.swig_ptr(scores[start:end]),
                faiss.swig_ptr(query),
                faiss.swig_ptr(vectors),
                faiss.swig_ptr(positions[start:end]),
                vectors.shape[1],
                1,
                end - start,
            )
        finally:
            faiss.omp_set_num_threads(threads)


def _best(vectors: np.ndarray, rows: np.ndarray, query: np.ndarray, scores: np.ndarray, found: np.ndarray) -> None:
    """The best ``len(scores)`` of ``vectors[rows] @ query`` into ``scores`` and their rows into ``found``
    (-1 where ``rows`` has fewer); one query opens no OpenMP team here."""
    faiss.knn_inner_products_by_idx(  # type: ignore[attr-defined]
        faiss.swig_ptr(query),
        faiss.swig_ptr(vectors),
        faiss.swig_ptr(rows),
        vectors.shape[1],
        1,
        len(vectors),
        len(rows),
        len(scores),
        faiss.swig_ptr(scores),
        faiss.swig_ptr(found),
    )
