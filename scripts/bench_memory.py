"""Memory API throughput by concurrency, beside an aiohttp hello-world in the same run.

    python scripts/bench_memory.py [--requests 3000] [--concurrency 1,8,32] [--repeat 1] [--out bench-results/memory.json]

Starts the servers as subprocesses on loopback, drives each with the same
aiohttp client, and prints req/s and latency percentiles side by side: the
ratio to hello-world is our overhead.  Hello-world runs twice: on asyncio's own
loop, as ``web.run_app`` starts it, and on uvloop, the loop our server runs on,
so that the second ratio compares like with like.  ``--baseline REV`` also
serves the code of git revision REV on a third server, its creates and lists
interleaved with this tree's: a before and after in one run.  List runs twice: as served
(the same page again and again, which the page cache answers), and on a second
server with ``page_cache_mb = 0``, where every request reads SQLite and renders.  ``--repeat N`` runs every case N times,
interleaved, and keeps each case's best run: on a shared machine, the run the
other work disturbed least.  The chart (``memory.png`` beside the
JSON) shows requests/s by concurrency.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import numpy as np
from tqdm import tqdm

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from _plots import plot_memory, write_report  # noqa: E402
from _revisions import archived  # noqa: E402

from memory_plugin.auth import KeyStore  # noqa: E402
from tests.support.live import LiveServer, free_port  # noqa: E402

BASE = "/_plugins/_ml/memory/conversation"


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux ``/proc``): its cost, whatever else the machine runs."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def drive(name, url, method, body, headers, requests, concurrency, bar, pid, url_suffix="") -> dict:
    """``requests`` calls at ``concurrency`` against the server process ``pid``; ``url_suffix`` is rendered with str() per call."""
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    queue = iter(range(requests))
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(headers=headers, connector=connector) as http:

        async def worker() -> None:
            for n in queue:
                started = time.perf_counter()
                payload = body(n) if callable(body) else body
                async with http.request(method, f"{url}{url_suffix}", json=payload) as response:
                    await response.read()
                    statuses[response.status] = statuses.get(response.status, 0) + 1
                latencies.append(time.perf_counter() - started)
                bar.update()

        started, cpu = time.perf_counter(), cpu_seconds(pid)
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed, cpu = time.perf_counter() - started, cpu_seconds(pid) - cpu
    ms = np.array(latencies) * 1000
    return {
        "case": name,
        "requests": requests,
        "concurrency": concurrency,
        "req_per_s": round(requests / elapsed, 1),
        "p50_ms": round(float(np.percentile(ms, 50)), 2),
        "p99_ms": round(float(np.percentile(ms, 99)), 2),
        "server_cpu_ms_per_request": round(cpu * 1000 / requests, 3),
        "statuses": statuses,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument(
        "--concurrency",
        default="1,8,32",
        type=lambda s: [int(x) for x in s.split(",")],
        help="comma-separated client counts",
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs per case, interleaved; the best is kept")
    parser.add_argument("--bridge", action="store_true", help="also index interactions for search")
    parser.add_argument("--log-level", default="info", help="the server's log level (info logs every request)")
    parser.add_argument("--baseline", help="also serve this git revision's code, its cases interleaved with ours")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "memory.json")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    _, token = KeyStore(workdir / "data" / "keys.json").create("bench-org", "bench-user")
    _, uncached_token = KeyStore(workdir / "uncached" / "keys.json").create("bench-org", "bench-user")
    headers = {"Authorization": f"Bearer {token}"}
    uncached_headers = {"Authorization": f"Bearer {uncached_token}"}
    env = {
        "MEMORY_PLUGIN_BRIDGE_ENABLED": "true" if args.bridge else "false",
        "MEMORY_PLUGIN_LOG_LEVEL": args.log_level,
    }
    # The same server with no kept pages: every list reads SQLite and renders its page.
    uncached_env = {**env, "MEMORY_PLUGIN_HTTP_PAGE_CACHE_MB": "0"}
    interaction = lambda n: {"input": f"question {n} about billing", "response": f"answer {n}"}  # noqa: E731
    hello_port, uvloop_port = free_port(), free_port()
    hello_script = str(ROOT / "scripts" / "hello_world.py")
    hello = subprocess.Popen([sys.executable, hello_script, str(hello_port)])
    hello_uvloop = subprocess.Popen([sys.executable, hello_script, str(uvloop_port), "--uvloop"])
    results = []
    with (
        LiveServer(workdir / "data", env=env) as server,
        LiveServer(workdir / "uncached", env=uncached_env) as uncached,
        contextlib.ExitStack() as baseline_stack,
    ):
        assert server.process is not None and uncached.process is not None
        await asyncio.sleep(1.0)  # let hello-world bind too
        async with aiohttp.ClientSession(server.url, headers=headers) as http:
            async with http.post(BASE, json={"name": "bench"}) as response:
                conversation_id = (await response.json())["conversation_id"]
        before = []
        if args.baseline:
            code = baseline_stack.enter_context(archived(args.baseline, "memory_plugin", "embedder"))
            _, old_token = KeyStore(workdir / "baseline" / "keys.json").create("bench-org", "bench-user")
            old = baseline_stack.enter_context(LiveServer(workdir / "baseline", env=env, code=code))
            assert old.process is not None
            old_headers = {"Authorization": f"Bearer {old_token}"}
            async with aiohttp.ClientSession(old.url, headers=old_headers) as http:
                async with http.post(BASE, json={"name": "bench"}) as response:
                    old_id = (await response.json())["conversation_id"]
            old_url = f"{old.url}{BASE}/{old_id}"
            before = [
                (f"create interaction @{args.baseline}", old_url, "POST", interaction, old_headers, old.process.pid),
                (
                    f"list interactions @{args.baseline}",
                    f"{old_url}?max_results=10",
                    "GET",
                    None,
                    old_headers,
                    old.process.pid,
                ),
            ]
        async with aiohttp.ClientSession(uncached.url, headers=uncached_headers) as http:
            async with http.post(BASE, json={"name": "bench"}) as response:
                uncached_id = (await response.json())["conversation_id"]
            for n in range(100):  # a history to page through, as the other server's grows by the creates
                async with http.post(f"{BASE}/{uncached_id}", json=interaction(n)) as response:
                    assert response.status == 200, await response.text()
        hello_url, uvloop_url = f"http://127.0.0.1:{hello_port}/", f"http://127.0.0.1:{uvloop_port}/"
        cases = [
            ("hello-world GET", hello_url, "GET", None, {}, hello.pid),
            ("hello-world POST", hello_url, "POST", interaction, {}, hello.pid),
            ("hello-world uvloop GET", uvloop_url, "GET", None, {}, hello_uvloop.pid),
            ("hello-world uvloop POST", uvloop_url, "POST", interaction, {}, hello_uvloop.pid),
            (
                "create interaction",
                f"{server.url}{BASE}/{conversation_id}",
                "POST",
                interaction,
                headers,
                server.process.pid,
            ),
            (
                "list interactions",
                f"{server.url}{BASE}/{conversation_id}?max_results=10",
                "GET",
                None,
                headers,
                server.process.pid,
            ),
            (
                "list, no page cache",
                f"{uncached.url}{BASE}/{uncached_id}?max_results=10",
                "GET",
                None,
                uncached_headers,
                uncached.process.pid,
            ),
            *before,
        ]
        total = args.requests * len(cases) * len(args.concurrency) * args.repeat
        with tqdm(total=total, unit="req", desc="bench_memory") as bar:
            for concurrency in args.concurrency:
                best: dict[str, dict] = {}
                for _ in range(args.repeat):
                    for name, url, method, body, case_headers, pid in cases:
                        row = await drive(name, url, method, body, case_headers, args.requests, concurrency, bar, pid)
                        if name not in best or row["req_per_s"] > best[name]["req_per_s"]:
                            best[name] = row
                results.extend(best.values())
    for process in (hello, hello_uvloop):
        process.terminate()
        process.wait()

    baseline = {
        ("uvloop" in row["case"], row["case"].split()[-1], row["concurrency"]): row
        for row in results
        if "hello" in row["case"]
    }
    print(
        f"\n{'case':<24}{'clients':>8}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'vs hello':>10}"
        f"{'vs uvloop hello':>17}{'cpu ms/req':>12}{'cpu vs hello':>14}{'cpu vs uvloop':>15}  statuses"
    )
    for row in results:
        method = "POST" if "create" in row["case"] or "POST" in row["case"] else "GET"
        cpu = row["server_cpu_ms_per_request"]
        for suffix, uvloop in (("", False), ("_uvloop", True)):
            hello_row = baseline[uvloop, method, row["concurrency"]]
            row[f"ratio_to_hello_world{suffix}"] = round(row["req_per_s"] / hello_row["req_per_s"], 3)
            # Throughput as the server's own CPU allows it: hello-world's CPU per request over ours.
            hello_cpu = hello_row["server_cpu_ms_per_request"]
            row[f"cpu_ratio_to_hello_world{suffix}"] = round(hello_cpu / cpu, 3) if cpu else None
        print(
            f"{row['case']:<24}{row['concurrency']:>8}{row['req_per_s']:>10}{row['p50_ms']:>10}{row['p99_ms']:>10}"
            f"{row['ratio_to_hello_world']:>10}{row['ratio_to_hello_world_uvloop']:>17}{cpu:>12}"
            f"{row['cpu_ratio_to_hello_world']!s:>14}{row['cpu_ratio_to_hello_world_uvloop']!s:>15}  {row['statuses']}"
        )
    report = {"bridge": args.bridge, "repeat": args.repeat, "baseline": args.baseline, "results": results}
    write_report(args.out, report, plot_memory)


if __name__ == "__main__":
    asyncio.run(main())
