"""Create and list messages at concurrency 32: a real ml-commons node, ours with the bridge off, ours with it on.

    python scripts/bench_bridge.py [--requests 2000] [--concurrency 32] [--organisations 1] [--no-ml]
                                   [--out bench-results/bridge.json]

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

With ``--organisations N`` the requests go round-robin to N organisations
(each its own key and memory; on the ml-commons node, which has no
organisations, N memories), so the outbox drains a multi-tenant burst; the
catch-up is then measured per organisation and reported as its range.
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


async def new_memory(http: aiohttp.ClientSession, headers: dict[str, str]) -> str:
    async with http.post(MEMORY, json={"name": "bench"}, headers=headers) as response:
        assert response.status == 200, await response.text()
        return str((await response.json())["memory_id"])


class Tenants:
    """Request n goes to tenant ``n % len``: its own credential and memory."""

    def __init__(self, headers: list[dict[str, str]], memory_ids: list[str]) -> None:
        self.headers, self.memory_ids = headers, memory_ids

    @classmethod
    async def create(cls, http: aiohttp.ClientSession, headers: list[dict[str, str]]) -> Tenants:
        return cls(headers, [await new_memory(http, h) for h in headers])

    def of(self, n: int) -> tuple[int, dict[str, str], str]:
        tenant = n % len(self.headers)
        return tenant, self.headers[tenant], self.memory_ids[tenant]


def creator(tenants: Tenants) -> Call:
    async def create(http: aiohttp.ClientSession, n: int) -> tuple[int, Any]:
        tenant, headers, memory_id = tenants.of(n)
        body = {"input": f"question {n} about the invoice", "response": f"answer {n}: a refund is on its way"}
        async with http.post(f"{MEMORY}/{memory_id}/messages", json=body, headers=headers) as response:
            return response.status, (tenant, (await response.json()).get("message_id"))

    return create


def lister(tenants: Tenants) -> Call:
    async def list_messages(http: aiohttp.ClientSession, n: int) -> tuple[int, Any]:
        _, headers, memory_id = tenants.of(n)
        async with http.get(f"{MEMORY}/{memory_id}/messages", headers=headers) as response:
            return response.status, len((await response.json()).get("messages", []))

    return list_messages


async def measure(
    system: str, url: str, headers: list[dict[str, str]], args: argparse.Namespace, bridge: bool
) -> list[dict[str, Any]]:
    """One system's two rows: create messages into each tenant's memory, then list those memories' messages."""
    connector = aiohttp.TCPConnector(limit=args.concurrency)
    async with aiohttp.ClientSession(url, connector=connector) as http:
        warm_tenants = await Tenants.create(http, headers)
        warm = await drive(http, 50, 4, f"{system}: warm-up", creator(warm_tenants))
        await drive(http, 50, 4, f"{system}: warm-up", lister(warm_tenants))
        if bridge:  # the model's first batches are loaded before the measurement
            await catch_up(url, headers, warm["returned"], args.timeout)
        tenants = await Tenants.create(http, headers)
        created = await drive(http, args.requests, args.concurrency, f"{system}: create", creator(tenants))
        if bridge:
            created.update(await catch_up(url, headers, created["returned"], args.timeout))
        listed = await drive(http, args.requests, args.concurrency, f"{system}: list", lister(tenants))
    assert all(n == 10 for n in listed["returned"]), "a list page did not hold 10 messages"
    tenancy = {"organisations": len(headers)}
    return [
        {"system": system, "operation": "create message", **tenancy, **created},
        {"system": system, "operation": "list messages", **tenancy, **listed},
    ]


async def searchable(http: aiohttp.ClientSession, headers: dict[str, str], message_id: str) -> bool:
    params = {"q": "refund", "record_type": "ai_pipeline_storage", "filter[record_id]": message_id}
    async with http.get(HISTORIES, params=params, headers=headers) as response:
        return response.status == 200 and bool((await response.json())["data"])


async def backlog(http: aiohttp.ClientSession, headers: dict[str, str]) -> int:
    async with http.get("/_health", headers=headers) as response:
        return int((await response.json())["details"]["bridge"]["backlog"])


async def catch_up(
    url: str, headers: list[dict[str, str]], acknowledged: list[tuple[int, str]], timeout: float
) -> dict[str, Any]:
    """Seconds from now until each tenant's last acknowledged interaction is searchable, and until the backlog is 0."""
    ended = time.perf_counter()
    last = {tenant: message_id for tenant, message_id in acknowledged}  # each tenant's last acknowledged
    waiting = dict(last)
    searchable_after: dict[int, float] = {}
    # A poll that takes long (a saturated machine) is a "not yet", never the end of the measurement.
    async with aiohttp.ClientSession(url, timeout=aiohttp.ClientTimeout(total=600)) as http:
        backlog_at_end = await backlog(http, headers[0])
        drained = None
        while time.perf_counter() - ended < timeout and (waiting or drained is None):
            for tenant, message_id in list(waiting.items()):
                if await searchable(http, headers[tenant], message_id):
                    searchable_after[tenant] = time.perf_counter() - ended
                    del waiting[tenant]
            if drained is None and await backlog(http, headers[0]) == 0:
                drained = time.perf_counter() - ended
            await asyncio.sleep(0.05)
        sample = random.Random(0).sample(acknowledged, min(200, len(acknowledged)))
        missing = [m for tenant, m in sample if not await searchable(http, headers[tenant], m)]
    done = sorted(searchable_after.values())
    return {
        "backlog_at_end": backlog_at_end,
        # the slowest organisation's last interaction (None: one never became searchable in time)
        "last_searchable_after_s": round(done[-1], 2) if done and not waiting else None,
        "first_organisation_caught_up_s": round(done[0], 2) if done else None,
        "backlog_drained_after_s": None if drained is None else round(drained, 2),
        "sample_checked": len(sample),
        "sample_not_searchable": len(missing),
    }


async def ours(args: argparse.Namespace, bridge: bool) -> list[dict[str, Any]]:
    workdir = Path(tempfile.mkdtemp(prefix="bench-bridge-"))
    keys = KeyStore(workdir / "data" / "keys.json")
    tokens = [keys.create(f"bench-org-{n}", "bench-user")[1] for n in range(args.organisations)]
    from embedder import ensure_default_model

    env = {
        "MEMORY_PLUGIN_BRIDGE_ENABLED": "true" if bridge else "false",
        "MEMORY_PLUGIN_LOG_LEVEL": args.log_level,
        "MEMORY_PLUGIN_MODEL_DIR": str(ensure_default_model()),  # named: no hashing of the model at start
    }
    system = f"ours, bridge {'on' if bridge else 'off'}"
    with LiveServer(workdir / "data", env=env) as server:
        return await measure(system, server.url, [{"Authorization": f"Bearer {t}"} for t in tokens], args, bridge)


async def ml_commons(args: argparse.Namespace) -> list[dict[str, Any]]:
    from tests.support.opensearch.ml import ml_node

    with ml_node() as node:
        return await measure("ml-commons 2.19.1 node", node.url, [{}] * args.organisations, args, bridge=False)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--organisations", type=int, default=1, help="spread the requests over this many")
    parser.add_argument("--no-ml", action="store_true", help="leave out the real ml-commons node")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for search to catch up")
    parser.add_argument("--log-level", default="info", help="our server's log level (info logs every request)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "bridge.json")
    args = parser.parse_args()
    if args.requests < 10 * args.organisations:
        parser.error("each organisation's memory needs at least 10 messages for a full list page")

    results = [] if args.no_ml else await ml_commons(args)
    results += await ours(args, bridge=False)
    results += await ours(args, bridge=True)
    print(f"\n{args.requests} requests per row at concurrency {args.concurrency}, {args.organisations} organisation(s)")
    print(
        f"\n{'system':<24}{'operation':<16}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}"
        f"{'backlog':>9}{'first org s':>13}{'last searchable s':>19}{'drained s':>11}  statuses"
    )
    for row in results:
        print(
            f"{row['system']:<24}{row['operation']:<16}{row['req_per_s']:>9}{row['p50_ms']:>9}{row['p99_ms']:>9}"
            f"{row.get('backlog_at_end', '-')!s:>9}{row.get('first_organisation_caught_up_s') or '-'!s:>13}"
            f"{row.get('last_searchable_after_s') or '-'!s:>19}"
            f"{row.get('backlog_drained_after_s') or '-'!s:>11}  {row['statuses']}"
        )
    for row in results:
        if "sample_checked" in row:
            print(f"{row['system']}: {row['sample_not_searchable']} of {row['sample_checked']} sampled not searchable")
        del row["returned"]
    report = {
        "requests": args.requests,
        "concurrency": args.concurrency,
        "organisations": args.organisations,
        "results": results,
    }
    write_report(args.out, report, plot_bridge)


if __name__ == "__main__":
    asyncio.run(main())
