"""Per-search choice between an exact scan of the passing vectors and filtered HNSW, by estimated cost.

The filter's cardinality is known exactly before the choice (the columns give
the passing positions, so counting them is free), as Qdrant's payload index
and Lucene's filtered k-NN know it.  The two costs, in nanoseconds:

* exact: one inner product per candidate, ``count · d`` multiply-adds read in
  place (``exact_scores``), then a partial sort;
* graph: HNSW with a selector computes a distance for every node it visits,
  passing or not; with ``efSearch`` raised to ``ef / selectivity`` (so that
  enough passing nodes reach the result list) it visits about ``ef · M``
  nodes, ``ef · M · d`` multiply-adds, plus packing the mask into a bitmap
  (``n / 8`` bytes) when some positions must be excluded.

A very selective filter also costs HNSW recall (the walk runs out of passing
neighbours), so below :data:`MIN_GRAPH_SELECTIVITY` the scan is taken whatever
the estimate: recall@10 stays 1 there.  The constants come from
``scripts/calibrate_planner.py`` (see :data:`MODEL`).
"""

from __future__ import annotations

from dataclasses import dataclass

#: The largest efSearch a filtered walk is given.
MAX_EF = 2048


@dataclass(frozen=True, slots=True)
class CostModel:
    """Nanoseconds per unit of work of each path (fitted by ``scripts/calibrate_planner.py``)."""

    exact_ns_per_dim: float  #: per candidate and dimension
    exact_fixed_ns: float
    graph_ns_per_dim: float  #: per visited node (``ef · M``) and dimension
    graph_fixed_ns: float
    bitmap_ns_per_row: float  #: per index position, to pack the mask
    #: Below this share of the index, filtered HNSW misses neighbours (recall@10 < 0.99 measured).
    min_graph_selectivity: float


#: Measured by ``scripts/calibrate_planner.py`` (bench-results/planner.json): see that file for the run.
MODEL = CostModel(
    exact_ns_per_dim=0.25,
    exact_fixed_ns=20_000.0,
    graph_ns_per_dim=0.1,
    graph_fixed_ns=60_000.0,
    bitmap_ns_per_row=0.05,
    min_graph_selectivity=0.02,
)


@dataclass(frozen=True, slots=True)
class Plan:
    exact: bool
    #: efSearch of the graph walk (when it is taken).
    ef: int
    exact_ns: float
    graph_ns: float


def graph_ef(count: int, total: int, k: int, ef_search: int) -> int:
    """efSearch for a walk where ``count`` of ``total`` nodes pass: scaled by 1/selectivity, capped."""
    selectivity = count / max(total, 1)
    ef = int(min(MAX_EF, max(ef_search, k) / max(selectivity, 1e-9)))
    return max(ef, ef_search, k)


def plan(
    count: int,
    total: int,
    *,
    k: int,
    ef_search: int,
    hnsw_m: int,
    dimension: int,
    exact_threshold: int,
    model: CostModel = MODEL,
) -> Plan:
    """Exact scan or graph walk for ``count`` passing positions of a graph of ``total``.

    ``exact_threshold`` is a ceiling: above it the graph is always walked (0
    forces the graph, as tests of that path do).
    """
    ef = graph_ef(count, total, k, ef_search)
    exact_ns = model.exact_fixed_ns + model.exact_ns_per_dim * count * dimension
    graph_ns = model.graph_fixed_ns + model.graph_ns_per_dim * ef * hnsw_m * dimension
    if count < total:
        graph_ns += model.bitmap_ns_per_row * total
    if count > exact_threshold:
        return Plan(False, ef, exact_ns, graph_ns)
    exact = count <= k or count < model.min_graph_selectivity * total or exact_ns <= graph_ns
    return Plan(exact, ef, exact_ns, graph_ns)
