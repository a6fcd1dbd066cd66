"""Interactions written through the memory API are searchable, and leave with their conversation."""

from __future__ import annotations

import pytest

from memory_plugin.app import create_app
from tests.support.bridge import indexed

# About search quality: the real model (tests/http/conftest.py).
pytestmark = pytest.mark.model

SEARCH = "/v2/ai/conversation_histories"


@pytest.fixture
async def bridged(aiohttp_client, settings, embedder, alice, bob):
    return await aiohttp_client(create_app(settings.replace(bridge={"enabled": True}), embedder=embedder))


async def hits(client, caller, q):
    response = await client.get(SEARCH, params={"q": q, "record_type": "ai_pipeline_storage"}, headers=caller.headers)
    assert response.status == 200
    return (await response.json())["data"]


async def test_interactions_become_records_and_leave_with_the_conversation(bridged, alice, bob):
    conversation_id = (
        await (
            await bridged.post("/_plugins/_ml/memory/conversation", json={"name": "c"}, headers=alice.headers)
        ).json()
    )["conversation_id"]
    created = await bridged.post(
        f"/_plugins/_ml/memory/conversation/{conversation_id}",
        json={
            "input": "How do I reset my router?",
            "response": "Hold the reset button for ten seconds.",
            "origin": "RAG Pipeline",
        },
        headers=alice.headers,
    )
    interaction_id = (await created.json())["interaction_id"]
    memory_id = (await (await bridged.post("/_plugins/_ml/memory", json={"name": "m"}, headers=alice.headers)).json())[
        "memory_id"
    ]
    await bridged.post(
        f"/_plugins/_ml/memory/{memory_id}/messages",
        json={"input": "Where is my parcel?", "response": "It ships tomorrow."},
        headers=alice.headers,
    )

    await indexed(bridged)
    (hit, *rest) = await hits(bridged, alice, "router reset button")
    assert hit["record_id"] == interaction_id
    assert hit["text"] == "How do I reset my router?\nHold the reset button for ten seconds."
    assert hit["metadata"] == {"conversation_id": conversation_id, "origin": "RAG Pipeline"}
    assert hit["user_id"] == "alice" and hit["record_type"] == "ai_pipeline_storage"
    assert await hits(bridged, bob, "router reset button") == [], "another user of the organisation sees nothing"

    await bridged.delete(f"/_plugins/_ml/memory/conversation/{conversation_id}", headers=alice.headers)
    await indexed(bridged)
    remaining = await hits(bridged, alice, "router reset button")
    assert interaction_id not in [h["record_id"] for h in remaining]
    assert [h["metadata"]["conversation_id"] for h in remaining] == [memory_id]
