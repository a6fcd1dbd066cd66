"""Store-level search benchmark: p50/p99 latency and recall@10 against exact search.

    python scripts/bench_search.py --sizes 20000            # quick, about a minute
    python scripts/bench_search.py --sizes 100000,1000000 --seed-vectors e5.npy

    python scripts/bench_search.py --sizes 1000000 --seed-from-model 4000   # real e5 seeds

    # this tree against an older commit on the same store, searches in turns:
    python scripts/bench_search.py --sizes 1000000 --queries 100 --store /tmp/bench-store --baseline d9e7a06^

Each backend (an async factory of an opened :class:`HistoryStore`) gets the
same chunks and the same query vectors; add a real OpenSearch node as another
entry of :data:`BACKENDS`.  Three cases per size: no filter, a filter passing
1% of the chunks (``user_id`` = one of 100 users), one passing 30%
(``user_id`` in 30 of them) and, with ``--metadata``, the same 30% on a metadata key,
metadata ``in`` of 5 values, a metadata range and a metadata ``contains``.  Truth is
numpy brute force over the same candidate set.  Vectors are e5-shaped (see
``_vectors.py``), never uniform; ``--seed-from-model`` embeds real texts with
the default model and derives the vectors from those.  The embedded store is
measured twice on the same load: filters on its in-memory columns
(``embedded``) and on SQL (``embedded-sql``, how it filtered before).  Each chunk's text is a dozen words drawn from a Zipf law over a
20k-word vocabulary, and each backend is also searched through the service's ranking in each ``mode``
(``semantic``, ``keyword``, ``hybrid``: ``rank_in_region``, top 10, unfiltered and the 1% filter) with
six-word queries drawn from the same law; the issue's target is hybrid p50 at most twice semantic's.
Searches run on the event loop
``serve`` runs on (uvloop, with its GIL switch interval), so that the hand-off
to the search thread and back costs what it costs in the server.

``--baseline REV`` also searches the loaded store with the code of git
revision ``REV`` and with this tree, each in its own process
(``_search_worker.py``), one search each in turns (the order alternating per
query), so that the two see the same data and the same machine load; their
cells add the CPU time per search (the process's, helper threads included).
The modes are searched so too, and each side's cells say how many of its
searches returned the baseline's hits with the baseline's scores.
``--store DIR`` keeps the loaded store and its vectors in ``DIR/<size>`` and
reuses them on the next run (loading a million chunks takes a quarter hour).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _plots import plot_search, write_report  # noqa: E402
from _search_baseline import compare_revisions  # noqa: E402
from _search_report import EXACT, MODES, print_table  # noqa: E402
from _vectors import from_seed, mean_pairwise_cosine, synthetic  # noqa: E402

from memory_plugin.app import serving_loop  # noqa: E402
from memory_plugin.histories.service import SearchQuery, rank_in_region  # noqa: E402
from memory_plugin.histories.stores.base import HistoryStore  # noqa: E402
from memory_plugin.histories.stores.filters import Filter, parse_filters  # noqa: E402
from memory_plugin.histories.stores.records import Chunk, Record  # noqa: E402
from memory_plugin.histories.stores.sqlite import SqliteHistoryStore  # noqa: E402

DIM = 384
ORG = "org-bench"
USERS = 100
NOW = datetime(2026, 6, 1, tzinfo=UTC)
#: name -> (filter params, mask over chunk number i)
CASES: dict[str, tuple[list[tuple[str, str]], Callable[[np.ndarray], np.ndarray]]] = {
    "unfiltered": ([], lambda i: np.ones(len(i), dtype=bool)),
    "filter 1%": ([("filter[user_id]", "user-0")], lambda i: i % USERS == 0),
    "filter 30%": (
        [("filter[user_id][in]", ",".join(f"user-{u}" for u in range(30)))],
        lambda i: i % USERS < 30,
    ),
}
#: ``--metadata``: the same 30% on a metadata key, then the other metadata operators
#: (``tier`` = t0..t99, as the users but in blocks; ``rank`` = an int 0..999).
METADATA_CASES: dict[str, tuple[list[tuple[str, str]], Callable[[np.ndarray], np.ndarray]]] = {
    "metadata 30%": (
        [("filter[tier][in]", ",".join(f"t{u}" for u in range(30)))],
        lambda i: (i // USERS) % USERS < 30,
    ),
    "metadata in 5": (
        [("filter[tier][in]", ",".join(f"t{u}" for u in range(5)))],
        lambda i: (i // USERS) % USERS < 5,
    ),
    "metadata range 10%": (
        [("filter[rank][gte]", "100"), ("filter[rank][lt]", "200")],
        lambda i: ((i // 10) % 1000 >= 100) & ((i // 10) % 1000 < 200),
    ),
    "metadata contains 11%": (  # case-insensitive: t7 and t70..t79
        [("filter[tier][contains]", "T7")],
        lambda i: np.isin((i // USERS) % USERS, [7, *range(70, 80)]),
    ),
}
#: The metadata a kept ``--store`` was loaded with; a store of another layout is loaded again.
LAYOUT = "tier,rank,zipf-words"
#: The chunks' words: Zipf's law (exponent ``ZIPF``) over ``VOCABULARY`` words, ``CHUNK_WORDS`` a chunk.
VOCABULARY, ZIPF, CHUNK_WORDS, QUERY_WORDS = 20_000, 1.1, 12, 6
#: The cases searched in each ``mode`` too.
MODE_CASES = ("unfiltered", "filter 1%")

#: How many queries the brute-force reference (``EXACT``) times.
EXACT_QUERIES = 50

StoreFactory = Callable[[Path], AsyncIterator[HistoryStore]]


@asynccontextmanager
async def embedded(folder: Path) -> AsyncIterator[HistoryStore]:
    store = SqliteHistoryStore(folder / "embedded")
    await store.open(DIM)
    try:
        yield store
    finally:
        await store.close()


def opensearch_backend(url: str | None, engine: str = "lucene") -> Callable[[Path], Any]:
    """A factory of OpenSearchStores on ``url``, each with fresh indices dropped afterwards.

    Without a ``url``, each store gets a node started here for its turn and stopped after it:
    an idle node's JVM shares this 2-core machine with the embedded store's searches (unfiltered
    100k: 1.00 ms p50 in a run with it up, 0.63-0.80 ms in five runs without it).
    """

    @asynccontextmanager
    async def factory(folder: Path) -> AsyncIterator[HistoryStore]:
        if url is None:
            from tests.support.opensearch import start_nodes

            with start_nodes(1) as nodes:
                async with opensearch_backend(nodes[0].url, engine)(folder) as store:
                    yield store
            return

        import uuid

        from memory_plugin.histories.stores.opensearch import OpenSearchHistoryStore
        from memory_plugin.settings import OpenSearchRegion

        settings = OpenSearchRegion(
            hosts=(url,), index_prefix=f"bench-{uuid.uuid4().hex[:8]}", timeout=120.0, knn_engine=engine
        )
        store = OpenSearchHistoryStore(settings, "USA", create_indices=("voice",))
        await store.open(DIM)
        try:
            yield store
        finally:
            await store.client.indices.delete(index=f"{store.prefix}-*", ignore_unavailable=True)
            await store.close()

    return factory


#: (column name, factory); main() appends "opensearch-<engine>" when asked to.
BACKENDS: list[tuple[str, Callable[[Path], Any]]] = [("embedded", embedded)]


def zipf_words(count: int, length: int, seed: int) -> list[str]:
    """``count`` texts of ``length`` words, each word ``w<rank>`` drawn by Zipf's law (ranks past the vocabulary
    drawn again uniformly)."""
    rng = np.random.default_rng(seed)
    ranks = rng.zipf(ZIPF, (count, length))
    beyond = ranks > VOCABULARY
    ranks[beyond] = rng.integers(1, VOCABULARY + 1, int(beyond.sum()))
    return [" ".join(f"w{rank}" for rank in row) for row in ranks.tolist()]


async def load(store: HistoryStore, vectors: np.ndarray, batch: int) -> float:
    """Write one single-chunk record per vector, ``batch`` records per call; return seconds."""
    started = time.perf_counter()
    texts = zipf_words(len(vectors), CHUNK_WORDS, seed=7)
    with tqdm(total=len(vectors), unit="chunk", desc="loading", mininterval=2.0) as progress:
        for start in range(0, len(vectors), batch):
            items = [
                (
                    Record(
                        ORG,
                        f"r{i}",
                        "voice",
                        "USA",
                        NOW,
                        NOW,
                        user_id=f"user-{i % USERS}",
                        metadata={"tier": f"t{(i // USERS) % USERS}", "rank": (i // 10) % 1000},
                    ),
                    [Chunk(0, 1, texts[i], vectors[i])],
                )
                for i in range(start, min(start + batch, len(vectors)))
            ]
            await store.write_records(items)
            progress.update(len(items))
    return time.perf_counter() - started


def exact_top(vectors: np.ndarray, queries: np.ndarray, candidates: np.ndarray, k: int) -> list[set[str]]:
    """Truth: the ``k`` best candidates per query by brute force, in blocks to bound memory."""
    truth: list[set[str]] = []
    block = max(1, 20_000_000 // max(len(candidates), 1))
    subset = vectors[candidates]
    for start in range(0, len(queries), block):
        scores = queries[start : start + block] @ subset.T
        best = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        truth += [{f"r{i}_chunk_0" for i in candidates[row]} for row in best]
    return truth


def exact_latency(vectors: np.ndarray, queries: np.ndarray, mask: np.ndarray, k: int) -> dict[str, float]:
    """The reference point: numpy brute force over the candidates, one query at a time (recall 1 by definition)."""
    subset = vectors[np.flatnonzero(mask)]
    latencies = []
    for query in queries[:EXACT_QUERIES]:
        started = time.perf_counter()
        scores = subset @ query
        top = np.argpartition(-scores, min(k, len(scores) - 1))[:k]
        top = top[np.argsort(-scores[top])]
        latencies.append(time.perf_counter() - started)
    ms = np.asarray(latencies) * 1000
    return {
        "p50_ms": round(float(np.percentile(ms, 50)), 3),
        "p99_ms": round(float(np.percentile(ms, 99)), 3),
        "recall_at_10": 1.0,
    }


async def measure(
    store: HistoryStore,
    vectors: np.ndarray,
    queries: np.ndarray,
    params: list[tuple[str, str]],
    mask: np.ndarray,
    k: int,
) -> dict[str, float]:
    """Latency of back-to-back searches (truth computed beforehand, off the clock)."""
    where: Filter = parse_filters(params)
    candidates = np.flatnonzero(mask)
    truth = exact_top(vectors, queries, candidates, k)
    started = time.perf_counter()
    await store.search(ORG, "voice", queries[0], where, k)  # warm caches (a metadata key's column is built here)
    first_ms = (time.perf_counter() - started) * 1000
    latencies, found = [], []
    for query in queries:
        started = time.perf_counter()
        hits = await store.search(ORG, "voice", query, where, k)
        latencies.append(time.perf_counter() - started)
        found.append({hit.id for hit in hits})
    recalls = [len(t & f) / min(k, len(candidates)) for t, f in zip(truth, found)]
    ms = np.asarray(latencies) * 1000
    return {
        "candidates": int(len(candidates)),
        "p50_ms": round(float(np.percentile(ms, 50)), 3),
        "p99_ms": round(float(np.percentile(ms, 99)), 3),
        "recall_at_10": round(float(np.mean(recalls)), 4),
        "first_search_ms": round(first_ms, 1),
    }


async def measure_modes(store: HistoryStore, queries: np.ndarray, params: list[tuple[str, str]]) -> dict[str, Any]:
    """p50/p99 of the service's ranking in each mode, the same query vectors with Zipf-drawn words."""
    where: Filter = parse_filters(params)
    texts = zipf_words(len(queries), QUERY_WORDS, seed=8)
    if isinstance(store, SqliteHistoryStore):
        await store.keyword_index()  # the mirror of the words is built beside the first searches after open
    cells: dict[str, Any] = {}
    for mode in MODES:
        latencies = []
        for number, (vector, text) in enumerate(zip(queries, texts)):
            query = SearchQuery(q=text, record_type="voice", top_k=10, where=where, mode=mode)
            started = time.perf_counter()
            await rank_in_region(store, ORG, query, vector, where)
            if number:  # the first warms caches
                latencies.append(time.perf_counter() - started)
        ms = np.asarray(latencies) * 1000
        cells[mode] = {
            "p50_ms": round(float(np.percentile(ms, 50)), 3),
            "p99_ms": round(float(np.percentile(ms, 99)), 3),
        }
    cells["hybrid_over_semantic_p50"] = round(cells["hybrid"]["p50_ms"] / cells["semantic"]["p50_ms"], 2)
    return cells


async def run(args: argparse.Namespace) -> dict[str, Any]:
    seed = np.load(args.seed_vectors) if args.seed_vectors else None
    if args.seed_from_model:
        seed, args.seed_vectors = seed_from_model(args.seed_from_model), f"{args.seed_from_model} real texts"
    results: dict[str, Any] = {
        "dimension": DIM,
        "vectors": f"mixed from {args.seed_vectors}"
        if seed is not None
        else "synthetic e5-shaped (no seed file given)",
        "queries": args.queries,
        "k": 10,
        "cpus": os.cpu_count(),
        "sizes": {},
    }
    for size in args.sizes:
        pool = vector_pool(args, seed, size)
        vectors, queries = pool[:size], pool[size : size + args.queries]  # queries: held-out draws
        cosine = mean_pairwise_cosine(vectors)
        print(f"\n{size} chunks, dim {DIM}, mean pairwise cosine {cosine:.3f}")
        numbers = np.arange(size)
        row: dict[str, Any] = {"mean_pairwise_cosine": round(cosine, 3), "load_average_before": os.getloadavg()[0]}
        exact: dict[str, dict[str, float]] = {}
        for name, factory in BACKENDS:
            if name != "embedded" and size > args.node_max_size:
                continue
            with contextlib.ExitStack() as stack:
                kept = name == "embedded" and args.store is not None
                folder = args.store / str(size) if kept else Path(stack.enter_context(temporary_folder()))
                reused = kept and (folder / "embedded" / "store.sqlite3").exists()
                layout = folder / "layout"
                if reused and (not layout.exists() or layout.read_text() != LAYOUT):
                    shutil.rmtree(folder / "embedded", ignore_errors=True)
                    reused = False
                async with factory(folder) as store:
                    backend: dict[str, Any] = {"load_s": "reused from --store"}
                    if reused and isinstance(store, SqliteHistoryStore):  # measure it as it runs, not mapped
                        started = time.perf_counter()
                        await store.in_memory()
                        backend["read_into_memory_s"] = round(time.perf_counter() - started, 2)
                    if not reused:
                        seconds = await load(store, vectors, args.batch)
                        if kept:
                            (folder / "layout").write_text(LAYOUT)
                        backend = {"load_s": round(seconds, 1), "load_us_per_chunk": round(seconds / size * 1e6, 1)}
                    before: dict[str, Any] = {}
                    for case, (params, mask_of) in CASES.items():
                        backend[case] = await measure(store, vectors, queries, params, mask_of(numbers), 10)
                        if name == "embedded":  # the reference in the same minute, before a node loads and merges
                            exact[case] = exact_latency(vectors, queries, mask_of(numbers), 10)
                        if isinstance(store, SqliteHistoryStore) and args.sql:  # the same load, filters on SQL
                            store.filter_target = "sql"
                            before[case] = await measure(store, vectors, queries, params, mask_of(numbers), 10)
                            store.filter_target = "columns"
                    backend["modes"] = {
                        case: await measure_modes(store, queries, CASES[case][0]) for case in MODE_CASES
                    }
                    if before:
                        row[f"{name}-sql"] = before
                if isinstance(store, SqliteHistoryStore):
                    seconds, keys = await reopen_seconds(folder)
                    backend["reopen_s"], backend["reopen_metadata_keys"] = round(seconds, 2), keys
                    if args.baseline:
                        row.update(baseline(folder / "embedded", vectors, queries, args.baseline))
            row[name] = backend
        row[EXACT] = exact or {
            case: exact_latency(vectors, queries, mask_of(numbers), 10) for case, (_, mask_of) in CASES.items()
        }
        row["load_average_after"] = os.getloadavg()[0]
        results["sizes"][str(size)] = row
        print_table(size, row, list(CASES))
    return results


def temporary_folder() -> contextlib.AbstractContextManager[str]:
    return tempfile.TemporaryDirectory(prefix="bench-search-")


def vector_pool(args: argparse.Namespace, seed: np.ndarray | None, size: int) -> np.ndarray:
    """``size`` chunk vectors then the queries; with ``--store``, the ones its kept store was loaded with."""
    total = size + args.queries
    kept = args.store / str(size) / "pool.npy" if args.store else None
    if kept is not None and kept.exists():
        pool: np.ndarray = np.load(kept)
        if len(pool) >= total:
            return pool
    pool = from_seed(seed, total) if seed is not None else synthetic(total, DIM)
    if kept is not None:  # new vectors: a store loaded with others is of no use
        shutil.rmtree(kept.parent, ignore_errors=True)
        kept.parent.mkdir(parents=True)
        np.save(kept, pool)
    return pool


def baseline(store: Path, vectors: np.ndarray, queries: np.ndarray, revision: str) -> dict[str, Any]:
    """``compare_revisions`` over this run's cases, truth and modes."""
    numbers = np.arange(len(vectors))
    truth = {
        case: exact_top(vectors, queries, np.flatnonzero(mask_of(numbers)), 10) for case, (_, mask_of) in CASES.items()
    }
    cases = {case: params for case, (params, _) in CASES.items()}
    modes = [(case, mode) for case in MODE_CASES for mode in MODES]
    return compare_revisions(store, queries, revision, cases, truth, modes, zipf_words(len(queries), QUERY_WORDS, 8))


def seed_from_model(count: int) -> np.ndarray:
    """Real e5 embeddings of up to ``count`` real texts (cached in bench-results/ across runs)."""
    from _vectors import real_texts

    from embedder import Embedder, ensure_default_model

    texts = real_texts(count)
    cache = Path("bench-results") / f"seed-e5-{len(texts)}.npy"
    if cache.exists():
        return np.load(cache)
    embedder = Embedder.from_dir(ensure_default_model())
    vectors = np.concatenate(
        [embedder.passage(texts[start : start + 64]) for start in tqdm(range(0, len(texts), 64), desc="seed vectors")]
    )
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.save(cache, vectors)
    return vectors


async def reopen_seconds(folder: Path) -> tuple[float, int]:
    """Time to open the embedded store again from its snapshot (the restart cost), and the metadata keys
    that came back with it (kept as filter columns, so no first search pays a pass over SQLite)."""
    started = time.perf_counter()
    store = SqliteHistoryStore(folder / "embedded")
    await store.open(DIM)
    seconds = time.perf_counter() - started
    assert set(store.load_report.values()) == {"snapshot"}, store.load_report
    keys = sum(len(index.columns.metadata.columns) for index in store._indexes.values())
    await store.close()
    return seconds, keys


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100000,1000000", type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--batch", type=int, default=5000, help="records per write_records call")
    parser.add_argument("--seed-vectors", type=Path, help=".npy of real embeddings (n, 384) to mix from")
    parser.add_argument(
        "--metadata", action="store_true", help="also the metadata filter cases (30%%, in, range, contains)"
    )
    parser.add_argument("--seed-from-model", type=int, default=0, help="embed this many real texts as the seeds")
    parser.add_argument("--store", type=Path, help="keep the loaded embedded store in DIR/<size> and reuse it")
    parser.add_argument("--baseline", help="also search the store with the code of this git revision, in turns")
    parser.add_argument("--out", type=Path, default=Path("bench-results/search.json"))
    parser.add_argument("--opensearch", action="store_true", help="also bench a real node started here")
    parser.add_argument("--opensearch-url", help="also bench this running OpenSearch node")
    parser.add_argument(
        "--node-max-size",
        type=int,
        default=100_000,
        help="bench the node only at sizes up to this: it is loaded afresh on every run, chunk by chunk over HTTP",
    )
    parser.add_argument(
        "--no-sql", dest="sql", action="store_false", help="skip the embedded store's SQL filters (slow at 1M)"
    )
    parser.add_argument("--knn-engine", default="lucene", help="k-NN engine of the OpenSearch index")
    args = parser.parse_args()
    if args.metadata:
        CASES.update(METADATA_CASES)
    if args.opensearch or args.opensearch_url:
        BACKENDS.append((f"opensearch-{args.knn_engine}", opensearch_backend(args.opensearch_url, args.knn_engine)))
    with asyncio.Runner(loop_factory=serving_loop) as runner:  # the loop and GIL interval ``serve`` runs with
        results = runner.run(run(args))
    write_report(args.out, results, plot_search)


if __name__ == "__main__":
    main()
