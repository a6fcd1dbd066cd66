"""End to end over HTTP: ingestion throughput and search latency, query embedding included.

    python scripts/bench_http.py [--records 200] [--searches 300] [--out bench-results/http.json]

Starts a real server on loopback, then measures, side by side in one run:

- ingestion chunks/s through ``POST /v2/ai/conversation_histories``, beside the
  raw embedder's passages/s on the very same chunk texts (the ratio is what the
  HTTP, chunking and store layers cost);
- search p50/p99 and req/s at concurrency 1, 4 and 16 (``--concurrency``), every
  query distinct so that the query cache never answers.

The chart (``http.png`` beside the JSON) shows both.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from tqdm import tqdm

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from _plots import plot_http, write_report  # noqa: E402
from bench_memory import drive  # noqa: E402

from embedder import Embedder, chunk_text, ensure_default_model  # noqa: E402
from memory_plugin.auth import KeyStore  # noqa: E402
from tests.support.live import LiveServer  # noqa: E402

ENDPOINT = "/v2/ai/conversation_histories"
TOPICS = [
    "a double charge on the invoice",
    "the router dropping wifi every evening",
    "a parcel that never arrived",
    "a password reset link that expired",
    "cancelling the subscription",
    "long waiting times on the hotline",
    "moving to a new address",
    "a mobile network outage",
    "upgrading to a bigger data plan",
    "a refund for a broken kettle",
]
LANGS = ["The customer called about {t}. ", "Der Kunde rief wegen {t} an. ", "Le client a appelé au sujet de {t}. "]


def corpus(n: int) -> list[dict]:
    records = []
    for i in range(n):
        sentence = LANGS[i % 3].format(t=TOPICS[i % len(TOPICS)])
        repeat = [1, 4, 40, 120][i % 4]  # short notes to multi-chunk transcripts
        text = "".join(f"{sentence}Note {k}: the agent followed up on case {i}-{k}. " for k in range(repeat))
        records.append(
            {
                "record_id": f"bench-{i}",
                "record_type": "voice",
                "region": ["USA", "DEU", "AUS", "UAE"][i % 4],
                "user_id": f"user-{i % 10}",
                "text": text,
                "metadata": {"language": ["en", "de", "fr"][i % 3]},
            }
        )
    return records


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200)
    parser.add_argument("--searches", type=int, default=300)
    parser.add_argument("--concurrency", default="1,4,16", type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "http.json")
    args = parser.parse_args()

    records = corpus(args.records)
    embedder = Embedder.from_dir(ensure_default_model())
    chunks = [c.text for r in records for c in chunk_text(embedder, r["text"])]

    started = time.perf_counter()
    for start in tqdm(range(0, len(chunks), 32), desc="raw embedder", unit="batch"):
        embedder.passage(chunks[start : start + 32])
    raw_seconds = time.perf_counter() - started
    del embedder

    workdir = Path(tempfile.mkdtemp(prefix="bench-http-"))
    _, token = KeyStore(workdir / "data" / "keys.json").create("bench-org", None)
    headers = {"Authorization": f"Bearer {token}"}
    results: dict = {"records": len(records), "chunks": len(chunks)}
    with LiveServer(workdir / "data") as server:
        assert server.process is not None
        async with aiohttp.ClientSession(server.url, headers=headers) as http:
            started = time.perf_counter()
            with tqdm(total=len(records), desc="ingest over HTTP", unit="rec") as bar:

                async def post(batch: list[dict]) -> None:
                    async with http.post(ENDPOINT, json={"records": batch}) as response:
                        assert response.status == 201, await response.text()
                    bar.update(len(batch))

                batches = [records[i : i + 10] for i in range(0, len(records), 10)]
                for group in range(0, len(batches), 4):
                    await asyncio.gather(*(post(batch) for batch in batches[group : group + 4]))
            http_seconds = time.perf_counter() - started
        results["ingest"] = {
            "raw_embedder_chunks_per_s": round(len(chunks) / raw_seconds, 2),
            "http_chunks_per_s": round(len(chunks) / http_seconds, 2),
            "fraction_of_raw": round(raw_seconds / http_seconds, 3),
        }
        results["search"] = []
        with tqdm(total=args.searches * len(args.concurrency), desc="search over HTTP", unit="req") as bar:
            for concurrency in args.concurrency:
                url = f"{server.url}{ENDPOINT}"
                counter = iter(range(10**9))

                class Params:
                    """A distinct query per request, so the query cache never answers."""

                    def __str__(self) -> str:
                        n = next(counter)  # noqa: B023 (used within this iteration only)
                        return f"?q=customer+asks+about+{TOPICS[n % len(TOPICS)].replace(' ', '+')}+{n}&record_type=voice&top_k=10"

                row = await drive(
                    f"search c={concurrency}",
                    url,
                    "GET",
                    None,
                    headers,
                    args.searches,
                    concurrency,
                    bar,
                    server.process.pid,
                    url_suffix=Params(),
                )
                results["search"].append(row)

    print(
        f"\ningestion: {results['chunks']} chunks; raw embedder {results['ingest']['raw_embedder_chunks_per_s']} chunks/s, "
        f"over HTTP {results['ingest']['http_chunks_per_s']} chunks/s ({results['ingest']['fraction_of_raw']:.0%} of raw)"
    )
    print(f"{'case':<14}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}  statuses")
    for row in results["search"]:
        print(f"{row['case']:<14}{row['req_per_s']:>10}{row['p50_ms']:>10}{row['p99_ms']:>10}  {row['statuses']}")
    write_report(args.out, results, plot_http)


if __name__ == "__main__":
    asyncio.run(main())
