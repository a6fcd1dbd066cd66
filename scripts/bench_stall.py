"""Does a long ``_search`` stall the server?  ``GET /_health`` latency while wildcard searches run.

    python scripts/bench_stall.py [--memories 5000] [--searchers 2] [--probes 600] [--source DIR]
                                  [--out bench-results/stall.json]

Starts the server as a subprocess on loopback, loads one user with
``--memories`` memories named 30 x ``a``, then probes
``GET /_health`` every 10 ms twice: idle, and while ``--searchers`` clients run
``{"wildcard": {"name": "*a*a*a*a*a*a*a*a*a*a*a*a*b"}}`` back to back (the
pattern that makes a backtracking matcher explore ~C(30, 12) paths per name).
Prints p50/p99/max of each, writes JSON and a PNG beside it (``scripts/_plots.py``).  ``--source``
runs the server from another checkout (e.g. ``git archive main | tar -x -C
/tmp/old``) to compare with an older build.
"""

from __future__ import annotations

import argparse
import asyncio
import os
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

from _plots import plot_stall, write_report  # noqa: E402

from memory_plugin.auth import KeyStore  # noqa: E402
from tests.support.live import LiveServer  # noqa: E402

MEMORY = "/_plugins/_ml/memory"
PATTERN = "*a" * 12 + "*b"
PROBE_EVERY = 0.010


async def load(http: aiohttp.ClientSession, memories: int, concurrency: int = 32) -> None:
    queue = iter(range(memories))
    with tqdm(total=memories, desc="memories", unit="mem") as bar:

        async def worker() -> None:
            for _ in queue:
                async with http.post(MEMORY, json={"name": "a" * 30}) as response:
                    assert response.status == 200, await response.text()
                bar.update()

        await asyncio.gather(*(worker() for _ in range(concurrency)))


async def probe(http: aiohttp.ClientSession, probes: int, label: str, limit: float) -> list[float]:
    """``probes`` health checks, one every 10 ms, for at most ``limit`` seconds; their latencies in ms."""
    latencies: list[float] = []
    ends = time.monotonic() + limit
    for _ in tqdm(range(probes), desc=f"health ({label})", unit="req"):
        if time.monotonic() > ends:
            break
        started = time.perf_counter()
        async with http.get("/_health") as response:
            await response.read()
            assert response.status == 200
        latencies.append((time.perf_counter() - started) * 1000)
        await asyncio.sleep(max(0.0, PROBE_EVERY - latencies[-1] / 1000))
    return latencies


async def search_loop(http: aiohttp.ClientSession, stop: asyncio.Event, out: list[dict[str, Any]]) -> None:
    body = {"query": {"wildcard": {"name": PATTERN}}, "size": 10}
    while not stop.is_set():
        started = time.perf_counter()
        async with http.post(f"{MEMORY}/_search", json=body) as response:
            result = await response.json()
        out.append(
            {
                "ms": (time.perf_counter() - started) * 1000,
                "status": response.status,
                "timed_out": bool(result.get("timed_out")) if isinstance(result, dict) else None,
            }
        )


def summary(latencies: list[float]) -> dict[str, float]:
    ms = np.array(latencies)
    return {
        "count": len(ms),
        "p50_ms": round(float(np.percentile(ms, 50)), 2),
        "p99_ms": round(float(np.percentile(ms, 99)), 2),
        "max_ms": round(float(ms.max()), 2),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=5000)
    parser.add_argument("--searchers", type=int, default=2)
    parser.add_argument("--probes", type=int, default=600)
    parser.add_argument("--limit", type=float, default=60.0, help="seconds at most per probing phase")
    parser.add_argument("--source", type=Path, help="run the server from this checkout instead")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "stall.json")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="bench-stall-"))
    _, token = KeyStore(workdir / "data" / "keys.json").create("bench-org", "bench-user")
    env = {"MEMORY_PLUGIN_LOG_LEVEL": "warning"}
    if args.source is not None:
        # ``python -m`` puts the working folder first on sys.path: serve from there.
        env["PYTHONPATH"] = os.pathsep.join([str(args.source.resolve()), os.environ.get("PYTHONPATH", "")])
        os.chdir(args.source)
    searches: list[dict[str, Any]] = []
    with LiveServer(workdir / "data", env=env) as server:
        async with aiohttp.ClientSession(server.url, headers={"Authorization": f"Bearer {token}"}) as http:
            await load(http, args.memories)
            idle = await probe(http, args.probes, "idle", args.limit)
            stop = asyncio.Event()
            searchers = [asyncio.create_task(search_loop(http, stop, searches)) for _ in range(args.searchers)]
            await asyncio.sleep(0.2)  # the searches are under way
            loaded = await probe(http, args.probes, "during searches", args.limit)
            stop.set()
            for searcher in searchers:  # a stalled server may never answer the last ones
                searcher.cancel()
            await asyncio.gather(*searchers, return_exceptions=True)

    search_ms = [s["ms"] for s in searches] or [float("nan")]
    result = {
        "source": str(args.source) if args.source else "this checkout",
        "memories": args.memories,
        "searchers": args.searchers,
        "pattern": PATTERN,
        "health_idle": summary(idle),
        "health_during_searches": summary(loaded),
        "health_idle_ms": [round(ms, 3) for ms in idle],
        "health_during_searches_ms": [round(ms, 3) for ms in loaded],
        "searches": {
            **summary(search_ms),
            "statuses": sorted({s["status"] for s in searches}),
            "timed_out": sum(1 for s in searches if s["timed_out"]),
        },
    }
    print(f"\n{'GET /_health':<26}{'probes':>8}{'p50 ms':>10}{'p99 ms':>10}{'max ms':>10}")
    for name in ("health_idle", "health_during_searches"):
        row = result[name]
        print(f"{name:<26}{row['count']:>8}{row['p50_ms']:>10}{row['p99_ms']:>10}{row['max_ms']:>10}")
    row = result["searches"]
    print(
        f"\nwildcard searches over {args.memories} memories: {row['count']} done, p50 {row['p50_ms']} ms, "
        f"p99 {row['p99_ms']} ms, statuses {row['statuses']}, timed_out {row['timed_out']}"
    )
    write_report(args.out, result, plot_stall)


if __name__ == "__main__":
    asyncio.run(main())
