"""Two writers at once (issue 12, part B): acknowledged writes are never lost, ownership holds, one copy per id."""

from __future__ import annotations

import asyncio
from typing import Any

from memory_plugin.histories.routes import HISTORIES

BASE = "/v2/ai/conversation_histories"


def record(record_id: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"record_id": record_id, "record_type": "voice", "text": text, **extra}


async def post(client, caller, *records: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    response = await client.post(BASE, json={"records": list(records)}, headers=caller.headers)
    return response.status, await response.json()


async def copies(client, admin, record_id: str, q: str = "call") -> list[dict[str, Any]]:
    """Every stored copy of ``record_id`` (found by ``q``), from every region."""
    params = {"q": q, "record_type": "voice", "top_k": "100", "filter[record_id]": record_id}
    response = await client.get(BASE, params=params, headers=admin.headers)
    body = await response.json()
    assert response.status == 200 and "failed_regions" not in body["meta"], body
    return list(body["data"])


async def test_two_users_racing_for_one_new_record_id_cannot_both_win(client, alice, bob, admin):
    assert (await post(client, admin, record("bystander", "call that must stay")))[0] == 201
    for round_ in range(5):
        record_id = f"contested-{round_}"
        (status_a, body_a), (status_b, body_b) = await asyncio.gather(
            post(client, alice, record(record_id, "call by alice")),
            post(client, bob, record(record_id, "call by bob")),
        )
        assert sorted((status_a, status_b)) == [201, 400], (body_a, body_b)
        winner, loser_body = ("alice", body_b) if status_a == 201 else ("bob", body_a)
        (error,) = loser_body["errors"]
        assert error["source"]["parameter"] == "records[0].record_id", loser_body
        assert "already used by another user" in error["detail"], loser_body
        (stored,) = await copies(client, admin, record_id)
        assert (stored["user_id"], stored["text"]) == (winner, f"call by {winner}")
    assert [hit["text"] for hit in await copies(client, admin, "bystander")] == ["call that must stay"]


async def test_one_record_id_sent_to_two_regions_at_once_leaves_one_copy(client, admin):
    for round_ in range(5):
        record_id = f"moving-{round_}"
        results = await asyncio.gather(
            post(client, admin, record(record_id, "call kept in the USA", region="USA")),
            post(client, admin, record(record_id, "call kept in Germany", region="DEU")),
        )
        assert [status for status, _ in results] == [201, 201], results
        (stored,) = await copies(client, admin, record_id)
        assert stored["region"] in ("USA", "DEU")
        assert stored["text"] == {"USA": "call kept in the USA", "DEU": "call kept in Germany"}[stored["region"]]
    assert len(client.app[HISTORIES].claims) == 0  # no lock outlives its writers
