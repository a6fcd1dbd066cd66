"""Per-search choice between an exact scan of the passing vectors and filtered HNSW, by estimated cost
(the histories' indexes and the agentic containers' graphs), and the filtered walk itself.

The filter's cardinality is known exactly before the choice (the columns give
the passing positions, so counting them is free), as Qdrant's payload index
and Lucene's filtered k-NN know it.  The two costs, in nanoseconds:

* exact: one inner product per candidate, ``count · d`` multiply-adds read in
  place, the k best kept in a heap as they come (``exact_top``);
* graph: HNSW with a selector computes a distance for every node it meets,
  passing or not, and walks on until ``efSearch`` *passing* nodes fill its
  result list; ``efSearch`` is raised to ``ef_search / selectivity`` so that
  enough passing nodes reach the result.  Measured, the walk's cost grows as
  ``sqrt(ef / selectivity)`` (the nodes met overlap more and more) times
  ``M · d``, and with the graph's size as ``total ** 0.3`` (deeper walks, more
  cache misses) — :func:`walk_units`; plus packing the mask into a bitmap
  (``n / 8`` bytes) when some positions must be excluded.

A very selective filter also costs HNSW recall (the walk runs out of passing
neighbours), so below :data:`MIN_GRAPH_SELECTIVITY` the scan is taken whatever
the estimate: recall@10 stays 1 there.  The constants come from
``scripts/calibrate_planner.py`` (see :data:`MODEL`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import faiss
import numpy as np

#: The largest efSearch a walk is given.
MAX_EF = 4096
#: A graph up to this many nodes is searched with the configured efSearch; a larger one more widely.
RECALL_BASE_NODES = 100_000
#: How efSearch grows beyond :data:`RECALL_BASE_NODES` to keep recall@10 >= 0.99 (ef_construction 64, M 32):
#: measured on the 1M-chunk store of ``scripts/bench_search.py`` (100 queries, unfiltered), efSearch 128 gives
#: recall@10 0.984, 512 gives 0.987, 768 0.992, 1024 0.994 (the walk 0.5, 1.3, 2.9, 4.4 ms); at 100k, 128
#: gives 1.000.  ``(n / 100k) ** 0.9`` asks 1016 at 1M.
EF_SIZE_EXPONENT = 0.9


@dataclass(frozen=True, slots=True)
class CostModel:
    """CPU nanoseconds per unit of work of each path (fitted by ``scripts/calibrate_planner.py``)."""

    exact_ns_per_dim: float  #: per candidate and dimension
    exact_fixed_ns: float
    graph_ns_per_unit: float  #: per unit of :func:`walk_units`
    graph_fixed_ns: float
    bitmap_ns_per_row: float  #: per index position, to pack the mask
    #: Below this share of the index, filtered HNSW misses neighbours (recall@10 < 0.99 measured).
    min_graph_selectivity: float


#: ``scripts/calibrate_planner.py --sizes 20000,100000 --queries 60`` on the 2-core AMD EPYC (AVX2) shared
#: with other jobs (load average 12; CPU time per search, one thread, so the load does not skew long calls),
#: e5-shaped vectors, d 384, M 32, ef_search 128, k 10.  Measured crossover (the walk cheaper from there on):
#: 30% at 20k (6,000 candidates: scan 2.15 ms, walk 1.89 ms), 15% at 100k (15,000: 6.44 ms, 6.26 ms); the
#: walk's recall@10 is >= 0.99 from 5% (0.998 at 100k; 0.987 at 3%, 0.905 at 1%).  The old guessed rule
#: (scan only below 2,000 candidates or 5%) walked a 10% filter at 100k: 6.98 ms against a 3.53 ms scan.
#: A second run with these constants picked the faster path at all 28 points but one near-tie (30% at 20k:
#: scan 2.11 ms, walk 1.87 ms) and refitted 0.59 / 201,000 / 5.08 / 186,000.
MODEL = CostModel(
    exact_ns_per_dim=0.673,
    exact_fixed_ns=199_000.0,
    graph_ns_per_unit=5.29,
    graph_fixed_ns=274_000.0,
    bitmap_ns_per_row=0.093,
    min_graph_selectivity=0.05,
)
#: How the walk's cost grows with the graph's size (fitted: 1.6x from 20k to 100k at equal selectivity).
GRAPH_SIZE_EXPONENT = 0.3


@dataclass(frozen=True, slots=True)
class Plan:
    exact: bool
    #: efSearch of the graph walk (when it is taken).
    ef: int
    exact_ns: float
    graph_ns: float


def base_ef(total: int, ef_search: int) -> int:
    """efSearch for an unfiltered walk of a graph of ``total`` nodes: wider in a larger graph (same recall)."""
    return int(min(MAX_EF, ef_search * max(1.0, total / RECALL_BASE_NODES) ** EF_SIZE_EXPONENT))


def graph_ef(count: int, total: int, k: int, ef_search: int) -> int:
    """efSearch for a walk where ``count`` of ``total`` nodes pass: scaled by the graph's size and 1/selectivity, capped."""
    selectivity = count / max(total, 1)
    base = max(base_ef(total, ef_search), k)
    return max(int(min(MAX_EF, base / max(selectivity, 1e-9))), base)


def walk_units(count: int, total: int, ef: int, hnsw_m: int, dimension: int) -> float:
    """The work of a filtered walk: ``sqrt(ef / selectivity) · M · d``, scaled by the graph's size."""
    scale: float = (total / 100_000) ** GRAPH_SIZE_EXPONENT
    return math.sqrt(ef * total / max(count, 1)) * hnsw_m * dimension * scale


def plan(
    count: int,
    total: int,
    *,
    k: int,
    ef_search: int,
    hnsw_m: int,
    dimension: int,
    exact_threshold: int,
    scan_threads: int = 1,
    model: CostModel = MODEL,
) -> Plan:
    """Exact scan or graph walk for ``count`` passing positions of a graph of ``total``.

    ``exact_threshold`` bounds the scans the estimate may choose; 0 walks the
    graph always (tests of that path).  Below ``min_graph_selectivity`` the
    scan is taken whatever the estimates and the ceiling say: recall first.
    ``scan_threads``: the threads the scan would be shared among, which
    divide its time (the walk is one thread's).
    """
    ef = graph_ef(count, total, k, ef_search)
    exact_ns = model.exact_fixed_ns + model.exact_ns_per_dim * count * dimension / max(scan_threads, 1)
    graph_ns = model.graph_fixed_ns + model.graph_ns_per_unit * walk_units(count, total, ef, hnsw_m, dimension)
    if count < total:
        graph_ns += model.bitmap_ns_per_row * total
    if exact_threshold <= 0:
        return Plan(False, ef, exact_ns, graph_ns)
    if count <= k or count < model.min_graph_selectivity * total:
        return Plan(True, ef, exact_ns, graph_ns)
    return Plan(count <= exact_threshold and exact_ns <= graph_ns, ef, exact_ns, graph_ns)


def walk(
    hnsw: faiss.Index, query: np.ndarray, k: int, candidates: np.ndarray, mask: np.ndarray | None, ef: int
) -> np.ndarray:
    """The positions HNSW finds among ``candidates`` (ascending; ``mask`` over every position, if built)."""
    count = len(candidates)
    if count == 0 or k <= 0:
        return np.empty(0, dtype=np.int64)
    params = faiss.SearchParametersHNSW()  # type: ignore[attr-defined]
    params.efSearch = ef
    bitmap = None
    if count < hnsw.ntotal:
        # Some positions are dead or not the caller's: restrict the walk to the candidates.
        if mask is None:
            mask = np.zeros(max(hnsw.ntotal, int(candidates[-1]) + 1), dtype=bool)
            mask[candidates] = True
        bitmap = np.packbits(mask, bitorder="little")
        params.sel = faiss.IDSelectorBitmap(len(mask), faiss.swig_ptr(bitmap))
    _, labels = hnsw.search(query[None, :], min(k, count), params=params)
    del bitmap
    found: np.ndarray = labels[0][labels[0] >= 0]
    return found
