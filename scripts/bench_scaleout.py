"""Scale-out: the same load on 1 and on 2 server processes, every store on the same real OpenSearch nodes.

    python scripts/bench_scaleout.py [--requests 2000] [--concurrency 16] [--workers 1,2] [--records 300]
        [--opensearch-url URL ...] [--out bench-results/scaleout.json]

Every store (two regions, memory, agentic memory, keys) is on OpenSearch: two
single-node clusters started here (USA, the home region, and DEU), or the ones
named by ``--opensearch-url``.  For each worker count the server runs as
``memory-plugin serve --workers N`` on one port, and the same aiohttp client
sends, at ``--concurrency``:

- ``create message``: ``POST /_plugins/_ml/memory/conversation/{id}`` (a write, refreshed);
- ``list messages``: the newest ten of that conversation;
- ``history search``: ``GET /v2/ai/conversation_histories`` over ``--records`` records in
  both regions, with 200 distinct questions (so most queries hit the query-vector cache
  after the first pass, as a service's repeated questions do).

Besides requests/s and latency it reads each process's CPU time from ``/proc``:
the servers' (parent and workers), the OpenSearch nodes' and this client's, per
request.  Their shares of the machine (``cores x seconds``) say where the
bottleneck sits.  Prints a table, writes JSON and a chart beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
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
from tqdm import tqdm

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from _plots import plot_scaleout, write_report  # noqa: E402

from tests.support.live import LiveServer  # noqa: E402

CONVERSATIONS = "/_plugins/_ml/memory/conversation"
HISTORIES = "/v2/ai/conversation_histories"
TOPICS = ["billing error", "router outage", "refund request", "password reset", "roaming charges", "slow internet"]


def process_tree(pid: int) -> list[int]:
    """``pid`` and every descendant (Linux ``/proc``): a pre-forking server's parent and workers."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                queue += [int(child) for child in (task / "children").read_text().split()]
            except OSError:
                continue
    return found


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time so far of ``pids`` (one that has gone counts nothing)."""
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def write_config(path: Path, urls: list[str], prefix: str, keys_backend: str) -> Path:
    regions = dict(zip(("USA", "DEU"), urls if len(urls) > 1 else urls * 2))
    lines = ['home_region = "USA"', 'log_level = "warning"', "[auth]", f'keys_backend = "{keys_backend}"']
    lines += ["[bridge]", "enabled = false"]
    for name, url in regions.items():
        lines += [f"[regions.{name}]", 'store = "opensearch"', f'hosts = ["{url}"]', f'index_prefix = "{prefix}"']
    path.write_text("\n".join(lines) + "\n")
    return path


async def drive(case: str, url_of: Any, method: str, body: Any, headers: dict[str, str], args: Any, pids, bar) -> dict:
    """``args.requests`` calls at ``args.concurrency``; the CPU each party spent meanwhile."""
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    queue = iter(range(args.requests))
    connector = aiohttp.TCPConnector(limit=args.concurrency)
    async with aiohttp.ClientSession(headers=headers, connector=connector) as http:

        async def client() -> None:
            for n in queue:
                started = time.perf_counter()
                async with http.request(method, url_of(n), json=body(n) if body else None) as response:
                    await response.read()
                    statuses[response.status] = statuses.get(response.status, 0) + 1
                latencies.append(time.perf_counter() - started)
                bar.update()

        servers, nodes = process_tree(pids["server"]), pids["opensearch"]
        before = (cpu_seconds(servers), cpu_seconds(nodes), own_cpu_seconds(), time.perf_counter())
        await asyncio.gather(*(client() for _ in range(args.concurrency)))
        after = (cpu_seconds(servers), cpu_seconds(nodes), own_cpu_seconds(), time.perf_counter())
    server_cpu, node_cpu, client_cpu, elapsed = (b - a for a, b in zip(before, after))
    ms = np.array(latencies) * 1000
    cores = os.cpu_count() or 1
    return {
        "case": case,
        "requests": args.requests,
        "concurrency": args.concurrency,
        "req_per_s": round(args.requests / elapsed, 1),
        "p50_ms": round(float(np.percentile(ms, 50)), 2),
        "p99_ms": round(float(np.percentile(ms, 99)), 2),
        "server_cpu_ms_per_request": round(server_cpu * 1000 / args.requests, 3),
        "opensearch_cpu_ms_per_request": round(node_cpu * 1000 / args.requests, 3),
        "client_cpu_ms_per_request": round(client_cpu * 1000 / args.requests, 3),
        # Of the machine's cores x seconds, the share each party used: the largest is the bottleneck.
        "machine_share": {
            "server": round(server_cpu / (cores * elapsed), 3),
            "opensearch": round(node_cpu / (cores * elapsed), 3),
            "client": round(client_cpu / (cores * elapsed), 3),
        },
        "statuses": statuses,
    }


async def prepare(url: str, headers: dict[str, str], records: int) -> str:
    """A conversation with 100 messages, and ``records`` history records across both regions; the conversation."""
    async with aiohttp.ClientSession(url, headers=headers) as http:
        async with http.post(CONVERSATIONS, json={"name": "bench"}) as response:
            assert response.status == 200, await response.text()
            conversation = (await response.json())["conversation_id"]
        for n in range(100):
            body = {"input": f"question {n}", "response": f"answer {n}"}
            async with http.post(f"{CONVERSATIONS}/{conversation}", json=body) as response:
                assert response.status == 200, await response.text()
        for start in range(0, records, 50):
            batch = [
                {
                    "record_id": f"r{n}",
                    "record_type": "voice",
                    "region": ("USA", "DEU")[n % 2],
                    "text": f"Customer call {n} about {TOPICS[n % len(TOPICS)]}, case {n * 7919 % 1000}",
                    "metadata": {"language": "en" if n % 3 else "de"},
                }
                for n in range(start, min(records, start + 50))
            ]
            async with http.post(HISTORIES, json={"records": batch}) as response:
                assert response.status == 201, await response.text()
    return conversation


async def run_workers(workers: int, config: Path, workdir: Path, headers: dict, args: Any, nodes: list[int], bar):
    server = LiveServer(workdir / f"data-{workers}", config=config, args=["--workers", str(workers)])
    with server:
        assert server.process is not None
        conversation = await prepare(server.url, headers, args.records)
        pids = {"server": server.process.pid, "opensearch": nodes}
        message = f"{server.url}{CONVERSATIONS}/{conversation}"
        interaction = lambda n: {"input": f"question {n} about billing", "response": f"answer {n}"}  # noqa: E731

        def question(n: int) -> str:
            topic = TOPICS[n % len(TOPICS)].replace(" ", "+")
            return f"{server.url}{HISTORIES}?q={topic}+case+{n % 200}&record_type=voice&top_k=10"

        rows = [
            await drive("create message", lambda n: message, "POST", interaction, headers, args, pids, bar),
            await drive("list messages", lambda n: f"{message}?max_results=10", "GET", None, headers, args, pids, bar),
            await drive("history search", question, "GET", None, headers, args, pids, bar),
        ]
    for row in rows:
        row["workers"] = workers
    return rows


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000, help="per case and worker count")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--workers", default="1,2", type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--records", type=int, default=300, help="history records to search")
    parser.add_argument("--opensearch-url", action="append", default=[], help="a node to use (twice: two regions)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "scaleout.json")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="bench-scaleout-"))
    prefix = f"bench-scaleout-{uuid.uuid4().hex[:8]}"
    with ExitStack() as stack:
        urls, node_pids = list(args.opensearch_url), []
        if not urls:
            from tests.support.opensearch import start_nodes

            nodes = stack.enter_context(start_nodes(2))
            urls, node_pids = [node.url for node in nodes], [node.pid for node in nodes if node.pid]
        config = write_config(workdir / "config.toml", urls, prefix, "opensearch")
        created = subprocess.run(
            [sys.executable, "-m", "memory_plugin", "keys", "create", "--config", str(config), "--org", "bench"],
            capture_output=True,
            text=True,
            check=True,
        )
        token = created.stdout.split()[-1]
        headers = {"Authorization": f"Bearer {token}"}
        results: list[dict] = []
        total = args.requests * 3 * len(args.workers)
        with tqdm(total=total, unit="req", desc="bench_scaleout") as bar:
            for workers in args.workers:
                results += await run_workers(workers, config, workdir, headers, args, node_pids, bar)

    by_case = {(row["case"], row["workers"]): row for row in results}
    print(
        f"\n{'case':<16}{'workers':>8}{'req/s':>9}{'vs 1':>7}{'p50 ms':>9}{'p99 ms':>9}"
        f"{'srv cpu ms':>11}{'os cpu ms':>10}{'cli cpu ms':>11}  machine share srv/os/cli"
    )
    for row in results:
        one = by_case.get((row["case"], 1))
        row["ratio_to_1_worker"] = round(row["req_per_s"] / one["req_per_s"], 3) if one else None
        share = row["machine_share"]
        print(
            f"{row['case']:<16}{row['workers']:>8}{row['req_per_s']:>9}{row['ratio_to_1_worker']!s:>7}"
            f"{row['p50_ms']:>9}{row['p99_ms']:>9}{row['server_cpu_ms_per_request']:>11}"
            f"{row['opensearch_cpu_ms_per_request']:>10}{row['client_cpu_ms_per_request']:>11}"
            f"  {share['server']}/{share['opensearch']}/{share['client']}  {row['statuses']}"
        )
    report = {"cores": os.cpu_count(), "concurrency": args.concurrency, "records": args.records, "results": results}
    write_report(args.out, report, plot_scaleout)


if __name__ == "__main__":
    asyncio.run(main())
