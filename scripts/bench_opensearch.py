"""Side by side on one OpenSearch node: the real ml-commons memory API, then this server with every store on it.

    python scripts/bench_opensearch.py [--quick] [--requests 1000] [--warmup 300] [--rounds 2] [--concurrency 32]
        [--workers 1,2] [--bridge off,on] [--opensearch-url URL [--no-ml-commons]] [--out bench-results/opensearch.json]

One node with k-NN and ml-commons 2.19.1 (``tests.support.opensearch.ml.ml_node``,
or ``--opensearch-url`` if it has ml-commons).  The same aiohttp client drives, at
``--concurrency``, the 2.12 memory API of each target:

- ``create``: ``POST /_plugins/_ml/memory/{id}/messages``;
- ``list``: ``GET /_plugins/_ml/memory/{id}/messages?max_results=10``;

into one memory (every client on the same memory, as an agent's turns are) and
into 32 memories (request n goes to memory n % 32).  The targets: ml-commons
itself; this server with the bridge off and on, at each worker count.

The JVM's JIT makes a path several times cheaper once it has run a while: measured
once, in order, the first target (ml-commons) paid for the warm-up of the paths
everyone shares, and in one run the same list cost the node 4.1 ms at the start and
2.4 ms near the end.  So every target is measured ``--rounds`` times in the same
order (the report is the last round, the earlier ones are in the JSON), and each
case first sends ``--warmup`` requests it does not measure.

Besides requests/s and latency it reads the node's ``_nodes/stats`` before and
after each case: what OpenSearch did per operation (documents indexed, real-time
gets, searches, shard refreshes), and the node's and this server's CPU per
operation.  With the bridge on, a create case lasts until every message it wrote
is searchable (``/_health``'s outbox backlog at 0), so its CPU includes the
embedding and indexing, and ``found/s`` is the rate of messages made searchable
(elsewhere a message is searchable when it is acknowledged).
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from _plots import plot_opensearch, write_report  # noqa: E402
from bench_scaleout import cpu_seconds, process_tree  # noqa: E402

from tests.support.live import LiveServer  # noqa: E402

MEMORY = "/_plugins/_ml/memory"
#: The longest a case waits for the bridge to make its messages searchable (1,000 take about 10 s).
SEARCHABLE_SECONDS = 600.0
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


@dataclass
class Sent:
    latencies: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)


async def send(url: str, headers: dict[str, str], memories: list[str], op: str, count: int, concurrency: int) -> Sent:
    """``count`` calls at ``concurrency`` into ``memories``: each one's latency and status."""
    sent = Sent()
    queue = iter(range(count))

    def request(n: int) -> tuple[str, str, Any]:
        memory = memories[n % len(memories)]
        if op == "create":
            return "POST", f"{url}{MEMORY}/{memory}/messages", {"input": f"question {n}", "response": f"answer {n}"}
        return "GET", f"{url}{MEMORY}/{memory}/messages?max_results=10", None

    async def client(http: aiohttp.ClientSession) -> None:
        for n in queue:
            method, address, body = request(n)
            started = time.perf_counter()
            async with http.request(method, address, json=body) as response:
                await response.read()
                sent.statuses[response.status] = sent.statuses.get(response.status, 0) + 1
            sent.latencies.append(time.perf_counter() - started)

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(headers=headers, connector=connector) as http:
        await asyncio.gather(*(client(http) for _ in range(concurrency)))
    return sent


async def searchable(server: LiveServer) -> float:
    """Wait until ``server``'s bridge has indexed every message written so far; the moment it had, on
    ``time.perf_counter``.  The backlog a process
    reports is what it last read (after a drain, or its poll each second), so the answer is the start of a
    run of zeros that lasted over a second.  A bridge that never catches up (a failing region) is an error
    after ``SEARCHABLE_SECONDS``, not a run that never ends."""
    zero_since = None
    deadline = time.perf_counter() + SEARCHABLE_SECONDS
    async with aiohttp.ClientSession() as http:
        while time.perf_counter() < deadline:
            async with http.get(f"{server.url}/_health") as response:
                backlog = (await response.json())["backlog"].get("outbox", {}).get("backlog", 0)
            now = time.perf_counter()
            if backlog:
                zero_since = None
            elif zero_since is None:
                zero_since = now
            elif now - zero_since > 1.2:
                return zero_since
            await asyncio.sleep(0.05)
    raise TimeoutError(f"{server.url}: messages still waiting for the bridge after {SEARCHABLE_SECONDS} s")


async def drive(
    target: str,
    url: str,
    headers: dict[str, str],
    memories: list[str],
    op: str,
    args: Any,
    node: Any,
    server: LiveServer | None,
    bridged: bool,
) -> dict[str, Any]:
    """``args.warmup`` calls, not measured, then ``args.requests``, each until its messages are searchable:
    what the node and the server did meanwhile.  A JVM is several times slower before its JIT has compiled
    the paths a case takes, and the first target measured would pay for everyone's warm-up."""
    indexer = server if bridged and op == "create" else None
    await send(url, headers, memories, op, args.warmup, args.concurrency)
    if indexer is not None:
        await searchable(indexer)
    pids = [node.pid] if node.pid else []  # a node not started here: its CPU is not measured
    servers = process_tree(server.process.pid) if server is not None and server.process is not None else []
    async with aiohttp.ClientSession() as admin:
        before, started = await node_counters(admin, node.url), time.perf_counter()
        node_before, server_before = cpu_seconds(pids), cpu_seconds(servers)
        sent = await send(url, headers, memories, op, args.requests, args.concurrency)
        elapsed = time.perf_counter() - started
        # elsewhere a message is searchable when it is acknowledged
        settled = elapsed if indexer is None else await searchable(indexer) - started
        node_cpu, server_cpu = cpu_seconds(pids) - node_before, cpu_seconds(servers) - server_before
        after = await node_counters(admin, node.url)
    ms = np.array(sent.latencies) * 1000
    row: dict[str, Any] = {
        "target": target,
        "op": op,
        "memories": len(memories),
        "requests": args.requests,
        "req_per_s": round(args.requests / elapsed, 1),
        "p50_ms": round(float(np.percentile(ms, 50)), 2),
        "p99_ms": round(float(np.percentile(ms, 99)), 2),
        # until every message is searchable too (the bridge's work is done by then)
        "searchable_req_per_s": round(args.requests / max(settled, elapsed), 1),
        "opensearch_cpu_ms_per_op": round(node_cpu * 1000 / args.requests, 3),
        "server_cpu_ms_per_op": round(server_cpu * 1000 / args.requests, 3),
        "statuses": sent.statuses,
    }
    for name in COUNTERS:  # the four stats calls themselves count nothing here
        row[f"{name}_per_op"] = round((after[name] - before[name]) / args.requests, 3)
    print(format_row(row), flush=True)
    return row


async def cases(
    target: str,
    url: str,
    headers: dict[str, str],
    args: Any,
    node: Any,
    server: LiveServer | None = None,
    bridged: bool = False,
) -> list[dict[str, Any]]:
    one, many = await make_memories(url, headers, 1), await make_memories(url, headers, 32)
    rows = []
    for memories in (one, many):
        for op in ("create", "list"):
            rows.append(await drive(target, url, headers, memories, op, args, node, server, bridged))
    return rows


def write_config(path: Path, url: str, prefix: str) -> Path:
    """Every store on the node: both regions (so memory and agentic memory), and the keys."""
    lines = ['home_region = "USA"', 'log_level = "warning"', "[auth]", 'keys_backend = "opensearch"']
    for name in ("USA", "DEU"):
        lines += [f"[regions.{name}]", 'store = "opensearch"', f'hosts = ["{url}"]', f'index_prefix = "{prefix}"']
    path.write_text("\n".join(lines) + "\n")
    return path


HEADER = (
    f"{'target':<22}{'op':<8}{'mem':>4}{'req/s':>8}{'p50 ms':>9}{'p99 ms':>9}{'found/s':>8}{'os cpu':>8}{'our cpu':>8}"
    f"{'index':>7}{'get':>6}{'search':>7}{'refresh':>8}  statuses"
)


def format_row(row: dict[str, Any]) -> str:
    return (
        f"{row['target']:<22}{row['op']:<8}{row['memories']:>4}{row['req_per_s']:>8}{row['p50_ms']:>9}"
        f"{row['p99_ms']:>9}{row['searchable_req_per_s']:>8}{row['opensearch_cpu_ms_per_op']:>8}"
        f"{row['server_cpu_ms_per_op']:>8}{row['indexed_per_op']:>7}{row['gets_per_op']:>6}"
        f"{row['searches_per_op']:>7}{row['refreshes_per_op']:>8}  {row['statuses']}"
    )


async def every_target(node: Any, workdir: Path, args: Any) -> list[dict[str, Any]]:
    """One round: ml-commons, then this server in each configuration, each with its own indices."""
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
                results += await cases(target, server.url, headers, args, node, server, bridge == "on")
    return results


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=1000, help="per case")
    parser.add_argument("--warmup", type=int, default=300, help="requests per case before it is measured")
    parser.add_argument("--rounds", type=int, default=2, help="every target this many times; the last is reported")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--workers", default="1,2", type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--bridge", default="off,on", type=lambda s: s.split(","))
    parser.add_argument("--quick", action="store_true", help="300 requests per case, 1 worker: a few minutes")
    parser.add_argument("--opensearch-url", help="a node with ml-commons (else one is started)")
    parser.add_argument("--no-ml-commons", action="store_true", help="only this server (a node without ml-commons)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "opensearch.json")
    args = parser.parse_args()
    if args.quick:
        args.requests, args.warmup, args.rounds, args.workers = 300, 100, 1, [1]

    workdir = Path(tempfile.mkdtemp(prefix="bench-opensearch-"))
    with ExitStack() as stack:
        if args.opensearch_url:
            node: Any = type("Node", (), {"url": args.opensearch_url, "pid": None})()
        else:
            from tests.support.opensearch.ml import ml_node

            node = stack.enter_context(ml_node())
        rounds: list[list[dict[str, Any]]] = []
        for round_number in range(1, args.rounds + 1):
            print(f"round {round_number} of {args.rounds}\n{HEADER}", flush=True)
            rounds.append(await every_target(node, workdir, args))
    results = rounds[-1]

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
        "warmup": args.warmup,
        "rounds": args.rounds,
        "load_average": os.getloadavg(),
        "results": results,
        "earlier_rounds": rounds[:-1],
    }
    write_report(args.out, report, plot_opensearch)


if __name__ == "__main__":
    asyncio.run(main())
