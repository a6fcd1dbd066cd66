"""Agentic memory: add-memory throughput over HTTP, and semantic / hybrid search latency over 100k memories.

    python scripts/bench_agentic.py [--adds 3000] [--memories 100000] [--searches 300] [--out bench-results/agentic.json]

``--adds 0`` skips the first part and ``--memories 0`` the second; ``--baseline REV`` also adds through the code of git
revision REV on a second server, its runs interleaved with this tree's (``--repeat N``
runs each N times and keeps the best).

Two parts, one table, one JSON and one PNG:

- ``POST /_plugins/_ml/memory_containers/{id}/memories`` (infer off) against a real
  server on loopback, at concurrency 32: plain conversational adds, adds
  naming a ``session_id`` (which also touch the session document), and plain
  adds into a container whose working memory was searched by a term first (the
  embedded store keeps postings for a type from its first such search on);
- semantic and hybrid search over ``--memories`` long-term memories written
  straight into the embedded store (texts are real paragraphs with a suffix,
  vectors are mixed from the real embeddings of those paragraphs, as
  ``scripts/_vectors.py`` does, so nobody waits for 100k embeddings), through
  the service with the real model embedding every query (all distinct, so the
  query cache never answers), at concurrency 1, with and without a namespace
  filter that keeps a tenth of the memories.  Hybrid runs twice: BM25 from the
  in-memory mirror (``stores/bm25.py``, top-k with early termination), and with
  FTS5 ranking every match as before it; the store's own ``bm25`` and ``knn``
  (no query embedding) are timed apart, and so are closing the store (which saves
  the BM25 mirror) and reopening it, with the saved mirror and without.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from _plots import plot_agentic, write_report  # noqa: E402
from _revisions import archived  # noqa: E402
from _vectors import from_seed, real_texts  # noqa: E402
from bench_memory import drive  # noqa: E402

from embedder import AsyncEmbedder, Embedder, ensure_default_model  # noqa: E402
from memory_plugin.agentic.container_requests import parse_container  # noqa: E402
from memory_plugin.agentic.memory_requests import parse_long_term_search  # noqa: E402
from memory_plugin.agentic.models import LONG_TERM  # noqa: E402
from memory_plugin.agentic.service import AgenticService  # noqa: E402
from memory_plugin.agentic.stores.base import LongTermScope  # noqa: E402
from memory_plugin.agentic.stores.bm25 import LexicalIndex  # noqa: E402
from memory_plugin.agentic.stores.bm25_files import mirror_file  # noqa: E402
from memory_plugin.agentic.stores.sqlite import SqliteAgenticStore  # noqa: E402
from memory_plugin.agentic.stores.vectors import GRAPH_MIN_ROWS, Matrix  # noqa: E402
from memory_plugin.agentic.views import ranked_view  # noqa: E402
from memory_plugin.app import serving_loop  # noqa: E402
from memory_plugin.auth import KeyStore, Principal  # noqa: E402
from tests.support.agentic_llm import SEMANTIC_CONFIG  # noqa: E402
from tests.support.live import LiveServer  # noqa: E402

BASE = "/_plugins/_ml/memory_containers"
OWNER = Principal("bench-org", "bench-user")
USERS = 10


def message(n: int) -> list[dict]:
    return [
        {"role": "user", "content": [{"type": "text", "text": f"Question {n}: why was I charged twice this month?"}]},
        {"role": "assistant", "content": [{"type": "text", "text": f"Answer {n}: a duplicate authorisation."}]},
    ]


async def bench_adds(
    requests: int, concurrency: int, log_level: str, baseline: str | None = None, repeat: int = 1
) -> list[dict]:
    """Adds against this tree's server, and against ``baseline``'s code on a second one, cases interleaved;
    each case's best of ``repeat`` runs is kept."""
    import aiohttp

    workdir = Path(tempfile.mkdtemp(prefix="bench-agentic-"))
    env = {"MEMORY_PLUGIN_MODEL_DIR": str(ensure_default_model()), "MEMORY_PLUGIN_LOG_LEVEL": log_level}

    def plain(n: int) -> dict:
        return {"messages": message(n), "namespace": {"user_id": f"u{n % USERS}"}}

    cases = [  # name, body, whether the container's working memory was searched by a term first
        ("add memory", plain, False),
        (
            "add memory + session",
            lambda n: {
                "messages": message(n),
                "namespace": {"user_id": f"u{n % USERS}", "session_id": f"s{n % 100}"},
            },
            False,
        ),
        ("add memory, container searched", plain, True),
    ]
    best: dict[str, dict] = {}
    with contextlib.ExitStack() as stack:
        sides = [("", None)]
        if baseline:
            sides.append((f" @{baseline}", stack.enter_context(archived(baseline, "memory_plugin", "embedder"))))
        targets = []
        for suffix, code in sides:
            data = workdir / f"data{len(targets)}"
            _, token = KeyStore(data / "keys.json").create(OWNER.organization_id, OWNER.user_id)
            headers = {"Authorization": f"Bearer {token}"}
            server = stack.enter_context(LiveServer(data, env=env, code=code))
            assert server.process is not None
            urls = {}
            async with aiohttp.ClientSession(server.url, headers=headers) as http:
                for searched in (False, True):
                    async with http.post(
                        BASE + "/_create", json={"name": "bench", "configuration": SEMANTIC_CONFIG}
                    ) as response:
                        urls[searched] = f"{BASE}/{(await response.json())['memory_container_id']}/memories"
                # a session load, as the LangGraph checkpointer sends before its adds: the store keeps postings
                load = {"query": {"term": {"namespace.session_id": "s0"}}, "sort": [{"created_time": "desc"}]}
                async with http.post(urls[True] + "/working/_search", json=load) as response:
                    assert response.status == 200, await response.text()
            targets.append((suffix, server.url, urls, headers, server.process.pid))
        with tqdm(total=requests * len(cases) * len(targets) * repeat, unit="req", desc="adds") as bar:
            for _ in range(repeat):
                for name, body, searched in cases:
                    for suffix, root, urls, headers, pid in targets:
                        url = root + urls[searched]
                        row = await drive(name + suffix, url, "POST", body, headers, requests, concurrency, bar, pid)
                        if row["case"] not in best or row["req_per_s"] > best[row["case"]]["req_per_s"]:
                            best[row["case"]] = row
    return list(best.values())


async def fill_store(
    store: SqliteAgenticStore, container_id: str, count: int, texts: list[str], vectors: np.ndarray
) -> None:
    """``count`` long-term memories written straight into the store, then their vectors."""
    now = int(time.time() * 1000)
    with tqdm(total=count * 2, unit="mem", desc="fill") as bar:
        for start in range(0, count, 5000):
            rows = []
            for n in range(start, min(count, start + 5000)):
                doc = {
                    "memory": f"{texts[n % len(texts)]} (memory {n})",
                    "strategy_type": "SEMANTIC",
                    "strategy_id": "semantic_00000000",
                    "namespace": {"user_id": f"u{n % USERS}"},
                    "namespace_size": 1,
                    "owner_id": OWNER.user_id,
                    "memory_container_id": container_id,
                    "created_time": now,
                    "last_updated_time": now,
                }
                rows.append((f"m{n:07d}", doc))

            def insert(c, rows=rows):  # type: ignore[no-untyped-def]
                return [store._insert(c, OWNER, container_id, LONG_TERM, memory_id, doc).seq for memory_id, doc in rows]

            seqs = await store.db.write(insert)
            bar.update(len(rows))
            embedded = [(seq, doc["memory"], vectors[start + i]) for i, (seq, (_, doc)) in enumerate(zip(seqs, rows))]
            await store.store_embeddings(embedded)
            bar.update(len(rows))


async def graph_built(matrix: Matrix) -> None:
    """Wait for the container's graph to settle (built on its own thread, again until its tail is short)."""
    while matrix.size >= GRAPH_MIN_ROWS and (matrix.building or not matrix.graph_ready):
        await asyncio.sleep(0.05)


async def knn_recall(store: SqliteAgenticStore, matrix: Matrix, scope: LongTermScope, queries: list) -> float:
    """recall@10 of the store's k-NN (the planner's path) against the exact scan of the same rows."""
    graph, found = matrix.graph, []
    for vector in queries:
        planned = {doc.id for doc, _ in await store.knn(scope, vector, 10)}
        matrix.graph = None
        exact = {doc.id for doc, _ in await store.knn(scope, vector, 10)}
        matrix.graph = graph
        found.append(len(planned & exact) / max(1, len(exact)))
    return round(float(np.mean(found)), 4)


async def bench_search(memories: int, searches: int, seed_texts: int) -> list[dict]:
    workdir = Path(tempfile.mkdtemp(prefix="bench-agentic-search-"))
    model = Embedder.from_dir(ensure_default_model())
    texts = real_texts(seed_texts)
    print(f"embedding {len(texts)} real paragraphs as seeds ...")
    seeds = model.passage(texts)
    vectors = from_seed(seeds, memories, seed=7)
    store = SqliteAgenticStore(workdir / "agentic.sqlite3")
    await store.open(model.dimension)
    batcher = AsyncEmbedder(model)
    service = AgenticService(store, batcher)
    container_id = "bench-container-000000"
    await store.insert_container(
        OWNER,
        container_id,
        parse_container({"name": "bench", "configuration": SEMANTIC_CONFIG}, False).document(
            model.dimension, OWNER.user_id or ""
        ),
    )
    await fill_store(store, container_id, memories, texts, vectors)
    matrix = store._indexes[container_id]
    started = time.perf_counter()
    await graph_built(matrix)
    graph_ms = (time.perf_counter() - started) * 1000  # the last build's wait (earlier ones ran during the fill)
    rng = random.Random(3)
    words = [w for t in texts for w in t.split() if w.isalpha() and len(w) > 3]
    queries = [" ".join(rng.sample(words, 4)) + f" {n}" for n in range(searches * 12)]
    results = []
    namespace = {"namespace": {"user_id": "u3"}}
    scope, scope_u3 = (
        LongTermScope(OWNER, container_id),
        LongTermScope(OWNER, container_id, [("namespace.user_id", "u3")]),
    )
    query_vectors = list(model.query([q + " vector" for q in queries[: min(searches, 50)]]))

    def store_call(method, scope):  # type: ignore[no-untyped-def]
        async def call(_owner, _container, body):  # type: ignore[no-untyped-def]
            arg = query_vectors[hash(body["query"]) % len(query_vectors)] if method == "knn" else body["query"]
            return {"hits": {"hits": await getattr(store, method)(scope, arg, body["k"])}}

        return call

    def searched(hybrid: bool):  # type: ignore[no-untyped-def]
        """The ``_search`` route's path: the body parsed, the search run, the hits rendered."""
        search = service.search.hybrid if hybrid else service.search.semantic

        async def call(owner, container, body):  # type: ignore[no-untyped-def]
            return ranked_view(await search(owner, container, parse_long_term_search(body, hybrid=hybrid)))

        return call

    # (name, search, extra body, as before: FTS5 ranks every BM25 match and k-NN scans every passing row)
    cases = [
        ("semantic k=10", searched(False), {}, False),
        ("semantic k=10, namespace", searched(False), namespace, False),
        ("hybrid k=10", searched(True), {}, False),
        ("hybrid k=10, namespace", searched(True), namespace, False),
        ("hybrid k=10 (FTS5 ranks, no graph: before)", searched(True), {}, True),
        ("hybrid k=10, namespace (FTS5 ranks, no graph: before)", searched(True), namespace, True),
        ("bm25 k=10 (store only)", store_call("bm25", scope), {}, False),
        ("bm25 k=10, namespace (store only)", store_call("bm25", scope_u3), {}, False),
        ("bm25 k=10 (store only, FTS5 ranks)", store_call("bm25", scope), {}, True),
        ("knn k=10 (store only)", store_call("knn", scope), {}, False),
        ("knn k=10, namespace (store only)", store_call("knn", scope_u3), {}, False),
        ("knn k=10 (store only, exact scan)", store_call("knn", scope), {}, True),
    ]
    mirror, graph = store._lexical, matrix.graph
    latencies: list[list[float]] = [[] for _ in cases]
    with tqdm(total=searches * len(cases), unit="q", desc="search") as bar:
        # the cases take turns, query by query, so that a change in the machine's load hits them all alike
        for turn in range(searches):
            for index, (name, search, extra, before) in enumerate(cases):
                # an empty mirror's totals are not FTS5's: the store lets FTS5 rank every match, as before it
                store._lexical = LexicalIndex() if before else mirror
                matrix.graph = None if before else graph
                query = queries[index * searches + turn]  # distinct: the query embedding cache never answers
                started = time.perf_counter()
                found = await search(OWNER, container_id, {"query": query, "k": 10, **extra})
                latencies[index].append(time.perf_counter() - started)
                assert found["hits"]["hits"] or name.startswith("bm25"), name  # BM25 alone may match nothing
                bar.update()
    store._lexical, matrix.graph = mirror, graph
    recalls = {"knn k=10 (store only)": await knn_recall(store, matrix, scope, query_vectors)}
    recalls["knn k=10, namespace (store only)"] = await knn_recall(store, matrix, scope_u3, query_vectors)
    for (name, *_), measured in zip(cases, latencies):
        ms = np.array(measured) * 1000
        results.append(
            {
                "case": name,
                "memories": memories,
                "searches": searches,
                "concurrency": 1,
                "p50_ms": round(float(np.percentile(ms, 50)), 2),
                "p99_ms": round(float(np.percentile(ms, 99)), 2),
                "req_per_s": round(searches / float(ms.sum() / 1000), 1),
                **({"recall_at_10": recalls[name]} if name in recalls else {}),
            }
        )
    # the query embedding alone, for scale
    started = time.perf_counter()
    for query in queries[-50:]:
        await batcher.query(query + " embedding only")
    embed_ms = (time.perf_counter() - started) / 50 * 1000
    store._lexical = mirror
    await batcher.close()
    started = time.perf_counter()
    await store.close()
    close_ms = (time.perf_counter() - started) * 1000
    reopened = SqliteAgenticStore(workdir / "agentic.sqlite3")
    started = time.perf_counter()
    await reopened.open(model.dimension)
    reopen_ms = (time.perf_counter() - started) * 1000
    opened = time.perf_counter()
    assert await reopened.lexical_ready()
    ready_ms = (time.perf_counter() - opened) * 1000  # the mirror is read beside the graph's check
    await graph_built(reopened._indexes[container_id])
    graph_reopened_ms = (time.perf_counter() - started) * 1000
    await reopened.close()
    mirror_file(workdir / "agentic.sqlite3").unlink()  # as after a crash: the mirror is built from FTS5
    rebuilt = SqliteAgenticStore(workdir / "agentic.sqlite3")
    await rebuilt.open(model.dimension)
    opened = time.perf_counter()
    assert await rebuilt.lexical_ready()
    rebuilt_ms = (time.perf_counter() - opened) * 1000
    await rebuilt.close()
    for case, ms in (
        ("graph built after the fill (its last build)", graph_ms),
        ("graph ready after reopen (its saved build, checked against SQLite)", graph_reopened_ms),
        ("close (saves the BM25 mirror)", close_ms),
        ("BM25 mirror ready after open returned (its saved copy)", ready_ms),
        ("BM25 mirror ready after open returned (built from FTS5, no saved copy)", rebuilt_ms),
    ):
        results.append(
            {
                "case": case,
                "memories": memories,
                "searches": 1,
                "concurrency": 1,
                "p50_ms": round(ms, 1),
                "p99_ms": None,
                "req_per_s": None,
            }
        )
    results.append(
        {
            "case": "reopen (vectors and saved graph; FTS5 ranks until the mirror is built)",
            "memories": memories,
            "searches": 1,
            "concurrency": 1,
            "p50_ms": round(reopen_ms, 1),
            "p99_ms": None,
            "req_per_s": None,
        }
    )
    results.append(
        {
            "case": "query embedding only",
            "memories": 0,
            "searches": 50,
            "concurrency": 1,
            "p50_ms": round(embed_ms, 2),
            "p99_ms": None,
            "req_per_s": round(1000 / embed_ms, 1),
        }
    )
    return results


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--adds", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--searches", type=int, default=300)
    parser.add_argument("--seed-texts", type=int, default=1000)
    parser.add_argument("--log-level", default="warning", help="the server's log level (info logs every request)")
    parser.add_argument("--baseline", help="also add through this git revision's code, interleaved with ours")
    parser.add_argument("--repeat", type=int, default=1, help="runs per add case, interleaved; the best is kept")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "agentic.json")
    args = parser.parse_args()

    results = []
    if args.adds:
        results = await bench_adds(args.adds, args.concurrency, args.log_level, args.baseline, args.repeat)
    if args.memories:
        results += await bench_search(args.memories, args.searches, args.seed_texts)
    print(
        f"\n{'case':<56}{'memories':>10}{'conc':>6}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'recall@10':>11}"
        f"{'cpu ms/req':>12}"
    )
    for row in results:
        # The server's CPU per add: the figure the machine's other load moves least (adds only).
        print(
            f"{row['case']:<56}{row.get('memories', '-')!s:>10}{row['concurrency']:>6}{row['req_per_s']!s:>10}"
            f"{row['p50_ms']:>10}{row['p99_ms']!s:>10}{row.get('recall_at_10', '')!s:>11}"
            f"{row.get('server_cpu_ms_per_request', '')!s:>12}"
        )
    write_report(args.out, {"results": results}, plot_agentic)


if __name__ == "__main__":
    with asyncio.Runner(loop_factory=serving_loop) as runner:  # the loop and GIL interval ``serve`` runs with
        runner.run(main())
