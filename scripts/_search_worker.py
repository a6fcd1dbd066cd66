"""One side of ``bench_search.py --baseline``: searches an existing embedded store with whichever code is on the path.

    PYTHONPATH=<a checkout> python scripts/_search_worker.py STORE_FOLDER QUERIES.npy CASES_JSON SWITCH_INTERVAL

The coordinator starts one worker per code version on the same store folder
and sends them the same searches in turns, so both are measured on the same
data under the same machine load.  Requests are JSON lines ``{"case": name,
"query": number}`` (a semantic search of the store), or with ``"mode"`` and
``"text"`` too (the service's ranking in that mode); each answer is a JSON line
with the wall and CPU time of that search (CPU of the whole process, so BLAS
and OpenMP helper threads count) and the hit ids and scores.  An empty line ends the session with the process's
total CPU time, which also counts helper threads still spinning between
searches.  Both sides run on uvloop with the GIL switch interval the
coordinator passes, as ``serve`` of this tree runs, whatever the checkout's
own ``serve`` did.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import numpy as np
import uvloop


async def serve(folder: Path, queries: np.ndarray, cases: dict[str, list[list[str]]]) -> None:
    import memory_plugin

    try:
        from memory_plugin.histories.stores.filters import parse_filters
        from memory_plugin.histories.stores.sqlite import SqliteHistoryStore
    except ImportError:  # a baseline from before the store moved under histories/ (and was named for SQLite)
        from memory_plugin.stores.embedded import EmbeddedStore as SqliteHistoryStore  # type: ignore[no-redef]
        from memory_plugin.stores.filters import parse_filters  # type: ignore[no-redef]

    try:
        from memory_plugin.histories.service import SearchQuery, rank_in_region
    except ImportError:  # a baseline from before the modes: asked for semantic searches only
        SearchQuery = rank_in_region = None  # type: ignore[assignment,misc]

    wheres = {name: parse_filters([(key, value) for key, value in params]) for name, params in cases.items()}
    store = SqliteHistoryStore(folder)
    await store.open(queries.shape[1])
    if hasattr(store, "keyword_index"):  # the keyword mirror is built beside the first searches after open
        await store.keyword_index()
    try:
        print(json.dumps({"code": memory_plugin.__file__, "load_report": store.load_report}), flush=True)
        cpu_started = time.process_time()
        searches = 0
        while line := sys.stdin.readline().strip():
            request = json.loads(line)
            where, query = wheres[request["case"]], queries[request["query"]]
            mode = request.get("mode")
            wall, cpu = time.perf_counter(), time.process_time()
            if mode is None:
                hits = await store.search("org-bench", "voice", query, where, 10)
            else:  # through the service's ranking, as bench_search's modes
                asked = SearchQuery(q=request["text"], record_type="voice", top_k=10, where=where, mode=mode)
                hits = await rank_in_region(store, "org-bench", asked, query, where)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            searches += 1
            found = {"ids": [hit.id for hit in hits], "scores": [hit.score for hit in hits]}
            print(json.dumps({"ms": wall * 1e3, "cpu_ms": cpu * 1e3, **found}), flush=True)
        total = (time.process_time() - cpu_started) * 1e3
        print(json.dumps({"cpu_total_ms": total, "searches": searches}), flush=True)
    finally:
        await store.close()


def main() -> None:
    folder, queries, cases = Path(sys.argv[1]), np.load(sys.argv[2]), json.loads(sys.argv[3])
    sys.setswitchinterval(float(sys.argv[4]))
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(serve(folder, queries, cases))


if __name__ == "__main__":
    main()
