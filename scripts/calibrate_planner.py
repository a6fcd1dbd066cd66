"""Measure the exact scan and the filtered HNSW walk over a grid of selectivities; fit the planner's costs.

    python scripts/calibrate_planner.py                      # 20k and 100k chunks, about five minutes
    python scripts/calibrate_planner.py --sizes 20000 --queries 50

For each size, a :class:`TypeIndex` (the embedded store's, with its default
HNSW parameters) holds e5-shaped vectors (``_vectors.synthetic``); for each
selectivity a random set of positions passes (filters are not correlated with
the vectors) and both paths are timed on one thread, as the store's search pool
runs them, with recall@10 of the walk against the scan.  Prints a table, the
crossover per size (the smallest selectivity from which the walk is faster and
keeps recall@10 >= 0.99) and the constants of ``planner.CostModel`` fitted by
least squares; writes it all to ``bench-results/planner.json``.  Built graphs
are kept in ``--cache`` so a second run measures only.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import faiss
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _vectors import synthetic  # noqa: E402

from memory_plugin.histories.stores.vector_index import IndexParams, TypeIndex  # noqa: E402
from memory_plugin.vector_plan import MODEL, graph_ef, plan, walk_units  # noqa: E402

DIM = 384
K = 10
SELECTIVITIES = (0.001, 0.003, 0.01, 0.02, 0.03, 0.05, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0)
#: The embedded store's defaults (``SqliteHistoryStore``); exact_threshold unbounded so both paths can be forced.
PARAMS = IndexParams(DIM, hnsw_m=32, ef_construction=64, ef_search=128, exact_threshold=10**12)
ORG = 0


def build(size: int, cache: Path) -> tuple[TypeIndex, np.ndarray]:
    """The index of ``size`` vectors (graph from ``cache`` when built before) and held-out queries."""
    pool = synthetic(size + 200, DIM)
    vectors, queries = pool[:size], pool[size:]
    path = cache / f"hnsw-{size}-m{PARAMS.hnsw_m}-efc{PARAMS.ef_construction}.faiss"
    if path.exists():
        hnsw = faiss.read_index(str(path))
        hnsw.hnsw.efSearch = PARAMS.ef_search  # type: ignore[attr-defined]
        index = TypeIndex(PARAMS, hnsw, size)
        to_hnsw = False
    else:
        index, to_hnsw = TypeIndex(PARAMS, TypeIndex.new_hnsw(PARAMS), size), True
    started = time.perf_counter()
    index.append(np.arange(1, size + 1), vectors, np.zeros(size, np.int32), [], to_hnsw=to_hnsw)
    if to_hnsw:
        print(f"built {size} in {time.perf_counter() - started:.0f} s")
        cache.mkdir(parents=True, exist_ok=True)
        faiss.write_index(index.hnsw, str(path))
    return index, queries


def timed(call: Callable[[], Any], repeat: int) -> tuple[float, list[Any]]:
    """p50 CPU nanoseconds of ``call`` on this thread, and its results.

    CPU time, not wall time: on a shared machine a long call is preempted more
    often than a short one, which would skew the crossover towards short calls.
    """
    results, spans = [], []
    for _ in range(repeat):
        started = time.thread_time_ns()
        results.append(call())
        spans.append(time.thread_time_ns() - started)
    return float(np.percentile(spans, 50)), results


def measure(index: TypeIndex, queries: np.ndarray, selectivity: float, seed: int) -> dict[str, Any]:
    size = index.n
    rng = np.random.default_rng(seed)
    count = max(1, round(size * selectivity))
    candidates = np.sort(rng.choice(size, count, replace=False)) if count < size else np.arange(size)
    exact_ns, graph_ns, recalls = [], [], []
    for query in queries:
        ns, (truth,) = timed(partial(index.search, query, ORG, K, candidates=candidates, path="exact"), 1)
        exact_ns.append(ns)
        ns, (found,) = timed(partial(index.search, query, ORG, K, candidates=candidates, path="graph"), 1)
        graph_ns.append(ns)
        recalls.append(len({i for i, _ in truth} & {i for i, _ in found}) / min(K, count))
    ef = graph_ef(count, size, K, PARAMS.ef_search)
    chosen = plan(
        count,
        size,
        k=K,
        ef_search=PARAMS.ef_search,
        hnsw_m=PARAMS.hnsw_m,
        dimension=DIM,
        exact_threshold=20_000,
    )
    return {
        "selectivity": selectivity,
        "count": count,
        "ef": ef,
        "exact_cpu_p50_ms": round(float(np.percentile(exact_ns, 50)) / 1e6, 4),
        "graph_cpu_p50_ms": round(float(np.percentile(graph_ns, 50)) / 1e6, 4),
        "graph_recall_at_10": round(float(np.mean(recalls)), 4),
        "planner_picks": "exact" if chosen.exact else "graph",
        "model_exact_ms": round(chosen.exact_ns / 1e6, 4),
        "model_graph_ms": round(chosen.graph_ns / 1e6, 4),
    }


def bitmap_ns_per_row(size: int) -> float:
    mask = np.zeros(size, dtype=bool)
    mask[::7] = True
    ns, _ = timed(lambda: np.packbits(mask, bitorder="little"), 200)
    return ns / size


def fit(rows: list[dict[str, Any]], bitmap: float) -> dict[str, float]:
    """Constants of ``planner.CostModel`` from the measured rows of every size (least relative error).

    The walk is fitted where it can be chosen (selectivity >= 10%): below, the
    ``efSearch`` cap and the recall floor decide, not its cost.
    """
    counts = np.array([row["count"] * DIM for row in rows], dtype=np.float64)
    exact = np.array([row["exact_cpu_p50_ms"] * 1e6 for row in rows])
    exact_fixed, exact_per = _relative_fit(counts, exact)
    walked = [row for row in rows if row["selectivity"] >= 0.1]
    units = np.array([walk_units(row["count"], row["size"], row["ef"], PARAMS.hnsw_m, DIM) for row in walked])
    graph = np.array([row["graph_cpu_p50_ms"] * 1e6 - bitmap * row["size"] for row in walked])
    graph_fixed, graph_per = _relative_fit(units, graph)
    sizes = {row["size"] for row in rows}
    floors = [recall_floor([row for row in rows if row["size"] == size]) for size in sizes]
    return {
        "exact_ns_per_dim": round(exact_per, 4),
        "exact_fixed_ns": round(max(exact_fixed, 0.0)),
        "graph_ns_per_unit": round(graph_per, 4),
        "graph_fixed_ns": round(max(graph_fixed, 0.0)),
        "bitmap_ns_per_row": round(bitmap, 4),
        "min_graph_selectivity": max(floors, default=None),
    }


def _relative_fit(work: np.ndarray, ns: np.ndarray) -> tuple[float, float]:
    """``(fixed, per unit)`` minimising the relative error (times span three decades)."""
    weights = 1.0 / np.maximum(ns, 1.0)
    (fixed, per), *_ = np.linalg.lstsq(np.c_[weights, work * weights], np.ones(len(ns)), rcond=None)
    return float(fixed), float(per)


def recall_floor(rows: list[dict[str, Any]]) -> float:
    """The smallest selectivity from which the walk keeps recall@10 >= 0.99 (rows ascending)."""
    floor = 1.0
    for row in reversed(rows):
        if row["graph_recall_at_10"] < 0.99:
            break
        floor = row["selectivity"]
    return float(floor)


def crossover(rows: list[dict[str, Any]]) -> float | None:
    """The smallest selectivity from which the walk is faster than the scan and keeps recall@10 >= 0.99."""
    for at, row in enumerate(rows):
        later = rows[at:]
        if all(r["graph_cpu_p50_ms"] < r["exact_cpu_p50_ms"] and r["graph_recall_at_10"] >= 0.99 for r in later):
            return float(row["selectivity"])
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="20000,100000", type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/calibrate-planner"))
    parser.add_argument("--out", type=Path, default=Path("bench-results/planner.json"))
    args = parser.parse_args()
    faiss.omp_set_num_threads(1)  # as the store's search pool
    result: dict[str, Any] = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cpus",
        "dimension": DIM,
        "hnsw_m": PARAMS.hnsw_m,
        "ef_search": PARAMS.ef_search,
        "k": K,
        "queries": args.queries,
        "model_in_code": {name: getattr(MODEL, name) for name in MODEL.__slots__},
        "load_average_before": os.getloadavg(),
        "sizes": {},
    }
    rows: list[dict[str, Any]] = []
    bitmap = 0.0
    for size in args.sizes:
        index, queries = build(size, args.cache)
        queries = queries[: args.queries]
        for query in queries[:5]:  # warm up
            index.search(query, ORG, K, candidates=np.arange(size), path="graph")
        bitmap = bitmap_ns_per_row(size)
        table = [{"size": size, **measure(index, queries, s, seed=7)} for s in SELECTIVITIES]
        rows += table
        result["sizes"][str(size)] = {"rows": table, "crossover_selectivity": crossover(table)}
        print(f"\n{size} chunks, dim {DIM}, M {PARAMS.hnsw_m}, ef_search {PARAMS.ef_search}, load {os.getloadavg()[0]}")
        print(
            f"{'select.':>8} {'count':>7} {'ef':>5} {'exact CPU ms':>12} {'graph CPU ms':>12} {'recall':>7}"
            f" {'model exact':>12} {'model graph':>12} {'picks':>6}"
        )
        for row in table:
            print(
                f"{row['selectivity']:>8.3f} {row['count']:>7} {row['ef']:>5} {row['exact_cpu_p50_ms']:>12.3f}"
                f" {row['graph_cpu_p50_ms']:>12.3f} {row['graph_recall_at_10']:>7.3f} {row['model_exact_ms']:>12.3f}"
                f" {row['model_graph_ms']:>12.3f} {row['planner_picks']:>6}"
            )
        print(
            f"crossover (graph faster from here on, recall >= 0.99): {result['sizes'][str(size)]['crossover_selectivity']}"
        )
    result["fitted"] = fit(rows, bitmap)
    result["load_average_after"] = os.getloadavg()
    print(f"\nfitted CostModel: {result['fitted']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
