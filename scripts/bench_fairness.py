"""Fair embedding: how long one organisation's single record takes while another bulk-loads.

    python scripts/bench_fairness.py [--bulk-mib 8] [--probes 5] [--out bench-results/fairness.json]

Starts a real server on loopback (the real model) with two organisations.
First a single record of the small organisation is posted on the idle server
(the baseline); then the bulk organisation posts ``--bulk-mib`` MiB of
transcripts (1 MiB per request, all requests in flight at once, as a bulk
client would), and while that load is being embedded the small organisation
posts one record at a time (``--probes`` of them, a few seconds apart).  For
each probe: the seconds until the POST is acknowledged and until a search
finds the record.  The bulk load is not waited for: once the probes are done
the server stops (how much of it was embedded by then is reported).
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
from tqdm import tqdm

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from _plots import plot_fairness, write_report  # noqa: E402

from memory_plugin.auth import KeyStore  # noqa: E402
from tests.support.live import LiveServer  # noqa: E402

ENDPOINT = "/v2/ai/conversation_histories"
RECORD_BYTES = 128 * 1024
SENTENCES = [
    "The customer called about a double charge on the invoice and asked for a refund. ",
    "Der Kunde rief wegen eines Routers an, der jeden Abend die Verbindung verliert. ",
    "Le client a appelé au sujet d'un colis qui n'est jamais arrivé à destination. ",
    "El cliente preguntó por el reembolso de un hervidor que llegó roto. ",
]


def bulk_records(mib: int) -> list[dict[str, Any]]:
    """``mib`` MiB of distinct multilingual transcripts, 128 KiB each."""
    records = []
    for i in range(mib * 1024 * 1024 // RECORD_BYTES):
        parts, size, k = [], 0, 0
        while size < RECORD_BYTES:
            line = f"Call {i}, note {k}: {SENTENCES[(i + k) % len(SENTENCES)]}"
            parts.append(line)
            size += len(line.encode())
            k += 1
        records.append({"record_id": f"bulk-{i}", "record_type": "voice", "region": "USA", "text": "".join(parts)})
    return records


async def probe(http: aiohttp.ClientSession, n: int) -> dict[str, float]:
    """Post one short record, then search until it is found; seconds for each step."""
    record_id = f"probe-{n}"
    text = f"Probe {n}: the customer wants to move the appointment for the fibre installation to Friday."
    started = time.perf_counter()
    body = {"records": [{"record_id": record_id, "record_type": "voice", "region": "USA", "text": text}]}
    async with http.post(ENDPOINT, json=body) as response:
        assert response.status == 201, await response.text()
    acknowledged = time.perf_counter() - started
    params = {"q": text, "record_type": "voice", "filter[record_id]": record_id}
    while True:
        async with http.get(ENDPOINT, params=params) as response:
            assert response.status == 200, await response.text()
            if (await response.json())["data"]:
                break
        await asyncio.sleep(0.05)
    return {"acknowledged_s": round(acknowledged, 2), "searchable_s": round(time.perf_counter() - started, 2)}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="bench-fairness-"))
    keys = KeyStore(workdir / "data" / "keys.json")
    _, bulk_token = keys.create("org-bulk", None)
    _, small_token = keys.create("org-small", None)
    records = bulk_records(args.bulk_mib)
    result: dict[str, Any] = {"bulk_mib": args.bulk_mib, "load_average_before": os.getloadavg()[0]}
    with LiveServer(workdir / "data") as server:
        timeout = aiohttp.ClientTimeout(total=None)
        bulk = aiohttp.ClientSession(server.url, headers={"Authorization": f"Bearer {bulk_token}"}, timeout=timeout)
        small = aiohttp.ClientSession(server.url, headers={"Authorization": f"Bearer {small_token}"}, timeout=timeout)
        async with bulk, small:
            result["idle"] = await probe(small, 0)
            print(f"idle server: {result['idle']}")
            done = 0

            async def post(batch: list[dict[str, Any]]) -> None:
                nonlocal done
                async with bulk.post(ENDPOINT, json={"records": batch}) as response:
                    assert response.status == 201, await response.text()
                done += len(batch)

            per_request = 1024 * 1024 // RECORD_BYTES
            loads = [
                asyncio.ensure_future(post(records[i : i + per_request])) for i in range(0, len(records), per_request)
            ]
            await asyncio.sleep(args.gap)  # the bulk requests are chunked and queued by now
            result["during_bulk"] = []
            for n in tqdm(range(1, args.probes + 1), desc="probes", unit="probe"):
                result["during_bulk"].append(await probe(small, n))
                await asyncio.sleep(args.gap)
            result["bulk_records_done"] = f"{done} of {len(records)}"
            for load in loads:
                load.cancel()
            await asyncio.gather(*loads, return_exceptions=True)
    result["load_average_after"] = os.getloadavg()[0]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bulk-mib", type=int, default=8)
    parser.add_argument("--probes", type=int, default=5)
    parser.add_argument("--gap", type=float, default=3.0, help="seconds between probes")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "fairness.json")
    args = parser.parse_args()
    result = asyncio.run(run(args))
    print(f"\n{'probe':<8}{'acknowledged s':>16}{'searchable s':>14}")
    print(f"{'idle':<8}{result['idle']['acknowledged_s']:>16}{result['idle']['searchable_s']:>14}")
    for n, row in enumerate(result["during_bulk"], 1):
        print(f"{n:<8}{row['acknowledged_s']:>16}{row['searchable_s']:>14}")
    print(f"bulk ({args.bulk_mib} MiB) records embedded by the end: {result['bulk_records_done']}")
    write_report(args.out, result, plot_fairness)


if __name__ == "__main__":
    main()
