"""Create message at concurrency 32 with the bridge on, and how long search lags behind; optionally beside ml-commons.

    python scripts/bench_bridge.py [--requests 3000] [--concurrency 32] [--ml] [--out bench-results/bridge.json]

Starts our server (bridge on: every interaction becomes a searchable record
through the outbox) and drives ``POST /_plugins/_ml/memory/{id}/messages``
with one aiohttp client.  When the load ends, it polls search for the last
acknowledged interaction (the outbox drains oldest first) and ``/_health``
for the backlog, and reports the seconds until each is done, then checks
that a sample of the acknowledged interactions is searchable.  ``--ml``
runs the same load against a real OpenSearch 2.19.1 node with ml-commons
(it has no search over interactions, so it has no lag to report).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
from tqdm import tqdm

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from _plots import plot_bridge, png_beside  # noqa: E402

from memory_plugin.auth import KeyStore  # noqa: E402
from tests.support.live import LiveServer  # noqa: E402

MEMORY = "/_plugins/_ml/memory"
HISTORIES = "/v2/ai/conversation_histories"


async def load(url: str, headers: dict[str, str], requests: int, concurrency: int, desc: str) -> dict[str, Any]:
    """``requests`` creates at ``concurrency`` into one memory; the last acknowledged id and the latencies."""
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(url, headers=headers, connector=connector) as http:
        async with http.post(MEMORY, json={"name": "bench"}) as response:
            assert response.status == 200, await response.text()
            memory_id = (await response.json())["memory_id"]
        latencies: list[float] = []
        statuses: dict[int, int] = {}
        acknowledged: list[str] = []
        queue = iter(range(requests))
        with tqdm(total=requests, unit="req", desc=desc) as bar:

            async def worker() -> None:
                for n in queue:
                    body = {
                        "input": f"question {n} about the invoice",
                        "response": f"answer {n}: a refund is on its way",
                    }
                    started = time.perf_counter()
                    async with http.post(f"{MEMORY}/{memory_id}/messages", json=body) as response:
                        payload = await response.json()
                        statuses[response.status] = statuses.get(response.status, 0) + 1
                    latencies.append(time.perf_counter() - started)
                    if response.status == 200:
                        acknowledged.append(payload["message_id"])
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
        "acknowledged": acknowledged,
    }


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


async def ours(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="bench-bridge-"))
    _, token = KeyStore(workdir / "data" / "keys.json").create("bench-org", "bench-user")
    headers = {"Authorization": f"Bearer {token}"}
    from embedder import ensure_default_model

    env = {
        "MEMORY_PLUGIN_BRIDGE": "true",
        "MEMORY_PLUGIN_LOG_LEVEL": args.log_level,
        "MEMORY_PLUGIN_MODEL_DIR": str(ensure_default_model()),  # named: no hashing of the model at start
    }
    with LiveServer(workdir / "data", env=env) as server:
        warm = await load(server.url, headers, 1, 1, "warm-up")  # loads the model's first batch
        await catch_up(server.url, headers, warm["acknowledged"], args.timeout)
        result = await load(server.url, headers, args.requests, args.concurrency, "ours, bridge on")
        result.update(await catch_up(server.url, headers, result["acknowledged"], args.timeout))
    return {"system": "memory-plugin (bridge on)", **result}


async def ml_commons(args: argparse.Namespace) -> dict[str, Any]:
    from tests.support.opensearch.ml import ml_node

    with ml_node() as node:
        await load(node.url, {}, 50, 4, "ml-commons warm-up")
        result = await load(node.url, {}, args.requests, args.concurrency, "ml-commons 2.19.1")
    return {"system": "ml-commons 2.19.1 node", **result, "last_searchable_after_s": None}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--ml", action="store_true", help="also run the load against a real ml-commons node")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for search to catch up")
    parser.add_argument("--log-level", default="info", help="our server's log level (info logs every request)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "bridge.json")
    args = parser.parse_args()

    results = [await ours(args)]
    if args.ml:
        results.append(await ml_commons(args))
    print(
        f"\n{'system':<28}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'backlog':>9}{'last searchable s':>19}{'drained s':>11}"
    )
    for row in results:
        print(
            f"{row['system']:<28}{row['req_per_s']:>9}{row['p50_ms']:>9}{row['p99_ms']:>9}"
            f"{row.get('backlog_at_end', '-')!s:>9}{row.get('last_searchable_after_s') or '-'!s:>19}"
            f"{row.get('backlog_drained_after_s') or '-'!s:>11}"
        )
    for row in results:
        if "sample_checked" in row:
            print(f"{row['system']}: {row['sample_not_searchable']} of {row['sample_checked']} sampled not searchable")
        del row["acknowledged"]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {"requests": args.requests, "concurrency": args.concurrency, "results": results}
    args.out.write_text(json.dumps(report, indent=2))
    print(f"\nwrote {args.out} and {plot_bridge(report, png_beside(args.out))}")


if __name__ == "__main__":
    asyncio.run(main())
