"""Query-DSL ``_search`` of working memory: one session's last ten messages, with postings and by a full scan.

    python scripts/bench_dsl.py [--sizes 10000,100000,1000000] [--sessions 32] [--queries 200]
                                [--scan-up-to 100000] [--out bench-results/dsl.json]

A container is filled with N working memories written straight into the embedded store in batches (as
``bench_agentic`` fills long-term memory), by ``--agents`` agents over ``--sessions`` sessions, each memory a
conversational add of two messages.  Then the session load that LangGraph's checkpointer and the Strands
client send (``bool.filter`` ``term`` on ``namespace.session_id``, sorted by ``created_time`` desc, size 10)
runs through the service (``Memories.search``: parse, candidates, evaluation, response), each query on a
session picked at random, at concurrency 1:

- ``postings``: the candidates are the session's docs, read through the postings (``dsl.pushdown``);
- ``full scan``: every doc of the container, decoded and evaluated, as before postings (only up to
  ``--scan-up-to`` docs: it grows with the container).

The container grows in place from one size to the next.  Prints a table, writes JSON and a PNG beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from _plots import plot_dsl, write_report  # noqa: E402

from memory_plugin.agentic.container_requests import parse_container  # noqa: E402
from memory_plugin.agentic.containers import Containers  # noqa: E402
from memory_plugin.agentic.llm import ContainerModels  # noqa: E402
from memory_plugin.agentic.memories import Memories  # noqa: E402
from memory_plugin.agentic.memory_requests import parse_memory_search  # noqa: E402
from memory_plugin.agentic.models import WORKING  # noqa: E402
from memory_plugin.agentic.stores.sqlite import SqliteAgenticStore  # noqa: E402
from memory_plugin.agentic.views import hits_view  # noqa: E402
from memory_plugin.app import serving_loop  # noqa: E402
from memory_plugin.auth import Principal  # noqa: E402
from memory_plugin.background import Worker  # noqa: E402

OWNER = Principal("bench-org", "bench-user")
CONTAINER = "bench-container-000000"
BATCH = 5000


class Idle(Worker):
    async def drain(self) -> None:
        return None


def session_load(session: str) -> dict[str, Any]:
    """What the LangGraph checkpointer and the Strands client send to load a session's last messages."""
    return {
        "query": {"bool": {"filter": [{"term": {"namespace.session_id": session}}]}},
        "sort": [{"created_time": {"order": "desc"}}],
        "size": 10,
    }


def working(n: int, agents: int, sessions: int, now: int) -> dict[str, Any]:
    session, agent = f"session-{n % sessions:05d}", f"agent-{n % agents:02d}"
    return {
        "owner_id": OWNER.user_id,
        "memory_container_id": CONTAINER,
        "payload_type": "conversational",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": f"Question {n}: why was I charged twice?"}]},
            {"role": "assistant", "content": [{"type": "text", "text": f"Answer {n}: a duplicate authorisation."}]},
        ],
        "namespace": {"session_id": session, "agent_id": agent},
        "namespace_size": 2,
        "infer": False,
        "session_id": session,
        "created_time": now + n,
        "last_updated_time": now + n,
    }


async def fill(store: SqliteAgenticStore, start: int, stop: int, agents: int, sessions: int) -> float:
    """Working memories ``start`` to ``stop`` written in batches, with their postings (the container was searched
    before); seconds taken."""
    now = int(time.time() * 1000)
    began = time.perf_counter()
    with tqdm(total=stop - start, unit="mem", desc=f"fill to {stop:,}", mininterval=2.0) as bar:
        for first in range(start, stop, BATCH):
            rows = [(f"w{n:08d}", working(n, agents, sessions, now)) for n in range(first, min(stop, first + BATCH))]

            def insert(c, rows=rows):  # type: ignore[no-untyped-def]
                for memory_id, doc in rows:
                    store._insert(c, OWNER, CONTAINER, WORKING, memory_id, doc)

            await store.db.write(insert)
            bar.update(len(rows))
    return time.perf_counter() - began


async def measure(memories: Memories, sessions: int, queries: int, label: str) -> dict[str, Any]:
    rng = random.Random(11)
    latencies = []
    hits = 0
    for _ in tqdm(range(queries), desc=label, unit="q", mininterval=2.0, leave=False):
        body = session_load(f"session-{rng.randrange(sessions):05d}")
        began = time.perf_counter()
        found = await memories.search(OWNER, CONTAINER, "working", parse_memory_search("working", body))
        answer = hits_view(found)
        latencies.append((time.perf_counter() - began) * 1000)
        hits += len(answer["hits"]["hits"])
    latencies.sort()
    return {
        "p50_ms": round(statistics.median(latencies), 2),
        "p95_ms": round(latencies[min(len(latencies) - 1, int(len(latencies) * 0.95))], 2),
        "queries": queries,
        "hits_per_query": hits / queries,
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="bench-dsl-"))
    store = SqliteAgenticStore(workdir / "agentic.sqlite3")
    await store.open(384)
    await store.insert_container(
        OWNER, CONTAINER, parse_container({"name": "bench"}, False).document(384, OWNER.user_id or "")
    )
    idle = Idle("idle")  # never started: nothing is added through the service
    models = ContainerModels(None, None, None)  # type: ignore[arg-type]
    containers = Containers(store, models, retention_enabled=False)
    memories = Memories(store, containers, models, embeddings=idle, infer=idle, retention_enabled=False)
    results = []
    filled = 0
    try:
        # the container's first session load, before any memory: the store keeps postings from then on, and
        # the fill's time includes every write of them (a type nobody searched by a term has none)
        await measure(memories, args.sessions, 1, "first search")
        for size in sorted(args.sizes):
            fill_seconds = await fill(store, filled, size, args.agents, args.sessions)
            filled = size
            row: dict[str, Any] = {
                "memories": size,
                "sessions": args.sessions,
                "per_session": size // args.sessions,
                "fill_s": round(fill_seconds, 1),
                "file_mb": round((workdir / "agentic.sqlite3").stat().st_size / 2**20, 1),
            }
            row["postings"] = await measure(memories, args.sessions, args.queries, f"postings at {size:,}")
            if size <= args.scan_up_to:
                store.indexed_field = lambda path: False  # type: ignore[method-assign]  # as before postings
                try:
                    scans = max(10, args.queries // 10)
                    row["full scan"] = await measure(memories, args.sessions, scans, f"full scan at {size:,}")
                finally:
                    del store.indexed_field
            results.append(row)
            print_row(row)
    finally:
        await store.close()
    return {"results": results, "agents": args.agents, "sessions": args.sessions, "queries": args.queries}


def print_row(row: dict[str, Any]) -> None:
    cells = "   ".join(
        f"{mode} p50 {row[mode]['p50_ms']:>8.2f} ms  p95 {row[mode]['p95_ms']:>8.2f} ms"
        for mode in ("postings", "full scan")
        if mode in row
    )
    print(f"{row['memories']:>10,} memories ({row['per_session']:,} a session)   {cells}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000,1000000", type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--agents", type=int, default=32)
    parser.add_argument("--sessions", type=int, default=32, help="sessions the memories are spread over")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--scan-up-to", type=int, default=100_000, help="the largest size a full scan is timed at")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "dsl.json")
    args = parser.parse_args()
    with asyncio.Runner(loop_factory=serving_loop) as runner:  # the loop and GIL interval ``serve`` runs with
        report = runner.run(run(args))
    print(f"\n{'memories':>10} {'a session':>10} {'fill s':>8} {'MB':>8}   {'mode':<10} {'p50 ms':>9} {'p95 ms':>9}")
    for row in report["results"]:
        for mode in ("postings", "full scan"):
            if mode in row:
                cell = row[mode]
                print(
                    f"{row['memories']:>10,} {row['per_session']:>10,} {row['fill_s']:>8} {row['file_mb']:>8}   "
                    f"{mode:<10} {cell['p50_ms']:>9.2f} {cell['p95_ms']:>9.2f}"
                )
    write_report(args.out, report, plot_dsl)


if __name__ == "__main__":
    main()
