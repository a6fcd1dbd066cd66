"""Side by side on one OpenSearch node: the real ml-commons memory API, then this server with every store on it.

    python scripts/bench_opensearch.py [--quick] [--requests 1000] [--concurrency 32] [--workers 1,2]
        [--bridge off,on] [--opensearch-url URL [--no-ml-commons]] [--out bench-results/opensearch.json]

One node with k-NN and ml-commons 2.19.1 (``tests.support.opensearch.ml.ml_node``,
or ``--opensearch-url`` if it has ml-commons).  The same aiohttp client drives, at
``--concurrency``, the 2.12 memory API of each target:

- ``create``: ``POST /_plugins/_ml/memory/{id}/messages``;
- ``list``: ``GET /_plugins/_ml/memory/{id}/messages?max_results=10``;

into one memory (every client on the same memory, as an agent's turns are) and
into 32 memories (request n goes to memory n % 32).  The targets: ml-commons
itself; this server with the bridge off and on, at each worker count.

Besides requests/s and latency it reads the node's ``_nodes/stats`` before and
after each case: what OpenSearch did per operation (documents indexed, real-time
gets, searches, shard refreshes) and the node's CPU per operation.
Those counts do not depend on how loaded the machine is; requests/s do, so
compare ratios within one run.  Prints a table, writes JSON and a chart beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from _plots import plot_opensearch, write_report  # noqa: E402
from bench_scaleout import cpu_seconds  # noqa: E402

from tests.support.live import LiveServer  # noqa: E402

MEMORY = "/_plugins/_ml/memory"
#: What ``_nodes/stats`` counts, per operation: (column, path in ``indices``).
COUNTERS = {
    "indexed": ("indexing", "index_total"),
    "deleted": ("indexing", "delete_total"),
    "gets": ("get", "total"),
    "searches": ("search", "query_total"),
    "refreshes": ("refresh", "total"),
}


async def node_counters(http: aiohttp.ClientSession, node_url: str) -> dict[str, float]:
    async with http.get(f"{node_url}/_nodes/_local/stats/indices") as response:
        stats = await response.json()
    indices = next(iter(stats["nodes"].values()))["indices"]
    return {name: float(indices.get(group, {}).get(field, 0)) for name, (group, field) in COUNTERS.items()}


async def make_memories(url: str, headers: dict[str, str], count: int) -> list[str]:
    async with aiohttp.ClientSession(headers=headers) as http:
        memories = []
        for n in range(count):
            async with http.post(f"{url}{MEMORY}", json={"name": f"bench {n}"}) as response:
                assert response.status == 200, await response.text()
                memories.append((await response.json())["memory_id"])
        for memory in memories:  # something to list
            for n in range(10):
                body = {"input": f"question {n}", "response": f"answer {n}"}
                async with http.post(f"{url}{MEMORY}/{memory}/messages", json=body) as response:
                    assert response.status == 200, await response.text()
    return memories


async def drive(
    target: str, url: str, headers: dict[str, str], memories: list[str], op: str, args: Any, node: Any
) -> dict[str, Any]:
    """``args.requests`` calls at ``args.concurrency`` into ``memories``; what the node did meanwhile."""
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    queue = iter(range(args.requests))

    def request(n: int) -> tuple[str, str, Any]:
        memory = memories[n % len(memories)]
        if op == "create":
            return "POST", f"{url}{MEMORY}/{memory}/messages", {"input": f"question {n}", "response": f"answer {n}"}
        return "GET", f"{url}{MEMORY}/{memory}/messages?max_results=10", None

    connector = aiohttp.TCPConnector(limit=args.concurrency)
    async with aiohttp.ClientSession(headers=headers, connector=connector) as http, aiohttp.ClientSession() as admin:

        async def client() -> None:
            for n in queue:
                method, address, body = request(n)
                started = time.perf_counter()
                async with http.request(method, address, json=body) as response:
                    await response.read()
                    statuses[response.status] = statuses.get(response.status, 0) + 1
                latencies.append(time.perf_counter() - started)

        pids = [node.pid] if node.pid else []  # a node not started here: its CPU is not measured
        before, cpu_before, started = await node_counters(admin, node.url), cpu_seconds(pids), time.perf_counter()
        await asyncio.gather(*(client() for _ in range(args.concurrency)))
        elapsed = time.perf_counter() - started
        cpu = cpu_seconds(pids) - cpu_before
        after = await node_counters(admin, node.url)
    ms = np.array(latencies) * 1000
    row: dict[str, Any] = {
        "target": target,
        "op": op,
        "memories": len(memories),
        "requests": args.requests,
        "req_per_s": round(args.requests / elapsed, 1),
        "p50_ms": round(float(np.percentile(ms, 50)), 2),
        "p99_ms": round(float(np.percentile(ms, 99)), 2),
        "opensearch_cpu_ms_per_op": round(cpu * 1000 / args.requests, 3),
        "statuses": statuses,
    }
    for name in COUNTERS:  # the four stats calls themselves count nothing here
        row[f"{name}_per_op"] = round((after[name] - before[name]) / args.requests, 3)
    print(format_row(row), flush=True)
    return row


async def cases(target: str, url: str, headers: dict[str, str], args: Any, node: Any) -> list[dict[str, Any]]:
    one, many = await make_memories(url, headers, 1), await make_memories(url, headers, 32)
    rows = []
    for memories in (one, many):
        for op in ("create", "list"):
            rows.append(await drive(target, url, headers, memories, op, args, node))
    return rows


def write_config(path: Path, url: str, prefix: str) -> Path:
    """Every store on the node: both regions (so memory and agentic memory), and the keys."""
    lines = ['home_region = "USA"', 'log_level = "warning"', "[auth]", 'keys_backend = "opensearch"']
    for name in ("USA", "DEU"):
        lines += [f"[regions.{name}]", 'store = "opensearch"', f'hosts = ["{url}"]', f'index_prefix = "{prefix}"']
    path.write_text("\n".join(lines) + "\n")
    return path


HEADER = (
    f"{'target':<22}{'op':<8}{'mem':>4}{'req/s':>8}{'p50 ms':>9}{'p99 ms':>9}{'os cpu':>8}"
    f"{'index':>7}{'get':>6}{'search':>7}{'refresh':>8}  statuses"
)


def format_row(row: dict[str, Any]) -> str:
    return (
        f"{row['target']:<22}{row['op']:<8}{row['memories']:>4}{row['req_per_s']:>8}{row['p50_ms']:>9}"
        f"{row['p99_ms']:>9}{row['opensearch_cpu_ms_per_op']:>8}{row['indexed_per_op']:>7}{row['gets_per_op']:>6}"
        f"{row['searches_per_op']:>7}{row['refreshes_per_op']:>8}  {row['statuses']}"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=1000, help="per case")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--workers", default="1,2", type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--bridge", default="off,on", type=lambda s: s.split(","))
    parser.add_argument("--quick", action="store_true", help="300 requests per case, 1 worker: a few minutes")
    parser.add_argument("--opensearch-url", help="a node with ml-commons (else one is started)")
    parser.add_argument("--no-ml-commons", action="store_true", help="only this server (a node without ml-commons)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "opensearch.json")
    args = parser.parse_args()
    if args.quick:
        args.requests, args.workers = 300, [1]

    workdir = Path(tempfile.mkdtemp(prefix="bench-opensearch-"))
    with ExitStack() as stack:
        if args.opensearch_url:
            node: Any = type("Node", (), {"url": args.opensearch_url, "pid": None})()
        else:
            from tests.support.opensearch.ml import ml_node

            node = stack.enter_context(ml_node())
        print(HEADER, flush=True)
        results = [] if args.no_ml_commons else await cases("ml-commons", node.url, {}, args, node)
        for bridge in args.bridge:
            for workers in args.workers:
                prefix = f"bench-os-{uuid.uuid4().hex[:8]}"
                config = write_config(workdir / f"config-{prefix}.toml", node.url, prefix)
                created = subprocess.run(
                    [sys.executable, "-m", "memory_plugin", "keys", "create", "--config", str(config), "--org", "b"],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                headers = {"Authorization": f"Bearer {created.stdout.split()[-1]}"}
                server = LiveServer(
                    workdir / f"data-{prefix}",
                    config=config,
                    args=["--workers", str(workers)],
                    env={"MEMORY_PLUGIN_BRIDGE_ENABLED": "true" if bridge == "on" else "false"},
                )
                with server:
                    target = f"ours, bridge {bridge}, {workers}w"
                    results += await cases(target, server.url, headers, args, node)

    plugin = {(row["op"], row["memories"]): row for row in results if row["target"] == "ml-commons"}
    print("\n" + HEADER + "  vs ml-commons")
    for row in results:
        base = plugin.get((row["op"], row["memories"]))
        row["ratio_to_ml_commons"] = round(row["req_per_s"] / base["req_per_s"], 3) if base else None
        print(f"{format_row(row)}  {row['ratio_to_ml_commons']}x")
    report = {
        "cores": os.cpu_count(),
        "concurrency": args.concurrency,
        "requests": args.requests,
        "load_average": os.getloadavg(),
        "results": results,
    }
    write_report(args.out, report, plot_opensearch)


if __name__ == "__main__":
    asyncio.run(main())
