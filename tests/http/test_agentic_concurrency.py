"""Concurrent updates of one container, working memory or session: every update answered 200 is kept.

Each update merges into the stored doc (a strategy without ``id`` is added, AGENTIC.md 3.3; a memory's
fields are replaced one by one), so two updates of the same doc must never both merge into the version
they read.  Runs on both backends (``backend``), on OpenSearch against a real node.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.http.test_agentic import call, container, conversation

pytestmark = pytest.mark.backends("embedded", "opensearch")

STRATEGY = {"type": "USER_PREFERENCE", "namespace": ["nI"]}
#: Each update sets one field; which one by its number, so that every field is updated by many at once.
WORKING_FIELDS = ("tags", "metadata", "structured_data", "binary_data")
SESSION_FIELDS = ("agents", "additional_info", "metadata", "summary")


def strategy_container(embedder: Any) -> dict[str, Any]:
    """A container with one strategy, of the embedding model the app has (the test double's or the real one)."""
    return {
        "embedding_model_type": "text_embedding",
        "embedding_model_id": "built-in",
        "embedding_dimension": embedder.dimension,
        "llm_id": "chat",
        "strategies": [STRATEGY],
    }


def field_value(name: str, n: int) -> Any:
    return f"text-{n}" if name in ("binary_data", "summary") else {f"k{n}": f"v{n}"}


async def updates(api, caller, path: str, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:  # type: ignore[no-untyped-def]
    """Send the updates all at once; every one answers 200."""
    return list(await asyncio.gather(*(call(api, caller, "PUT", path, body) for body in bodies)))


async def test_parallel_container_updates_each_add_their_strategy(api, alice, embedder):  # type: ignore[no-untyped-def]
    cid = await container(api, alice, strategy_container(embedder))
    answers = await updates(api, alice, f"/{cid}", [{"configuration": {"strategies": [STRATEGY]}}] * 50)
    assert len({answer["_version"] for answer in answers}) == 50
    strategies = (await call(api, alice, "GET", f"/{cid}"))["configuration"]["strategies"]
    assert len(strategies) == 51 and len({strategy["id"] for strategy in strategies}) == 51


async def _working_memory(api, alice, cid: str) -> str:  # type: ignore[no-untyped-def]
    added = await call(api, alice, "POST", f"/{cid}/memories", {"messages": conversation("hi")})
    return f"/{cid}/memories/working/{added['working_memory_id']}"


async def _session(api, alice, cid: str) -> str:  # type: ignore[no-untyped-def]
    await call(api, alice, "POST", f"/{cid}/memories/sessions", {"session_id": "s-1"})
    return f"/{cid}/memories/sessions/s-1"


@pytest.mark.parametrize(("make", "fields"), [(_working_memory, WORKING_FIELDS), (_session, SESSION_FIELDS)])
async def test_parallel_memory_updates_each_keep_their_field(api, alice, make, fields):  # type: ignore[no-untyped-def]
    path = await make(api, alice, await container(api, alice))
    bodies = [{fields[n % 4]: field_value(fields[n % 4], n)} for n in range(40)]
    answers = await updates(api, alice, path, bodies)
    assert len({answer["_version"] for answer in answers}) == 40
    doc = await call(api, alice, "GET", path)
    # Each field holds the value of one of the updates that set it, and none is missing.
    for name in fields:
        assert doc.get(name) in [body[name] for body in bodies if name in body], (name, doc)
