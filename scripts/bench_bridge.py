"""Create and list messages at concurrency 32: a real ml-commons node, ours with the bridge off, ours with it on.

    python scripts/bench_bridge.py [--requests 2000] [--concurrency 32] [--no-ml] [--out bench-results/bridge.json]

Drives ``POST /_plugins/_ml/memory/{id}/messages`` and then ``GET
/_plugins/_ml/memory/{id}/messages`` (the first page, 10 messages, of a memory
holding every message just created) with one aiohttp client, against each
system in turn, in one run: a real OpenSearch 2.19.1 node with ml-commons,
our server with the memory bridge off, and with it on (every interaction
becomes a searchable record through the outbox).  With the bridge on, when the
create load ends it polls search for the last acknowledged interaction (the
outbox drains oldest first) and ``/_health`` for the backlog, reports the
seconds until each is done, and checks that a sample of the acknowledged
interactions is searchable, before the list load starts.  ml-commons has no
search over interactions, so it has no lag to report.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
from tqdm import tqdm

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from _plots import plot_bridge, write_report  # noqa: E402

from memory_plugin.auth import KeyStore  # noqa: E402
from tests.support.live import LiveServer  # noqa: E402

MEMORY = "/_plugins/_ml/memory"
HISTORIES = "/v2/ai/conversation_histories"


Call = Callable[[aiohttp.ClientSession, int], Awaitable[tuple[int, Any]]]


async def drive(http: aiohttp.ClientSession, requests: int, concurrency: int, desc: str, call: Call) -> dict[str, Any]:
    """``requests`` calls at ``concurrency``: req/s, p50, p99, statuses, and the bodies of the 200s in order."""
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    returned: list[Any] = []
    queue = iter(range(requests))
    with tqdm(total=requests, unit="req", desc=desc) as bar:

        async def worker() -> None:
            for n in queue:
                started = time.perf_counter()
                status, payload = await call(http, n)
                latencies.append(time.perf_counter() - started)
                statuses[status] = statuses.get(status, 0) + 1
                if status == 200:
                    returned.append(payload)
                bar.update()

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    ms = np.array(latencies) * 1000
    return {
        "requests": requests,
        "req_per_s": round(requests / elapsed, 1),
        "p50_ms": round(float(np.percentile(ms, 50)), 2),
        "p99_ms": round(float(np.percentile(ms, 99)), 2),
        "statuses": statuses,
        "returned": returned,
    }


async def new_memory(http: aiohttp.ClientSession) -> str:
    async with http.post(MEMORY, json={"name": "bench"}) as response:
        assert response.status == 200, await response.text()
        return str((await response.json())["memory_id"])


def creator(memory_id: str) -> Call:
    async def create(http: aiohttp.ClientSession, n: int) -> tuple[int, Any]:
        body = {"input": f"question {n} about the invoice", "response": f"answer {n}: a refund is on its way"}
        async with http.post(f"{MEMORY}/{memory_id}/messages", json=body) as response:
            return response.status, (await response.json()).get("message_id")

    return create


def lister(memory_id: str) -> Call:
    async def list_messages(http: aiohttp.ClientSession, n: int) -> tuple[int, Any]:
        async with http.get(f"{MEMORY}/{memory_id}/messages") as response:
            return response.status, len((await response.json()).get("messages", []))

    return list_messages


async def measure(
    system: str, url: str, headers: dict[str, str], args: argparse.Namespace, bridge: bool
) -> list[dict[str, Any]]:
    """One system's two rows: create messages into one memory, then list that memory's messages."""
    connector = aiohttp.TCPConnector(limit=args.concurrency)
    async with aiohttp.ClientSession(url, headers=headers, connector=connector) as http:
        warm_memory = await new_memory(http)
        warm = await drive(http, 50, 4, f"{system}: warm-up", creator(warm_memory))
        await drive(http, 50, 4, f"{system}: warm-up", lister(warm_memory))
        if bridge:  # the model's first batches are loaded before the measurement
            await catch_up(url, headers, warm["returned"], args.timeout)
        memory_id = await new_memory(http)
        created = await drive(http, args.requests, args.concurrency, f"{system}: create", creator(memory_id))
        if bridge:
            created.update(await catch_up(url, headers, created["returned"], args.timeout))
        listed = await drive(http, args.requests, args.concurrency, f"{system}: list", lister(memory_id))
    assert all(n == 10 for n in listed["returned"]), "a list page did not hold 10 messages"
    return [
        {"system": system, "operation": "create message", **created},
        {"system": system, "operation": "list messages", **listed},
    ]


async def searchable(http: aiohttp.ClientSession, message_id: str) -> bool:
    params = {"q": "refund", "record_type": "ai_pipeline_storage", "filter[record_id]": message_id}
    async with http.get(HISTORIES, params=params) as response:
        return response.status == 200 and bool((await response.json())["data"])


async def backlog(http: aiohttp.ClientSession) -> int:
    async with http.get("/_health") as response:
        return int((await response.json())["details"]["bridge"]["backlog"])


async def catch_up(url: str, headers: dict[str, str], acknowledged: list[str], timeout: float) -> dict[str, Any]:
    """Seconds from now until the last acknowledged interaction is searchable, and until the backlog is 0."""
    ended = time.perf_counter()
    # A poll that takes long (a saturated machine) is a "not yet", never the end of the measurement.
    async with aiohttp.ClientSession(url, headers=headers, timeout=aiohttp.ClientTimeout(total=600)) as http:
        backlog_at_end = await backlog(http)
        last_searchable = drained = None
        while time.perf_counter() - ended < timeout and (last_searchable is None or drained is None):
            if last_searchable is None and await searchable(http, acknowledged[-1]):
                last_searchable = time.perf_counter() - ended
            if drained is None and await backlog(http) == 0:
                drained = time.perf_counter() - ended
            await asyncio.sleep(0.05)
        sample = random.Random(0).sample(acknowledged, min(200, len(acknowledged)))
        missing = [m for m in sample if not await searchable(http, m)]
    return {
        "backlog_at_end": backlog_at_end,
        "last_searchable_after_s": None if last_searchable is None else round(last_searchable, 2),
        "backlog_drained_after_s": None if drained is None else round(drained, 2),
        "sample_checked": len(sample),
        "sample_not_searchable": len(missing),
    }


async def ours(args: argparse.Namespace, bridge: bool) -> list[dict[str, Any]]:
    workdir = Path(tempfile.mkdtemp(prefix="bench-bridge-"))
    _, token = KeyStore(workdir / "data" / "keys.json").create("bench-org", "bench-user")
    from embedder import ensure_default_model

    env = {
        "MEMORY_PLUGIN_BRIDGE": "true" if bridge else "false",
        "MEMORY_PLUGIN_LOG_LEVEL": args.log_level,
        "MEMORY_PLUGIN_MODEL_DIR": str(ensure_default_model()),  # named: no hashing of the model at start
    }
    system = f"ours, bridge {'on' if bridge else 'off'}"
    with LiveServer(workdir / "data", env=env) as server:
        return await measure(system, server.url, {"Authorization": f"Bearer {token}"}, args, bridge)


async def ml_commons(args: argparse.Namespace) -> list[dict[str, Any]]:
    from tests.support.opensearch.ml import ml_node

    with ml_node() as node:
        return await measure("ml-commons 2.19.1 node", node.url, {}, args, bridge=False)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--no-ml", action="store_true", help="leave out the real ml-commons node")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for search to catch up")
    parser.add_argument("--log-level", default="info", help="our server's log level (info logs every request)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "bridge.json")
    args = parser.parse_args()

    results = [] if args.no_ml else await ml_commons(args)
    results += await ours(args, bridge=False)
    results += await ours(args, bridge=True)
    print(f"\n{args.requests} requests per row at concurrency {args.concurrency}")
    print(
        f"\n{'system':<24}{'operation':<16}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}"
        f"{'backlog':>9}{'last searchable s':>19}{'drained s':>11}  statuses"
    )
    for row in results:
        print(
            f"{row['system']:<24}{row['operation']:<16}{row['req_per_s']:>9}{row['p50_ms']:>9}{row['p99_ms']:>9}"
            f"{row.get('backlog_at_end', '-')!s:>9}{row.get('last_searchable_after_s') or '-'!s:>19}"
            f"{row.get('backlog_drained_after_s') or '-'!s:>11}  {row['statuses']}"
        )
    for row in results:
        if "sample_checked" in row:
            print(f"{row['system']}: {row['sample_not_searchable']} of {row['sample_checked']} sampled not searchable")
        del row["returned"]
    report = {"requests": args.requests, "concurrency": args.concurrency, "results": results}
    write_report(args.out, report, plot_bridge)


if __name__ == "__main__":
    asyncio.run(main())
