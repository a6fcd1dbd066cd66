"""A consistency test in Jepsen's way: three server processes over two real OpenSearch nodes (two regions),
eight clients sending conflicting operations round-robin, faults during the run, a recorded history of every
operation's invocation and outcome, and a checker (tests/support/consistency.py) judging it against the final
state read from OpenSearch and from the servers.

Operations: history record replace (fixed record ids, unique texts, region USA or DEU: cross-region moves),
record delete, memory API messages (indexed by the bridge), agentic infer adds and working-memory deletes; some
adds go into a new container of an index prefix of its own, two at once through two processes, so that one
process creates the container's indices while the other finds them (every add's extraction is still asked once).
Faults: SIGKILL of one server process, restarted on its port; SIGSTOP of the DEU node's JVM for 10 s.
The op mix is seeded (``CONSISTENCY_SEED`` replays another); ops and time are bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.http.test_agentic import conversation
from tests.support import consistency as c
from tests.support.agentic_llm import SEMANTIC_CONFIG, ScriptedLLM, add_all, payload_of
from tests.support.cluster import ServerGroup, count, jvm_state, paused, scale_out_config, search_all
from tests.support.live import key_headers

pytestmark = [pytest.mark.consistency, pytest.mark.opensearch, pytest.mark.model, pytest.mark.timeout(600)]

SEED = int(os.environ.get("CONSISTENCY_SEED", "24"))
CLIENTS = 8
SERVERS = int(os.environ.get("CONSISTENCY_SERVERS", "3"))  # 1: the single-process control
OPS_PER_CLIENT = 50
WORKLOAD_SECONDS = 50.0
#: A client gives up on an answer after this long: the op is then indeterminate.
CLIENT_TIMEOUT = 12.0
RECORD_IDS = [f"rec-{n}" for n in range(3)]  # few: writers of one id must overlap
#: Ids two writers take at once, to both regions through two servers, as two users half the time (the
#: organisation's key deletes them): what decides between them is the record-id claim, and nothing else.
DUEL_IDS = [f"duel-{n}" for n in range(2)]
#: Of the writes, the share that is a duel.
DUEL_SHARE = 0.35
MEMORIES = 3
USERS = ("u0", "u1")
HISTORIES = "/v2/ai/conversation_histories"
MEMORY = "/_plugins/_ml/memory"
CONTAINERS = "/_plugins/_ml/memory_containers"
NOT_CONNECTED = "not connected"
#: op kind -> weight of the mix
MIX = {c.WRITE: 36, c.DELETE: 12, c.MESSAGE: 28, c.AGENTIC_ADD: 15, c.AGENTIC_DELETE: 9}
#: The first agentic adds of the run each create a new container (index prefix and all) and add into it through
#: two processes at once, so many at once; this many of them (each is four new indices on the node).
FRESH_CONTAINERS = 8


@dataclass
class Run:
    """What the clients share: the servers, the setup's ids, and the working memories acknowledged so far."""

    urls: list[str]
    headers: dict[str, str]
    #: Another user of the organisation, and the organisation's own key (which reads and deletes every user's).
    rival: dict[str, str]
    admin: dict[str, str]
    memory_ids: list[str]
    container_id: str
    history: c.History
    deadline: float
    #: Acknowledged working memories: id, message text, container.
    working: list[tuple[str, str, str]] = field(default_factory=list)
    #: New containers made so far (``FRESH_CONTAINERS``).
    fresh: int = 0
    #: Set by the nemesis once every fault is over: the clients run until then (the nemesis is bounded).
    healed: bool = False


class LLMCalls(ScriptedLLM):
    """The scripted LLM, answering each server incarnation on a path of its own (``/<label>/v1/...``), so a
    call is known to come from a process that was later killed (its run may legitimately happen again)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.facts = lambda kind, messages: [f"fact: {messages[0]['content'][0]['text']}"]
        self.decide = add_all

    def app(self) -> Any:
        app = super().app()
        app.router.add_post("/{label}/v1/chat/completions", self.labelled)
        return app

    async def labelled(self, request: Any) -> Any:
        body = await request.json()
        self.calls.append((request.match_info["label"], body))
        return await self.complete(request)

    def counted(self, killed: set[str]) -> tuple[Counter[str], Counter[str], Counter[str]]:
        """Per message text: extraction calls, decision calls, and calls from incarnations later killed."""
        extractions, decisions, interrupted = Counter[str](), Counter[str](), Counter[str]()
        for label, body in self.calls:
            system, user = body["messages"][0]["content"], body["messages"][1]["content"]
            if "memory store" in system:
                texts = [fact.removeprefix("fact: ") for fact in payload_of(user)["retrieved_facts"]]
                decisions.update(texts)
            elif "title conversations" not in system:
                texts = [payload_of(user)[0]["content"][0]["text"]]
                extractions.update(texts)
            else:
                continue
            if label in killed:
                interrupted.update(texts)
        return extractions, decisions, interrupted


def outcome_of(status: int) -> str:
    return c.OK if status < 300 else c.FAIL if status < 500 else c.INFO


async def call(
    http: aiohttp.ClientSession,
    history: c.History,
    op: c.Op,
    method: str,
    url: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Send one op and record its outcome: a connection never made is a definite failure, a timeout or a
    connection lost mid-request is indeterminate."""
    try:
        async with http.request(method, url, json=body, headers=headers) as response:
            text = await response.text()
            answer = json.loads(text) if text.startswith("{") else {}
            history.complete(op, outcome_of(response.status), response.status, "" if response.ok else text[:200])
            return answer if isinstance(answer, dict) else {}
    except aiohttp.ClientConnectorError as error:
        history.complete(op, c.FAIL, detail=f"{NOT_CONNECTED}: {error}")
    except (TimeoutError, aiohttp.ClientError) as error:
        history.complete(op, c.INFO, detail=f"{type(error).__name__}: {error}")
    return {}


async def client(run: Run, process: int) -> None:
    rng = random.Random(SEED * 1000 + process)
    history = run.history
    timeout = aiohttp.ClientTimeout(total=CLIENT_TIMEOUT)
    connector = aiohttp.TCPConnector(force_close=True)  # a kill never leaves a stale pooled connection
    async with aiohttp.ClientSession(headers=run.headers, timeout=timeout, connector=connector) as http:
        n = done = 0
        while done < OPS_PER_CLIENT and (time.monotonic() < run.deadline or not run.healed):
            n += 1
            server = (process + n) % len(run.urls)
            base = run.urls[server]
            kind = rng.choices(list(MIX), weights=list(MIX.values()))[0]
            if kind == c.AGENTIC_DELETE and not run.working:
                kind = c.AGENTIC_ADD
            tag = f"p{process}-{n}"
            if kind == c.WRITE:
                duel = rng.random() < DUEL_SHARE
                key, region = rng.choice(DUEL_IDS if duel else RECORD_IDS), rng.choice(("USA", "DEU"))
                writers = [(process, server, region, run.headers)]
                if duel:  # a second writer at the same moment: another process, server and region
                    other = "DEU" if region == "USA" else "USA"
                    who = run.rival if rng.random() < 0.5 else run.headers
                    writers.append((process + CLIENTS, (server + 1) % len(run.urls), other, who))
                ops = []
                for writer, at, where, _ in writers:
                    text = f"{key} {tag}/{writer} customer called about invoice {rng.randint(0, 999)}"
                    ops.append(history.invoke(writer, kind, key, text, at, region=where))
                await asyncio.gather(
                    *(
                        call(
                            http,
                            history,
                            op,
                            "POST",
                            run.urls[at] + HISTORIES,
                            {
                                "records": [
                                    {"record_id": key, "record_type": "voice", "region": where, "text": op.value}
                                ]
                            },
                            who,
                        )
                        for op, (_, at, where, who) in zip(ops, writers)
                    )
                )
                op = ops[0]
            elif kind == c.DELETE:
                key = rng.choice(RECORD_IDS + DUEL_IDS)
                op = history.invoke(process, kind, key, None, server)
                await call(
                    http,
                    history,
                    op,
                    "DELETE",
                    f"{base}{HISTORIES}/{key}",
                    None,
                    run.admin if key in DUEL_IDS else None,
                )
            elif kind == c.MESSAGE:
                memory_id, text = rng.choice(run.memory_ids), f"message {tag} router light is red"
                op = history.invoke(process, kind, memory_id, text, server)
                answer = await call(
                    http, history, op, "POST", f"{base}{MEMORY}/{memory_id}/messages", {"input": text, "response": "ok"}
                )
                op.detail = answer.get("message_id", op.detail)
            elif kind == c.AGENTIC_ADD and run.fresh < FRESH_CONTAINERS:
                run.fresh += 1
                op = await fresh_adds(run, http, process, server, tag)
            elif kind == c.AGENTIC_ADD:
                text, user = f"agentic {tag} drinks tea", rng.choice(USERS)
                op = await agentic_add(run, http, process, server, run.container_id, text, user, f"session-{process}")
            else:
                working_id, text, container_id = rng.choice(run.working)
                op = history.invoke(process, kind, working_id, text, server)
                url = f"{base}{CONTAINERS}/{container_id}/memories/working/{working_id}"
                await call(http, history, op, "DELETE", url)
            if op.detail.startswith(NOT_CONNECTED):  # a server down: recorded, but no op of the budget
                await asyncio.sleep(1.0)
            else:
                done += 1
                await asyncio.sleep(rng.uniform(0.3, 0.9))  # paced: the ops span the faults


async def agentic_add(
    run: Run,
    http: aiohttp.ClientSession,
    process: int,
    server: int,
    container_id: str,
    text: str,
    user: str,
    session: str,
) -> c.Op:
    """One infer add (its op, recorded); the working memory of an acknowledged one may be deleted later."""
    op = run.history.invoke(process, c.AGENTIC_ADD, user, text, server)
    body = {"messages": conversation(text), "infer": True, "namespace": {"user_id": user, "session_id": session}}
    url = f"{run.urls[server]}{CONTAINERS}/{container_id}/memories"
    answer = await call(http, run.history, op, "POST", url, body)
    if op.outcome == c.OK:
        op.detail = answer["working_memory_id"]
        run.working.append((op.detail, text, container_id))
    return op


async def fresh_adds(run: Run, http: aiohttp.ClientSession, process: int, server: int, tag: str) -> c.Op:
    """A container of a new index prefix, then an add into it through each of two processes at once: both
    runs find its long-term index missing or still being made by the other (the container's create is an op
    of its own, unchecked; the adds are checked as any)."""
    op = run.history.invoke(process, c.AGENTIC_CONTAINER, tag, None, server)
    body = {"name": tag, "configuration": {**SEMANTIC_CONFIG, "index_prefix": f"fresh-{tag}"}}
    answer = await call(http, run.history, op, "POST", f"{run.urls[server]}{CONTAINERS}/_create", body)
    if op.outcome != c.OK:
        return op
    container_id = answer["memory_container_id"]
    servers = (server, (server + 1) % len(run.urls))
    adds = await asyncio.gather(
        *(
            agentic_add(run, http, process, at, container_id, f"agentic {tag}/{m} drinks tea", user, f"session-{tag}")
            for m, (at, user) in enumerate(zip(servers, USERS))
        )
    )
    return adds[0]


async def nemesis(run: Run, group: ServerGroup, nodes: dict[str, Any], llm_env: Any, killed: set[str]) -> None:
    """At fixed times: SIGKILL one server (seeded choice) and restart it on its port; pause DEU for 10 s."""
    rng = random.Random(SEED)
    history = run.history
    victim = rng.randrange(SERVERS)
    try:
        await asyncio.sleep(6.0)
        killed.add(f"s{victim}")
        history.note("kill", server=victim, pid=group.kill(victim))
        await asyncio.sleep(2.0)
        group.servers[victim].env.update(llm_env(f"s{victim}r"))  # the new incarnation's LLM calls are told apart
        await group.restart(victim)
        history.note("restarted", server=victim)
        await asyncio.sleep(max(0.0, 24.0 - history.now()))
        deu = nodes["DEU"]
        with paused(deu):
            assert await asyncio.to_thread(jvm_state, deu) == "T", "SIGSTOP did not stop the DEU node's JVM"
            history.note("pause", node="DEU", pid=deu.pid)
            await asyncio.sleep(10.0)
        history.note("resume", node="DEU")
    finally:
        run.deadline = max(run.deadline, time.monotonic() + 10.0)  # the clients also work on the healed system
        run.healed = True


async def setup(urls: list[str], headers: dict[str, str]) -> tuple[list[str], str]:
    async with aiohttp.ClientSession(headers=headers) as http:
        memory_ids = []
        for n in range(MEMORIES):
            async with http.post(f"{urls[n % len(urls)]}{MEMORY}", json={"name": f"memory {n}"}) as response:
                assert response.status == 200, await response.text()
                memory_ids.append((await response.json())["memory_id"])
        body = {"name": "jepsen", "configuration": SEMANTIC_CONFIG}
        async with http.post(f"{urls[0]}{CONTAINERS}/_create", json=body) as response:
            assert response.status == 200, await response.text()
            container_id = (await response.json())["memory_container_id"]
    return memory_ids, container_id


def queues(usa: str, prefix: str) -> dict[str, int]:
    return {
        "bridge outbox": count(usa, f"{prefix}-memory-outbox"),
        "agentic infer jobs": count(usa, f"{prefix}-ml-am-infer-jobs"),
        "agentic pending embeddings": count(
            usa, f"{prefix}-ml-am-*-memory-long-term*", {"term": {"embedding_pending": True}}
        ),
    }


async def drain(urls: list[str], usa: str, prefix: str, timeout: float = 120.0) -> dict[str, int]:
    """Until the queues in OpenSearch are empty and every server reports no bridge backlog (bounded)."""
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as http:
        while True:
            left = await asyncio.to_thread(queues, usa, prefix)
            for n, url in enumerate(urls):
                async with http.get(url + "/_health") as response:
                    left[f"server {n} bridge backlog"] = int((await response.json())["details"]["bridge"]["backlog"])
            if not any(left.values()) or time.monotonic() > deadline:
                return left
            await asyncio.sleep(1.0)


def stored_records(regions: dict[str, str], prefix: str) -> dict[str, dict[str, list[c.Copy]]]:
    """record_type -> record_id -> its copies, one per region holding chunks of it, read from OpenSearch."""
    chunks: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    fields = ("record_id", "record_type", "region", "text", "generation", "chunk_index", "chunk_total")
    for region, url in regions.items():
        for doc in search_all(url, f"{prefix}.all", {"match_all": {}}, fields):
            assert doc["region"] == region, doc
            chunks[(doc["record_type"], doc["record_id"], region)].append(doc)
    found: dict[str, dict[str, list[c.Copy]]] = defaultdict(lambda: defaultdict(list))
    for (record_type, record_id, region), docs in sorted(chunks.items()):
        text = " ".join(d["text"] for d in sorted(docs, key=lambda d: d["chunk_index"]))
        copy = c.Copy(region, text, len(docs), len({d["generation"] for d in docs}))
        found[record_type][record_id].append(copy)
    return found


async def served(urls: list[str], headers: dict[str, str], record_type: str, record_id: str, n: int) -> list[c.Copy]:
    params = {"q": "customer", "record_type": record_type, "top_k": "100", "filter[record_id]": record_id}
    async with aiohttp.ClientSession(headers=headers) as http:
        async with http.get(urls[n % len(urls)] + HISTORIES, params=params) as response:
            answer = await response.json()
            assert response.status == 200 and not answer["meta"].get("failed_regions"), answer
            return [c.Copy(hit["region"], hit["text"]) for hit in answer["data"]]


def agentic_state(usa: str, prefix: str) -> tuple[dict[str, list[str]], Counter[str]]:
    working: dict[str, list[str]] = defaultdict(list)
    for doc in search_all(usa, f"{prefix}-ml-am-*-memory-working", {"match_all": {}}, ["messages"]):
        working[doc["messages"][0]["content"][0]["text"]].append(doc["_id"])
    long_term = Counter(
        doc["memory"].removeprefix("fact: ")
        for doc in search_all(usa, f"{prefix}-ml-am-*-memory-long-term*", {"match_all": {}}, ["memory"])
    )
    return working, long_term


async def test_consistency_under_kills_and_pauses(tmp_path: Path, opensearch_nodes, server_env, aiohttp_server):
    usa_node, deu_node = opensearch_nodes
    regions = {"USA": usa_node.url, "DEU": deu_node.url}
    prefix = f"jepsen-{uuid.uuid4().hex[:8]}"  # the nodes are shared with the rest of the session
    llm = LLMCalls()
    llm_url = str((await aiohttp_server(llm.app())).make_url("")).rstrip("/")

    def llm_env(label: str) -> dict[str, str]:
        return {"MEMORY_PLUGIN_AGENTIC_LLM_URL": f"{llm_url}/{label}/v1/chat/completions"}

    data_dir = tmp_path / "data"
    headers = key_headers(data_dir)
    rival, admin = key_headers(data_dir, "org-1", "bob"), key_headers(data_dir, "org-1", None)
    env = {
        **server_env,
        "MEMORY_PLUGIN_BRIDGE_ENABLED": "true",
        "MEMORY_PLUGIN_BRIDGE_RETRY_MAX_SECONDS": "1",
        "MEMORY_PLUGIN_AGENTIC_LLM_API_KEY": "sk-test",
    }
    config = scale_out_config(tmp_path / "scale-out.toml", regions, prefix)
    group = ServerGroup(SERVERS, data_dir, env, config)
    for n, server in enumerate(group.servers):
        server.env.update(llm_env(f"s{n}"))
    history = c.History()
    killed: set[str] = set()
    path = tmp_path / "history.jsonl"
    faults: asyncio.Task[None] | None = None
    try:
        await asyncio.to_thread(group.start_all)
        memory_ids, container_id = await setup(group.urls, headers)
        history = c.History()  # times count from here, once the servers are up
        deadline = time.monotonic() + WORKLOAD_SECONDS
        run = Run(group.urls, headers, rival, admin, memory_ids, container_id, history, deadline)
        faults = asyncio.create_task(nemesis(run, group, {"USA": usa_node, "DEU": deu_node}, llm_env, killed))
        await asyncio.gather(*(client(run, p) for p in range(CLIENTS)))
        await faults  # healed: the node continued, the killed server back
        history.note("workload done", ops=len(history.ops))
        assert all(group.running(n) for n in range(SERVERS)), group.log_tails()
        left = await drain(group.urls, usa_node.url, prefix)
        history.note("drained", queues=left)

        records = await asyncio.to_thread(stored_records, regions, prefix)
        keys = RECORD_IDS + DUEL_IDS
        voice = {key: records["voice"].get(key, []) for key in keys}
        server_view = {key: await served(group.urls, admin, "voice", key, n) for n, key in enumerate(keys)}
        messages: dict[str, list[str]] = defaultdict(list)
        for doc in await asyncio.to_thread(
            search_all, usa_node.url, f"{prefix}-memory-message", {"match_all": {}}, ["input"]
        ):
            messages[doc["input"]].append(doc["_id"])
        acknowledged = [op.detail for op in history.ops if op.kind == c.MESSAGE and op.outcome == c.OK]
        searchable = {
            message_id: len(await served(group.urls, headers, "ai_pipeline_storage", message_id, n))
            for n, message_id in enumerate(acknowledged)
        }
        working, long_term = await asyncio.to_thread(agentic_state, usa_node.url, prefix)
        extractions, decisions, interrupted = llm.counted(killed)
    finally:
        if faults is not None and not faults.done():  # a client failed mid-fault: continue the node first
            faults.cancel()
            with contextlib.suppress(BaseException):
                await faults
        group.close()
        history.write_jsonl(path)
    ops = history.ops
    anomalies = [
        *c.check_registers(ops, voice),
        *c.check_views_agree(voice, server_view),
        *c.check_messages(ops, messages, records["ai_pipeline_storage"], searchable),
        *c.check_agentic(ops, working, long_term, extractions, decisions, interrupted),
        *c.check_drained(left),
    ]
    print(c.report(anomalies, history, path))
    print(json.dumps(history.events))
    assert not anomalies, c.report(anomalies, history, path)


@pytest.fixture(scope="module")
def server_env() -> dict[str, str]:
    from embedder import ensure_default_model

    return {"MEMORY_PLUGIN_MODEL_DIR": str(ensure_default_model())}
