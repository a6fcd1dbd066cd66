"""Recall of what was said: LoCoMo's questions against the server's search surfaces, in one run.

    python scripts/bench_locomo.py [--data ../shared/data/locomo/locomo7.json] [--conversations N] [--turns N]
        [--no-baselines] [--out bench-results/locomo.json]

LoCoMo (Maharana et al., ACL 2024; CC BY-NC 4.0, read from ``shared/``, never copied here) holds long
conversations and questions whose evidence names the turns that answer them. A server is started on a
fresh data folder, and every turn goes in through the HTTP APIs as a user would send it:

- a history record (``record_type=message``, ``user_id`` = the conversation, text ``"<speaker>: <text>"``
  with ``[shares a photo: <caption>]``, ``record_created_at`` = the session's date plus the turn's place in
  seconds, metadata ``dia_id`` and ``session``), sent as Python's ``json.dumps`` sends it (emoji escaped);
- a 2.12 memory message in one memory per conversation.

Each question with evidence is then asked of ``/v2/ai/conversation_histories`` in each ``mode``
(``filter[user_id]`` = its conversation) and of the memory's ``_search`` (``match`` on ``input``). In the
same run, two baselines outside the server: plain BM25 (Lucene's formula, words lower-cased) and the exact
dense scan (the same model, every turn's cosine). Recall@k of a question is the share of its evidence turns
among the first k turns found, averaged over the questions, overall and per category. Search latency
(p50, p95) is the client's, one request at a time. Prints a table, writes JSON and a chart beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
from tqdm import tqdm

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from _plots import plot_locomo, write_report  # noqa: E402

from tests.support.live import live_server_with_key  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo" / "locomo7.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
DEPTHS = (5, 10, 25)
EVIDENCE = re.compile(r"D\d+:\d+")
SESSION_DATE = "%I:%M %p on %d %B, %Y"
BASE = "/v2/ai/conversation_histories"
MODES = ("semantic", "keyword", "hybrid")


def turns_of(conversation: dict[str, Any]) -> list[dict[str, Any]]:
    """Every turn, in order, as the record it becomes."""
    sessions = conversation["conversation"]
    turns = []
    number = 1
    while f"session_{number}" in sessions:
        start = datetime.strptime(sessions[f"session_{number}_date_time"], SESSION_DATE).replace(tzinfo=UTC)
        for place, turn in enumerate(sessions[f"session_{number}"]):
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares a photo: {turn['blip_caption']}]"
            turns.append(
                {
                    "dia_id": turn["dia_id"],
                    "session": number,
                    "text": text,
                    "created": start + timedelta(seconds=place),
                }
            )
        number += 1
    return turns


def questions_of(conversation: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for qa in conversation["qa"]:
        evidence = set(EVIDENCE.findall(" ".join(qa.get("evidence", []))))
        if evidence:
            found.append({"question": qa["question"], "category": int(qa["category"]), "evidence": evidence})
    return found


def recall(found: list[str], evidence: set[str]) -> dict[int, float]:
    ranked = list(dict.fromkeys(found))
    return {k: len(evidence & set(ranked[:k])) / len(evidence) for k in DEPTHS}


# -- baselines outside the server --------------------------------------------------------------


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


class PlainBM25:
    """Lucene's BM25 (k1 1.2, b 0.75, idf log(1 + (N - n + 0.5) / (n + 0.5))) over lower-cased words."""

    def __init__(self, texts: list[str]) -> None:
        self.docs = [Counter(words(text)) for text in texts]
        self.lengths = np.array([sum(doc.values()) for doc in self.docs], dtype=np.float64)
        self.average = float(self.lengths.mean())
        frequency: Counter[str] = Counter(word for doc in self.docs for word in doc)
        n = len(self.docs)
        self.idf = {word: math.log(1 + (n - df + 0.5) / (df + 0.5)) for word, df in frequency.items()}

    def top(self, query: str, k: int) -> list[int]:
        scores = np.zeros(len(self.docs))
        norm = 1.2 * (1 - 0.75 + 0.75 * self.lengths / self.average)
        for word in set(words(query)):
            idf = self.idf.get(word)
            if idf is None:
                continue
            tf = np.array([doc.get(word, 0) for doc in self.docs], dtype=np.float64)
            scores += idf * tf * 2.2 / (tf + norm)
        order = np.argsort(-scores, kind="stable")
        return [int(i) for i in order[:k] if scores[i] > 0]


def exact_dense(turns: list[list[dict[str, Any]]], questions: list[list[dict[str, Any]]]) -> list[list[list[str]]]:
    """Per conversation and question, the dia_ids of the 25 turns of highest cosine, by brute force."""
    from embedder import Embedder, ensure_default_model

    embedder = Embedder.from_dir(ensure_default_model())
    ranked = []
    for conversation_turns, conversation_questions in tqdm(
        list(zip(turns, questions)), desc="exact dense scan", unit="conversation"
    ):
        passages = embedder.passage([turn["text"] for turn in conversation_turns])
        queries = embedder.query([q["question"] for q in conversation_questions])
        order = np.argsort(-(queries @ passages.T), axis=1, kind="stable")[:, : max(DEPTHS)]
        ranked.append([[conversation_turns[i]["dia_id"] for i in row] for row in order])
    return ranked


# -- the server ---------------------------------------------------------------------------------


async def load(
    session: aiohttp.ClientSession, url: str, conversation: dict[str, Any], turns: list[dict[str, Any]]
) -> tuple[str, dict[str, str]]:
    """The conversation's turns as history records and as messages of one memory; the memory id and
    each message id's dia_id."""
    user = conversation["sample_id"]
    records = [
        {
            "record_id": f"{user}.{turn['dia_id']}",
            "record_type": "message",
            "text": turn["text"],
            "user_id": user,
            "record_created_at": turn["created"].isoformat(),
            "metadata": {"dia_id": turn["dia_id"], "session": turn["session"]},
        }
        for turn in turns
    ]
    for start in range(0, len(records), 100):
        body = json.dumps({"records": records[start : start + 100]})  # ensure_ascii: emoji as escaped pairs
        async with session.post(url + BASE, data=body, headers={"Content-Type": "application/json"}) as response:
            if response.status != 201:
                raise SystemExit(f"ingest: {response.status} {await response.text()}")
    async with session.post(url + "/_plugins/_ml/memory", json={"name": f"LoCoMo {user}"}) as response:
        memory_id = (await response.json())["memory_id"]
    messages = {}
    for turn in turns:
        body = json.dumps({"input": turn["text"]})
        async with session.post(
            f"{url}/_plugins/_ml/memory/{memory_id}/messages", data=body, headers={"Content-Type": "application/json"}
        ) as response:
            answer = await response.json()
            if response.status != 200:
                raise SystemExit(f"message: {response.status} {answer}")
            messages[answer["message_id"]] = turn["dia_id"]
    return memory_id, messages


async def timed(search: Awaitable[list[str]], latencies: list[float]) -> list[str]:
    started = time.perf_counter()  # a coroutine starts when awaited
    found = await search
    latencies.append((time.perf_counter() - started) * 1000)
    return found


async def histories(session: aiohttp.ClientSession, url: str, user: str, question: str, mode: str) -> list[str]:
    params = {
        "q": question,
        "record_type": "message",
        "filter[user_id]": user,
        "top_k": str(max(DEPTHS)),
        "page[size]": str(max(DEPTHS)),
        "mode": mode,
    }
    async with session.get(url + BASE, params=params) as response:
        body = await response.json()
        if response.status != 200:
            raise SystemExit(f"search: {response.status} {body}")
    return [hit["metadata"]["dia_id"] for hit in body["data"]]


async def memory_search(
    session: aiohttp.ClientSession, url: str, memory_id: str, messages: dict[str, str], question: str
) -> list[str]:
    body = {"query": {"match": {"input": question}}, "size": max(DEPTHS)}
    async with session.post(f"{url}/_plugins/_ml/memory/{memory_id}/_search", json=body) as response:
        answer = await response.json()
        if response.status != 200:
            raise SystemExit(f"memory _search: {response.status} {answer}")
    return [messages[hit["_id"]] for hit in answer["hits"]["hits"]]


def summarise(per_question: dict[str, list[dict[int, float]]], categories: list[int]) -> dict[str, Any]:
    """Mean recall per surface, overall and per category."""
    table: dict[str, Any] = {}
    for surface, recalls in per_question.items():
        row: dict[str, Any] = {f"R@{k}": round(statistics.fmean(r[k] for r in recalls), 3) for k in DEPTHS}
        for category, name in CATEGORIES.items():
            chosen = [r for r, c in zip(recalls, categories) if c == category]
            if chosen:
                row[name] = {f"R@{k}": round(statistics.fmean(r[k] for r in chosen), 3) for k in DEPTHS}
        table[surface] = row
    return table


async def bench(data: Path, conversations: int | None, turns_kept: int | None, baselines: bool) -> dict[str, Any]:
    dataset = json.loads(data.read_text())[:conversations]
    turns = [turns_of(conversation)[:turns_kept] for conversation in dataset]
    questions = [
        [q for q in questions_of(conversation) if q["evidence"] <= {turn["dia_id"] for turn in conversation_turns}]
        for conversation, conversation_turns in zip(dataset, turns)
    ]
    asked = [q for conversation_questions in questions for q in conversation_questions]
    per_question: dict[str, list[dict[int, float]]] = defaultdict(list)
    latencies: dict[str, list[float]] = defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="locomo-") as folder:
        server = live_server_with_key(Path(folder) / "data", "locomo-org", None)
        try:
            async with aiohttp.ClientSession(headers=server.headers) as session:
                loaded = []
                started = time.perf_counter()
                for conversation, conversation_turns in tqdm(
                    list(zip(dataset, turns)), desc="load", unit="conversation"
                ):
                    loaded.append(await load(session, server.url, conversation, conversation_turns))
                load_seconds = time.perf_counter() - started
                progress = tqdm(total=len(asked), desc="questions", unit="question")
                for conversation, conversation_questions, (memory_id, messages) in zip(dataset, questions, loaded):
                    user = conversation["sample_id"]
                    for q in conversation_questions:
                        for mode in MODES:
                            found = await timed(
                                histories(session, server.url, user, q["question"], mode),
                                latencies[f"histories {mode}"],
                            )
                            per_question[f"histories {mode}"].append(recall(found, q["evidence"]))
                        found = await timed(
                            memory_search(session, server.url, memory_id, messages, q["question"]),
                            latencies["memory _search match"],
                        )
                        per_question["memory _search match"].append(recall(found, q["evidence"]))
                        progress.update()
                progress.close()
        finally:
            server.terminate()
    if baselines:
        for conversation_turns, conversation_questions in zip(turns, questions):
            index = PlainBM25([turn["text"] for turn in conversation_turns])
            for q in conversation_questions:
                found = [conversation_turns[i]["dia_id"] for i in index.top(q["question"], max(DEPTHS))]
                per_question["plain BM25 (baseline)"].append(recall(found, q["evidence"]))
        for ranked, conversation_questions in zip(exact_dense(turns, questions), questions):
            for found, q in zip(ranked, conversation_questions):
                per_question["exact dense scan (baseline)"].append(recall(found, q["evidence"]))
    categories = [q["category"] for q in asked]
    return {
        "conversations": [conversation["sample_id"] for conversation in dataset],
        "turns": sum(len(t) for t in turns),
        "questions": len(asked),
        "load_seconds": round(load_seconds, 1),
        "recall": summarise(per_question, categories),
        "latency_ms": {
            surface: {
                "p50": round(statistics.median(values), 2),
                "p95": round(float(np.percentile(values, 95)), 2),
            }
            for surface, values in latencies.items()
        },
    }


def print_table(report: dict[str, Any]) -> None:
    conversations = len(report["conversations"])
    print(f"\n{report['questions']} questions over {report['turns']} turns of {conversations} conversations")
    names = list(CATEGORIES.values())
    depths = [f"R@{k}" for k in DEPTHS]
    print(f"{'':32s} {'':20s}  {'R@10 by category':^49s}")
    header = [f"{'surface':32s}", *(f"{d:>6s}" for d in depths), " ", *(f"{n[:9]:>9s}" for n in names)]
    print(" ".join([*header, f"{'p50 ms':>7s}", f"{'p95 ms':>7s}"]))
    for surface, row in report["recall"].items():
        latency = report["latency_ms"].get(surface)
        cells = [f"{surface:32s}", *(f"{row[d]:6.3f}" for d in depths), " "]
        cells += [f"{row[n]['R@10']:9.3f}" if n in row else f"{'-':>9s}" for n in names]
        cells += [f"{latency['p50']:7.1f}", f"{latency['p95']:7.1f}"] if latency else [f"{'-':>7s}"] * 2
        print(" ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversations", type=int, default=None, help="only the first N conversations")
    parser.add_argument(
        "--turns", type=int, default=None, help="only each conversation's first N turns (and the questions on them)"
    )
    parser.add_argument("--no-baselines", dest="baselines", action="store_false")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "locomo.json")
    args = parser.parse_args()
    if not args.data.exists():
        raise SystemExit(f"{args.data} not found: LoCoMo is read from shared/data/locomo (see its README)")
    report = asyncio.run(bench(args.data, args.conversations, args.turns, args.baselines))
    print_table(report)
    write_report(args.out, report, plot_locomo)


if __name__ == "__main__":
    main()
