"""``/_health`` and ``/_metrics`` say which process answered (several may serve one port or one cluster),
and the backlog as the stores count it."""

from __future__ import annotations

import os
import socket

from memory_plugin.app import create_app


async def test_health_names_the_process_and_the_backlog(aiohttp_client, settings, embedder):  # type: ignore[no-untyped-def]
    client = await aiohttp_client(
        create_app(settings.replace(node={"name": "node-7"}, bridge={"enabled": True}), embedder=embedder)
    )
    body = await (await client.get("/_health")).json()
    assert body["process"] == {"hostname": socket.gethostname(), "pid": os.getpid(), "node_name": "node-7"}
    assert body["backlog"]["agentic_pending_embeddings"] == 0 and body["backlog"]["agentic_infer_jobs"] == 0
    assert body["backlog"]["outbox"] == body["details"]["bridge"]


async def test_metrics_name_the_process_and_the_agentic_backlog(aiohttp_client, settings, embedder):  # type: ignore[no-untyped-def]
    client = await aiohttp_client(
        create_app(settings.replace(auth={"metrics_token": "op"}, node={"name": "node-7"}), embedder=embedder)
    )
    text = await (await client.get("/_metrics", headers={"Authorization": "Bearer op"})).text()
    assert (
        f'memory_plugin_process{{hostname="{socket.gethostname()}",node_name="node-7",pid="{os.getpid()}"}} 1.0' in text
    )
    assert "memory_plugin_agentic_pending_embeddings 0.0" in text
    assert "memory_plugin_agentic_infer_jobs 0.0" in text
