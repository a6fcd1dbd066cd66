"""``filter[...][in]`` with hundreds of values (issue 12, part B), on the embedded store.

The OpenSearch store's twin is in tests/opensearch/test_opensearch_regions.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from memory_plugin.histories.stores.filters import MAX_CONDITIONS, MAX_IN_VALUES

BASE = "/v2/ai/conversation_histories"


def record(record_id: str, user_id: str, language: str) -> dict[str, Any]:
    return {
        "record_id": record_id,
        "record_type": "voice",
        "text": f"call {record_id}",
        "user_id": user_id,
        "metadata": {"lang": language, "minutes": 7, "urgent": True},
    }


async def search(client, caller, **params: str) -> tuple[int, dict[str, Any]]:
    query = {"q": "call", "record_type": "voice", "top_k": "100", **params}
    response = await client.get(BASE, params=query, headers=caller.headers)
    return response.status, await response.json()


@pytest.fixture
async def stored(client, admin):
    records = [record("r-de", "u-1", "de"), record("r-fr", "u-2", "fr"), record("r-en", "u-3", "en")]
    response = await client.post(BASE, json={"records": records}, headers=admin.headers)
    assert response.status == 201


@pytest.mark.parametrize(
    ("name", "values", "expected"),
    [
        ("filter[lang][in]", [f"x{i}" for i in range(MAX_IN_VALUES - 2)] + ["de", "fr"], ["r-de", "r-fr"]),
        ("filter[user_id][in]", [str(i) for i in range(MAX_IN_VALUES - 1)] + ["u-3"], ["r-en"]),
        (
            "filter[minutes][in]",
            [str(i) for i in range(100, 100 + MAX_IN_VALUES - 1)] + ["7"],
            ["r-de", "r-en", "r-fr"],
        ),
        ("filter[urgent][in]", ["false"] * (MAX_IN_VALUES - 1) + ["true"], ["r-de", "r-en", "r-fr"]),
        # Dates are long: 500 of them is what fits in a URL.
        (
            "filter[record_created_at][in]",
            [f"{2000 + i % 20}-{1 + i % 12:02d}-{1 + i % 25:02d}" for i in range(500)],
            [],
        ),
    ],
)
async def test_the_largest_in_list_is_answered_by_every_region(client, admin, stored, name, values, expected):
    status, body = await search(client, admin, **{name: ",".join(values)})
    assert status == 200, body
    assert "failed_regions" not in body["meta"], body
    assert sorted(hit["record_id"] for hit in body["data"]) == expected


async def test_one_value_more_is_a_400_naming_the_parameter(client, admin, stored):
    values = ",".join(f"x{i}" for i in range(MAX_IN_VALUES + 1))
    status, body = await search(client, admin, **{"filter[lang][in]": values})
    assert status == 400, body
    (error,) = body["errors"]
    assert error["source"]["parameter"] == "filter[lang][in]"
    assert f"at most {MAX_IN_VALUES}" in error["detail"]


async def test_too_many_filter_parameters_are_a_400(client, admin, stored):
    params = [("q", "call"), ("record_type", "voice")] + [(f"filter[k{i}]", "v") for i in range(MAX_CONDITIONS + 1)]
    response = await client.get(BASE, params=params, headers=admin.headers)
    body = await response.json()
    assert response.status == 400, body
    assert body["errors"][0]["source"]["parameter"] == f"filter[k{MAX_CONDITIONS}]"


async def test_erasing_a_thousand_users_at_once_is_answered_not_retry_forever(client, admin, stored):
    users = [str(i) for i in range(MAX_IN_VALUES - 2)] + ["u-1", "u-2"]
    response = await client.delete(BASE, params={"filter[user_id][in]": ",".join(users)}, headers=admin.headers)
    body = await response.json()
    assert response.status == 200, body
    assert body["data"] == {
        "deleted_records": 2,
        "deleted_chunks": 2,
        "deleted_memories": 0,
        "deleted_messages": 0,
        "deleted_memory_containers": 0,
        "deleted_ml_documents": 0,
    }
    status, left = await search(client, admin)
    assert [hit["record_id"] for hit in left["data"]] == ["r-en"]
    too_many = ",".join(f"u{i}" for i in range(1100))
    response = await client.delete(BASE, params={"filter[user_id][in]": too_many}, headers=admin.headers)
    assert response.status == 400
    assert (await response.json())["errors"][0]["source"]["parameter"] == "filter[user_id][in]"
