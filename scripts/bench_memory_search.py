"""Memory ``_search`` on the OpenSearch store: the query run by OpenSearch, against the old Python evaluation.

    python scripts/bench_memory_search.py [--conversations 5000] [--messages 2000] [--repeat 30]
        [--opensearch-url URL] [--out bench-results/opensearch_memory_search.json]

One user has ``--conversations`` memories (and one memory ``--messages`` messages)
among other users' in the same indices, on a real OpenSearch 2.19.1 node (started
here unless ``--opensearch-url`` names one).  Each search body runs through the
store both ways, at concurrency 1:

- ``before``: what the store did until now: page through every one of the owner's
  documents (``search_after``, 10000 at a time) and evaluate the body in Python
  (``evaluate_search``, as the SQLite store still does);
- ``after``: ``OpenSearchMemoryStore.search_*``: the body checked, wrapped in the
  owner's filter and run by OpenSearch, one page of hits back.

Prints a table, writes JSON and a PNG beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tqdm import tqdm

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from _plots import plot_opensearch_memory_search, write_report  # noqa: E402

from memory_plugin.auth import Principal  # noqa: E402
from memory_plugin.dsl import MESSAGE_INDEX, META_INDEX  # noqa: E402
from memory_plugin.memory.models import Conversation, Interaction  # noqa: E402
from memory_plugin.memory.stores import opensearch_documents as store_documents  # noqa: E402
from memory_plugin.memory.stores.base import conversation_documents, evaluate_search, interaction_documents  # noqa: E402
from memory_plugin.memory.stores.opensearch import OpenSearchMemoryStore  # noqa: E402
from memory_plugin.opensearch_client import bulk  # noqa: E402
from memory_plugin.settings import OpenSearchRegion  # noqa: E402

OWNER = Principal("bench-org", "bench-user")
OTHERS = [Principal("bench-org", f"other-{n}") for n in range(4)]
T0 = datetime(2026, 1, 1, tzinfo=UTC)
WORDS = ["router", "billing", "refund", "password", "invoice", "network", "upgrade", "outage", "porting", "voicemail"]

MEMORY_BODIES = {
    "match name": {"query": {"match": {"name": "router outage"}}, "size": 10},
    "term + sort": {
        "query": {"bool": {"filter": [{"term": {"name": "refund"}}]}},
        "sort": [{"create_time": "desc"}],
        "size": 10,
    },
    "match_all page": {"query": {"match_all": {}}, "from": 100, "size": 10},
}
MESSAGE_BODIES = {
    "match response": {"query": {"match": {"response": "invoice upgrade"}}, "size": 10},
    "exists + sort": {"query": {"exists": {"field": "input"}}, "sort": [{"create_time": "asc"}], "size": 10},
}


def _name(n: int) -> str:
    return f"{WORDS[n % len(WORDS)]} {WORDS[(n * 7 + 3) % len(WORDS)]} case {n}"


async def populate(store: OpenSearchMemoryStore, conversations: int, messages: int) -> str:
    """The owner's memories, as many for others, and one memory full of messages; its id."""
    owners = [OWNER, *OTHERS]
    actions: list[dict[str, Any]] = []
    for owner in owners:
        count = conversations if owner is OWNER else conversations // len(OTHERS)
        for n in range(count):
            cid = f"{owner.user_id}-c{n}"
            created = T0 + timedelta(seconds=n)
            source = store_documents.conversation_source(Conversation(cid, owner, _name(n), created, created, None))
            actions += [{"index": {"_index": store.meta_index, "_id": cid}}, source]
    chat = f"{OWNER.user_id}-c0"
    for n in range(messages):
        created = T0 + timedelta(seconds=n)
        interaction = Interaction(f"m{n}", chat, OWNER, created, _name(n), _name(n + 1), None, "bench", None)
        actions += [
            {"index": {"_index": store.message_index, "_id": f"m{n}"}},
            store_documents.interaction_source(interaction),
        ]
    for start in tqdm(range(0, len(actions), 2000), desc="writing"):
        await bulk(store.client, actions[start : start + 2000], refresh=start + 2000 >= len(actions))
    return chat


async def before_memories(store: OpenSearchMemoryStore, body: dict[str, Any]) -> dict[str, Any]:
    async def documents() -> list[tuple[str, dict[str, Any]]]:
        query = {"bool": {"filter": store_documents.owner_filter(OWNER)}}
        sort = [{store_documents.EXACT_CREATED: {"order": "asc"}}, {store_documents.OWN_ID: {"order": "asc"}}]
        hits = await store._search(store.meta_index, query, sort)
        return conversation_documents(store_documents.read_conversation(h["_id"], h["_source"]) for h in hits)

    return await evaluate_search(body, META_INDEX, documents)


async def before_messages(store: OpenSearchMemoryStore, chat: str, body: dict[str, Any]) -> dict[str, Any]:
    async def documents() -> list[tuple[str, dict[str, Any]]]:
        query = {"bool": {"filter": [*store_documents.owner_filter(OWNER), {"term": {"memory_id": chat}}]}}
        sort = [{store_documents.EXACT_CREATED: {"order": "asc"}}, {store_documents.OWN_ID: {"order": "asc"}}]
        hits = await store._search(store.message_index, query, sort)
        return interaction_documents(store_documents.read_interaction(h["_id"], h["_source"]) for h in hits)

    return await evaluate_search(body, MESSAGE_INDEX, documents)


async def timed(run: Callable[[], Awaitable[dict[str, Any]]], repeat: int) -> tuple[list[float], list[str]]:
    await run()  # warm caches
    times = []
    ids: list[str] = []
    for _ in range(repeat):
        started = time.perf_counter()
        answer = await run()
        times.append((time.perf_counter() - started) * 1000)
        ids = [hit["_id"] for hit in answer["hits"]["hits"]]
    return times, ids


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def bench(url: str, conversations: int, messages: int, repeat: int) -> dict[str, Any]:
    region = OpenSearchRegion(hosts=(url,), index_prefix=f"bench-{uuid.uuid4().hex[:8]}", timeout=120)
    store = OpenSearchMemoryStore(region)
    await store.open()
    rows = []
    try:
        chat = await populate(store, conversations, messages)
        cases: list[
            tuple[str, str, Callable[[], Awaitable[dict[str, Any]]], Callable[[], Awaitable[dict[str, Any]]]]
        ] = []
        for name, body in MEMORY_BODIES.items():
            cases.append(
                (
                    "memories",
                    name,
                    lambda body=body: before_memories(store, body),
                    lambda body=body: store.search_conversations(OWNER, body),
                )
            )
        for name, body in MESSAGE_BODIES.items():
            cases.append(
                (
                    "messages",
                    name,
                    lambda body=body: before_messages(store, chat, body),
                    lambda body=body: store.search_interactions(OWNER, chat, body),
                )
            )
        for kind, name, before, after in tqdm(cases, desc="searching"):
            old, old_ids = await timed(before, repeat)
            new, new_ids = await timed(after, repeat)
            rows.append(
                {
                    "index": kind,
                    "body": name,
                    "before_p50_ms": statistics.median(old),
                    "before_p95_ms": percentile(old, 0.95),
                    "after_p50_ms": statistics.median(new),
                    "after_p95_ms": percentile(new, 0.95),
                    "same_first_hit": old_ids[:1] == new_ids[:1],
                }
            )
    finally:
        await store.client.indices.delete(index=f"{region.index_prefix}-*")
        await store.close()
    return {"conversations": conversations, "messages": messages, "repeat": repeat, "results": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conversations", type=int, default=5000)
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--opensearch-url")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "opensearch_memory_search.json")
    args = parser.parse_args()
    with ExitStack() as stack:
        url = args.opensearch_url
        if not url:
            from tests.support.opensearch import start_nodes

            url = stack.enter_context(start_nodes(1))[0].url
        result = asyncio.run(bench(url, args.conversations, args.messages, args.repeat))
    print(
        f"{'index':<9} {'body':<15} {'before p50':>11} {'before p95':>11} {'after p50':>10} {'after p95':>10} speed-up"
    )
    for row in result["results"]:
        print(
            f"{row['index']:<9} {row['body']:<15} {row['before_p50_ms']:>9.1f}ms {row['before_p95_ms']:>9.1f}ms "
            f"{row['after_p50_ms']:>8.1f}ms {row['after_p95_ms']:>8.1f}ms {row['before_p50_ms'] / row['after_p50_ms']:>7.1f}x"
        )
    write_report(args.out, result, plot_opensearch_memory_search)


if __name__ == "__main__":
    main()
