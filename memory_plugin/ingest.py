"""Bulk loading of history records from a JSON Lines file into a running server.

It goes through the HTTP API rather than the store files, so that a running
server's indexes see every record, and every record is validated and
acknowledged exactly as an API client's would be.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from tqdm import tqdm

ENDPOINT = "/v2/ai/conversation_histories"


@dataclass
class IngestSummary:
    records: int = 0
    chunks: int = 0
    failed: list[tuple[int, str]] = field(default_factory=list)
    seconds: float = 0.0

    def __str__(self) -> str:
        rate = self.records / self.seconds if self.seconds else 0.0
        lines = [
            f"ingested {self.records} records ({self.chunks} chunks) in {self.seconds:.1f}s, {rate:.1f} records/s",
        ]
        if self.failed:
            lines.append(f"{len(self.failed)} batches failed:")
            lines += [f"  line {line}: {reason}" for line, reason in self.failed[:20]]
        return "\n".join(lines)


def read_batches(path: Path, batch_size: int) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """(first line number, records) per batch; a line that is not a JSON object stops the run."""
    batch: list[dict[str, Any]] = []
    first = 1
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{number}: not JSON: {error.msg}") from None
            if not isinstance(record, dict):
                raise ValueError(f"{path}:{number}: a record must be a JSON object")
            if not batch:
                first = number
            batch.append(record)
            if len(batch) == batch_size:
                yield first, batch
                batch = []
    if batch:
        yield first, batch


def count_lines(path: Path) -> int:
    with open(path, "rb") as handle:
        return sum(1 for line in handle if line.strip())


async def ingest_file(
    path: Path, url: str, key: str, *, batch_size: int = 50, concurrency: int = 4, progress: bool = True
) -> IngestSummary:
    summary = IngestSummary()
    started = time.perf_counter()
    queue: asyncio.Queue[tuple[int, list[dict[str, Any]]] | None] = asyncio.Queue(maxsize=concurrency * 2)
    bar = tqdm(total=count_lines(path), unit="rec", desc="ingest", disable=not progress)

    async with aiohttp.ClientSession(url, headers={"Authorization": f"Bearer {key}"}) as http:

        async def worker() -> None:
            while (item := await queue.get()) is not None:
                line, records = item
                async with http.post(ENDPOINT, json={"records": records}) as response:
                    body = await response.json(content_type=None)
                if response.status == 201:
                    summary.records += len(body["data"])
                    summary.chunks += sum(entry["chunk_total"] for entry in body["data"])
                else:
                    detail = (
                        body.get("errors", [{}])[0].get("detail", response.reason) if isinstance(body, dict) else body
                    )
                    summary.failed.append((line, f"{response.status} {detail}"))
                bar.update(len(records))

        workers = [asyncio.create_task(worker()) for _ in range(concurrency)]
        try:
            for batch in read_batches(path, batch_size):
                await queue.put(batch)
        finally:
            for _ in workers:
                await queue.put(None)
            await asyncio.gather(*workers)
            bar.close()
    summary.seconds = time.perf_counter() - started
    return summary
