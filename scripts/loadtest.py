"""A bounded load test: mixed memory and history traffic, then a read-back of every acknowledged write.

    python scripts/loadtest.py --spawn [--duration 60] [--concurrency 32] [--orgs 3]
    python scripts/loadtest.py --url http://127.0.0.1:9200 --keys KEY1,KEY2
    python scripts/loadtest.py --url http://127.0.0.1:9200 --data-dir data     # creates keys in data/keys.json

``--mix`` weighs the operations (default
``create_interaction=40,list_interactions=25,ingest=10,search=20,create_conversation=5``):

- ``create_conversation``: ``POST /_plugins/_ml/memory/conversation``
- ``create_interaction``:  ``POST /_plugins/_ml/memory/conversation/{id}``
- ``list_interactions``:   ``GET  /_plugins/_ml/memory/conversation/{id}``
- ``ingest``:              ``POST /v2/ai/conversation_histories`` (1 to 3 short records)
- ``search``:              ``GET  /v2/ai/conversation_histories?q=...&record_type=...``

Every request's latency goes into an HdrHistogram per operation (p50/p90/p99/max),
statuses are counted, and at the end every acknowledged write is read back:
conversations and interactions through the memory API's lists, ingested records
by a search filtered on ``filter[record_id]`` (``top_k=1``).  Lost writes and
5xx answers must both be zero; otherwise the exit code is 1.  Results go to
``--out`` as JSON, with a chart of latency by operation beside it (``.png``).  Traffic is only ever sent to a loopback address.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from hdrh.histogram import HdrHistogram
from tqdm import tqdm

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from _plots import plot_loadtest, write_report  # noqa: E402
from hello_world import hello_world_rps  # noqa: E402

from memory_plugin.auth import KeyStore  # noqa: E402

MEMORY = "/_plugins/_ml/memory/conversation"
HISTORIES = "/v2/ai/conversation_histories"
OPERATIONS = ("create_conversation", "create_interaction", "list_interactions", "ingest", "search")
DEFAULT_MIX = "create_interaction=40,list_interactions=25,ingest=10,search=20,create_conversation=5"
RECORD_TYPES = ("voice", "message")
TOPICS = (
    "billing discrepancy on the latest invoice",
    "router keeps dropping the connection",
    "refund for a cancelled order",
    "password reset link expired",
    "delivery arrived damaged",
    "upgrade to the premium plan",
    "network outage downtown",
    "change of billing address",
    "double charge on the credit card",
    "slow internet in the evening",
    "porting a phone number",
    "roaming charges abroad",
    "contract cancellation fee",
    "modem replacement",
    "hold time was too long",
    "technician appointment",
    "parental controls",
    "voicemail not working",
)
QUERIES = tuple(f"{topic} {suffix}" for topic in TOPICS for suffix in ("", "issue", "help"))
#: Values a histogram can hold: 1 µs to 10 minutes, 3 significant digits.
HIST_MAX_US = 600_000_000


def loopback_only(url: str) -> str:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return url
    try:
        if ipaddress.ip_address(host).is_loopback:
            return url
    except ValueError:
        pass
    raise SystemExit(f"loadtest: refusing to send load to {host!r}: only loopback addresses are allowed")


def parse_mix(text: str) -> dict[str, float]:
    mix: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, weight = part.partition("=")
        name = name.strip()
        if name not in OPERATIONS:
            raise SystemExit(f"loadtest: unknown operation {name!r} in --mix; known: {', '.join(OPERATIONS)}")
        try:
            mix[name] = float(weight)
        except ValueError:
            raise SystemExit(f"loadtest: weight of {name!r} must be a number, not {weight!r}") from None
        if mix[name] < 0:
            raise SystemExit(f"loadtest: weight of {name!r} must not be negative")
    mix = {name: weight for name, weight in mix.items() if weight > 0}
    if not mix:
        raise SystemExit("loadtest: --mix has no operation with a positive weight")
    return mix


@dataclass
class Org:
    """One caller (one key) and what the server acknowledged to it."""

    name: str
    token: str
    conversations: list[str] = field(default_factory=list)
    interactions: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    records: dict[str, str] = field(default_factory=dict)  # record_id -> record_type

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


class Stats:
    def __init__(self, operations: list[str]) -> None:
        self.histograms = {op: HdrHistogram(1, HIST_MAX_US, 3) for op in operations}
        self.statuses: dict[str, Counter[str]] = {op: Counter() for op in operations}
        self.count = 0

    def record(self, op: str, started: float, status: str) -> None:
        micros = int((time.perf_counter() - started) * 1_000_000)
        self.histograms[op].record_value(min(max(micros, 1), HIST_MAX_US))
        self.statuses[op][status] += 1
        self.count += 1

    def server_errors(self) -> int:
        return sum(n for counter in self.statuses.values() for status, n in counter.items() if status.startswith("5"))

    def transport_errors(self) -> int:
        return sum(n for counter in self.statuses.values() for status, n in counter.items() if not status.isdigit())

    def summary(self, elapsed: float) -> dict[str, Any]:
        ops: dict[str, Any] = {}
        for op, histogram in self.histograms.items():
            count = histogram.get_total_count()
            ops[op] = {
                "count": count,
                "throughput_rps": round(count / elapsed, 1) if elapsed > 0 else 0.0,
                "p50_ms": round(histogram.get_value_at_percentile(50) / 1000, 2),
                "p90_ms": round(histogram.get_value_at_percentile(90) / 1000, 2),
                "p99_ms": round(histogram.get_value_at_percentile(99) / 1000, 2),
                "max_ms": round(histogram.get_max_value() / 1000, 2),
                "statuses": dict(sorted(self.statuses[op].items())),
            }
        return ops


class Load:
    def __init__(self, url: str, orgs: list[Org], mix: dict[str, float], seed: int) -> None:
        self.url = url.rstrip("/")
        self.orgs = orgs
        self.names = list(mix)
        self.weights = list(mix.values())
        self.rng = random.Random(seed)
        self.stats = Stats(self.names)
        self.sequence = 0

    def next_id(self, prefix: str) -> str:
        self.sequence += 1
        return f"{prefix}-{os.getpid()}-{self.sequence}"

    async def call(
        self, http: aiohttp.ClientSession, op: str, org: Org, method: str, path: str, **kwargs: Any
    ) -> tuple[int, Any]:
        started = time.perf_counter()
        try:
            async with http.request(method, self.url + path, headers=org.headers, **kwargs) as response:
                body = await response.read()
                status = response.status
        except (TimeoutError, aiohttp.ClientError, OSError) as error:
            self.stats.record(op, started, type(error).__name__)
            return 0, None
        self.stats.record(op, started, str(status))
        try:
            return status, json.loads(body) if body else None
        except ValueError:
            return status, None

    async def create_conversation(self, http: aiohttp.ClientSession, org: Org, op: str = "create_conversation") -> None:
        status, body = await self.call(http, op, org, "POST", MEMORY, json={"name": self.next_id("load")})
        if status == 200:
            org.conversations.append(body["conversation_id"])

    async def create_interaction(self, http: aiohttp.ClientSession, org: Org) -> None:
        conversation = self.rng.choice(org.conversations)
        topic = self.rng.choice(TOPICS)
        payload = {
            "input": f"Customer asks about {topic}.",
            "response": f"Agent explains the {topic}.",
            "origin": "loadtest",
        }
        status, body = await self.call(
            http, "create_interaction", org, "POST", f"{MEMORY}/{conversation}", json=payload
        )
        if status == 200:
            org.interactions[conversation].append(body["interaction_id"])

    async def list_interactions(self, http: aiohttp.ClientSession, org: Org) -> None:
        conversation = self.rng.choice(org.conversations)
        await self.call(http, "list_interactions", org, "GET", f"{MEMORY}/{conversation}", params={"max_results": "10"})

    async def ingest(self, http: aiohttp.ClientSession, org: Org) -> None:
        records = []
        for _ in range(self.rng.randint(1, 3)):
            topic = self.rng.choice(TOPICS)
            records.append(
                {
                    "record_id": self.next_id(f"rec-{org.name}"),
                    "record_type": self.rng.choice(RECORD_TYPES),
                    "text": f"Customer called about {topic}. The agent looked into the {topic} and followed up.",
                    "metadata": {"source": "loadtest", "topic": topic.split()[0]},
                }
            )
        status, body = await self.call(http, "ingest", org, "POST", HISTORIES, json={"records": records})
        if status == 201:
            for item in body["data"]:
                org.records[item["record_id"]] = item["record_type"]

    async def search(self, http: aiohttp.ClientSession, org: Org) -> None:
        params = {"q": self.rng.choice(QUERIES), "record_type": self.rng.choice(RECORD_TYPES), "top_k": "10"}
        await self.call(http, "search", org, "GET", HISTORIES, params=params)

    async def run(self, concurrency: int, duration: float) -> float:
        connector = aiohttp.TCPConnector(limit=concurrency)
        timeout = aiohttp.ClientTimeout(total=120)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:
            # Every org needs a conversation to write into; these count as create_conversation.
            await asyncio.gather(*(self.create_conversation(http, org) for org in self.orgs for _ in range(2)))
            for org in self.orgs:
                if not org.conversations:
                    raise SystemExit(f"loadtest: could not create a conversation for {org.name}; is the key valid?")
            started = time.perf_counter()
            deadline = started + duration
            handlers = {name: getattr(self, name) for name in self.names}

            async def worker() -> None:
                while time.perf_counter() < deadline:
                    op = self.rng.choices(self.names, self.weights)[0]
                    await handlers[op](http, self.rng.choice(self.orgs))

            async def progress() -> None:
                with tqdm(total=round(duration), unit="s", desc="load", file=sys.stderr, leave=False) as bar:
                    shown = 0
                    while (now := time.perf_counter()) < deadline:
                        await asyncio.sleep(min(1.0, max(deadline - now, 0.01)))
                        done = min(round(time.perf_counter() - started), round(duration))
                        bar.update(done - shown)
                        shown = done
                        elapsed = time.perf_counter() - started
                        bar.set_postfix(
                            req=self.stats.count,
                            rps=round(self.stats.count / elapsed),
                            err5xx=self.stats.server_errors(),
                        )

            await asyncio.gather(progress(), *(worker() for _ in range(concurrency)))
            return time.perf_counter() - started

    async def verify(self, concurrency: int) -> dict[str, Any]:
        """Read back every acknowledged write; return counts and the lost ones."""
        lost: list[str] = []
        checked = Counter[str]()
        problems: list[str] = []
        semaphore = asyncio.Semaphore(concurrency)
        timeout = aiohttp.ClientTimeout(total=120)

        async def get(http: aiohttp.ClientSession, org: Org, path: str, params: dict[str, str]) -> Any:
            async with semaphore:
                for attempt in range(3):
                    try:
                        async with http.get(self.url + path, headers=org.headers, params=params) as response:
                            if response.status == 200:
                                return await response.json()
                            problem = f"GET {path} {params} -> {response.status}: {(await response.text())[:200]}"
                    except (TimeoutError, aiohttp.ClientError, OSError) as error:
                        problem = f"GET {path} -> {error!r}"
                    await asyncio.sleep(0.2 * (attempt + 1))
                problems.append(problem)
                return None

        async def conversations(http: aiohttp.ClientSession, org: Org) -> None:
            seen: set[str] = set()
            token = 0
            while True:
                page = await get(http, org, MEMORY, {"max_results": "10000", "next_token": str(token)})
                if page is None:
                    break
                seen |= {c["conversation_id"] for c in page["conversations"]}
                if "next_token" not in page:
                    break
                token = int(page["next_token"])
            checked["conversations"] += len(org.conversations)
            lost.extend(f"conversation {org.name}/{c}" for c in org.conversations if c not in seen)

        async def interactions(
            http: aiohttp.ClientSession, org: Org, conversation: str, acknowledged: list[str]
        ) -> None:
            page = await get(http, org, f"{MEMORY}/{conversation}", {"max_results": "10000"})
            seen = {i["interaction_id"] for i in page["interactions"]} if page else set()
            checked["interactions"] += len(acknowledged)
            lost.extend(f"interaction {org.name}/{conversation}/{i}" for i in acknowledged if i not in seen)

        async def record(http: aiohttp.ClientSession, org: Org, record_id: str, record_type: str) -> None:
            params = {"q": "customer call", "record_type": record_type, "top_k": "1", "filter[record_id]": record_id}
            page = await get(http, org, HISTORIES, params)
            checked["records"] += 1
            if not page or not any(hit["record_id"] == record_id for hit in page["data"]):
                lost.append(f"record {org.name}/{record_id}")

        connector = aiohttp.TCPConnector(limit=concurrency)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:
            jobs = [conversations(http, org) for org in self.orgs]
            jobs += [interactions(http, org, c, ids) for org in self.orgs for c, ids in org.interactions.items()]
            jobs += [record(http, org, r, t) for org in self.orgs for r, t in org.records.items()]
            with tqdm(total=len(jobs), desc="verify", unit="check", file=sys.stderr, leave=False) as bar:

                async def tracked(job: Any) -> None:
                    await job
                    bar.update()

                await asyncio.gather(*(tracked(job) for job in jobs))
        return {
            "checked": dict(checked),
            "lost_writes": len(lost),
            "lost": lost[:50],
            "verify_errors": problems[:20],
            "verify_error_count": len(problems),
        }


def print_table(result: dict[str, Any]) -> None:
    rows = [("operation", "count", "req/s", "p50 ms", "p90 ms", "p99 ms", "max ms", "statuses")]
    for op, s in result["operations"].items():
        statuses = " ".join(f"{k}:{v}" for k, v in s["statuses"].items())
        rows.append(
            (
                op,
                str(s["count"]),
                f"{s['throughput_rps']:.1f}",
                f"{s['p50_ms']:.1f}",
                f"{s['p90_ms']:.1f}",
                f"{s['p99_ms']:.1f}",
                f"{s['max_ms']:.1f}",
                statuses,
            )
        )
    rows.append(("total", str(result["total_requests"]), f"{result['throughput_rps']:.1f}", "", "", "", "", ""))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for n, row in enumerate(rows):
        print(
            "  ".join(cell.ljust(w) if i in (0, 7) else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
        )
        if n == 0:
            print("  ".join("-" * w for w in widths))
    v = result["verification"]
    print(f"\n{result['concurrency']} clients, {result['elapsed_s']:.1f} s, {len(result['orgs'])} orgs")
    print(
        f"verified: {v['checked']}; lost writes: {v['lost_writes']}; 5xx: {result['server_5xx']};"
        f" transport errors: {result['transport_errors']}"
    )
    if "hello_world" in result:
        hw = result["hello_world"]
        print(
            f"hello-world (GET /, same client, c={result['concurrency']}): {hw['throughput_rps']:.1f} req/s;"
            f" ours: {result['throughput_rps']:.1f} req/s ({result['throughput_rps'] / hw['throughput_rps']:.1%})"
        )
    for item in v["lost"][:10]:
        print("LOST", item)
    for item in v["verify_errors"][:5]:
        print("VERIFY ERROR", item)


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:9200", help="a running server (loopback only)")
    parser.add_argument("--spawn", action="store_true", help="start a server of our own in a temporary data folder")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load")
    parser.add_argument("--mix", default=DEFAULT_MIX, help=f"operation weights (default {DEFAULT_MIX})")
    parser.add_argument("--orgs", type=int, default=3, help="organisations (one key each)")
    parser.add_argument("--keys", help="with --url: comma-separated API keys to use (one per org)")
    parser.add_argument(
        "--data-dir", type=Path, help="with --url: the server's data folder, to create keys in its keys.json"
    )
    parser.add_argument("--bridge", action="store_true", help="with --spawn: index interactions for search too")
    parser.add_argument(
        "--hello-world", action="store_true", help="also measure an aiohttp hello-world at the same concurrency"
    )
    parser.add_argument("--hello-seconds", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "loadtest.json")
    args = parser.parse_args(argv)
    if args.concurrency < 1 or args.duration <= 0 or args.orgs < 1:
        parser.error("--concurrency and --orgs must be at least 1, --duration positive")
    mix = parse_mix(args.mix)

    server = None
    workdir: Path | None = None
    try:
        if args.spawn:
            from tests.support.live import LiveServer

            workdir = Path(tempfile.mkdtemp(prefix="loadtest-"))
            data_dir = workdir / "data"
            keys = KeyStore(data_dir / "keys.json")
            orgs = [Org(f"org-{n}", keys.create(f"org-{n}", f"user-{n}")[1]) for n in range(args.orgs)]
            print(f"starting a server in {data_dir} ...", file=sys.stderr, flush=True)
            server = LiveServer(
                data_dir, env={"MEMORY_PLUGIN_BRIDGE_ENABLED": "true" if args.bridge else "false"}
            ).start()
            url = server.url
        else:
            url = loopback_only(args.url)
            if args.keys:
                tokens = [key.strip() for key in args.keys.split(",") if key.strip()]
                orgs = [Org(f"key-{n}", token) for n, token in enumerate(tokens)]
            elif args.data_dir:
                keys = KeyStore(args.data_dir / "keys.json")
                stamp = int(time.time())
                orgs = [
                    Org(f"load-{stamp}-{n}", keys.create(f"load-{stamp}-{n}", f"user-{n}")[1]) for n in range(args.orgs)
                ]
            else:
                parser.error("with --url, give --keys or --data-dir (or use --spawn)")
        load = Load(url, orgs, mix, args.seed)
        elapsed = await load.run(args.concurrency, args.duration)
        verification = await load.verify(args.concurrency)
        result: dict[str, Any] = {
            "url": url,
            "spawned": bool(args.spawn),
            "bridge": bool(args.bridge) if args.spawn else None,
            "concurrency": args.concurrency,
            "duration_s": args.duration,
            "elapsed_s": round(elapsed, 2),
            "mix": mix,
            "orgs": [org.name for org in orgs],
            "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0], "loadavg": os.getloadavg()},
            "total_requests": load.stats.count,
            "throughput_rps": round(load.stats.count / elapsed, 1),
            "operations": load.stats.summary(elapsed),
            "server_5xx": load.stats.server_errors(),
            "transport_errors": load.stats.transport_errors(),
            "verification": verification,
        }
        if server is not None and server.process is not None and server.process.poll() is not None:
            result["server_exit_code"] = server.process.returncode
        if server is not None and (result["server_5xx"] or "server_exit_code" in result):
            result["server_log_tail"] = server.log_path.read_text(errors="replace")[-4000:]
    finally:
        if server is not None:
            server.kill()
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
    if args.hello_world:
        result["hello_world"] = await hello_world_rps(args.concurrency, args.hello_seconds)
        result["ratio_to_hello_world"] = round(result["throughput_rps"] / result["hello_world"]["throughput_rps"], 3)
    result["ok"] = (
        result["server_5xx"] == 0
        and verification["lost_writes"] == 0
        and verification["verify_error_count"] == 0
        and "server_exit_code" not in result
    )
    print_table(result)
    write_report(args.out, result, plot_loadtest)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
