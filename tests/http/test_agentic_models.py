"""Agentic memory with the organisations' own registered models: the ml-commons documentation's flow, unchanged.

Each organisation creates a connector to its own OpenAI-compatible server with its own key,
registers the LLM, creates a container whose ``llm_id`` is that model, adds messages with
``infer: true``, and finds the inferred facts by semantic search.  The operator's default LLM
is not configured at all, so every LLM call here is one an organisation pays for.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from memory_plugin.agentic.routes import AGENTIC
from memory_plugin.app import create_app
from tests.http.test_agentic import conversation
from tests.support.agentic_llm import SEMANTIC_CONFIG, ScriptedLLM
from tests.support.polling import eventually
from tests.support.scripted_openai import DIMENSION, ScriptedOpenAI, embedding_connector, embedding_of

#: Ranking is the point of the last step, and container dimensions are checked against the real model.
pytestmark = pytest.mark.model

ML = "/_plugins/_ml"
CONTAINERS = ML + "/memory_containers"
LOOPBACK = r"^http://127\.0\.0\.1:.*$"
ALL = {"query": {"match_all": {}}}


def connector(url: str, key: str) -> dict[str, Any]:
    """The docs' OpenAI chat connector, with ml-commons' agentic memory parameters in the messages."""
    return {
        "name": "my LLM",
        "version": 1,
        "protocol": "http",
        "parameters": {"model": "gpt-4o-mini"},
        "credential": {"openAI_key": key},
        "actions": [
            {
                "action_type": "predict",
                "method": "POST",
                "url": f"{url}/v1/chat/completions",
                "headers": {"Authorization": "Bearer ${credential.openAI_key}"},
                "request_body": '{ "model": "${parameters.model}", "messages": [{"role": "system", "content": '
                '"${parameters.system_prompt}"}, {"role": "user", "content": "${parameters.user_prompt}"}] }',
            }
        ],
    }


async def call(api, caller, method: str, path: str, body: Any = None, status: int = 200) -> Any:
    response = await api.request(method, path, json=body, headers=caller.headers)
    payload = await response.json()
    assert response.status == status, payload
    return payload


async def registered_llm(api, caller, url: str, key: str) -> str:
    connector_id = (await call(api, caller, "POST", ML + "/connectors/_create", connector(url, key)))["connector_id"]
    body = {"name": "llm", "function_name": "remote", "connector_id": connector_id}
    model_id = (await call(api, caller, "POST", ML + "/models/_register?deploy=true", body))["model_id"]
    assert (await call(api, caller, "GET", f"{ML}/models/{model_id}"))["model_state"] == "DEPLOYED"
    return model_id


async def registered_embeddings(api, caller, url: str, key: str) -> str:
    """ml-commons' documented OpenAI embedding connector, registered (not deployed: the first call deploys it)."""
    connector_id = (await call(api, caller, "POST", ML + "/connectors/_create", embedding_connector(url, key)))[
        "connector_id"
    ]
    body = {"name": "embeddings", "function_name": "remote", "connector_id": connector_id}
    return str((await call(api, caller, "POST", ML + "/models/_register", body))["model_id"])


FACTS = ["Bob drinks green tea every morning", "Dana keeps a red bicycle"]


async def remote_embedding_container(api, caller, llm: ScriptedLLM, embeddings: ScriptedOpenAI, **config: Any) -> str:
    """A container whose LLM and embedding model are the caller's registered remote models; one inferring add."""
    llm.facts = lambda kind, messages: FACTS
    llm_id = await registered_llm(api, caller, llm.url, "sk-chat")
    embedding_id = await registered_embeddings(api, caller, embeddings.url, "sk-embed")
    configuration = {
        **SEMANTIC_CONFIG,
        "llm_id": llm_id,
        "embedding_model_id": embedding_id,
        "embedding_dimension": DIMENSION,
        **config,
    }
    body = {"name": "remote", "configuration": configuration}
    cid = str((await call(api, caller, "POST", CONTAINERS + "/_create", body))["memory_container_id"])
    add = {"messages": conversation("about my friends", "Noted!"), "namespace": {"user_id": "u"}, "infer": True}
    await call(api, caller, "POST", f"{CONTAINERS}/{cid}/memories", add)
    await api.app[AGENTIC].settled()
    return cid


async def check_remote_embeddings(api, caller, cid: str, embeddings: ScriptedOpenAI) -> None:
    """Memories and queries are embedded by the remote model, with the organisation's key, unprefixed."""
    for fact in FACTS:
        hits = await call(
            api, caller, "POST", f"{CONTAINERS}/{cid}/memories/long-term/_semantic_search", {"query": fact}
        )
        top = hits["hits"]["hits"][0]
        # the query is embedded as the memory was: the same float32 unit vector, so cosine 1 and score (1+1)/2,
        # within float32 rounding of three products
        assert top["_source"]["memory"] == fact and abs(top["_score"] - 1.0) < 1e-6
        shown = await call(api, caller, "GET", f"{CONTAINERS}/{cid}/memories/long-term/{top['_id']}")
        expected = np.asarray(embedding_of(fact)) / np.linalg.norm(embedding_of(fact))
        assert np.allclose(shown["memory_embedding"], expected, atol=1e-6)
    inputs = [r.body["input"] for r in embeddings.requests]
    assert sorted(FACTS) in [sorted(i) for i in inputs]  # the memories, in one background batch
    assert all([fact] in inputs for fact in FACTS)  # each fact, to find similar memories, and each query
    assert {r.authorization for r in embeddings.requests} == {"Bearer sk-embed"}
    assert not any(text.startswith(("query: ", "passage: ")) for i in inputs for text in i)


@pytest.fixture
async def tenants(aiohttp_client, aiohttp_server, settings, embedder, alice, carol):  # type: ignore[no-untyped-def]
    """The app with no operator LLM, and one scripted LLM server per organisation."""
    llms = [ScriptedLLM(), ScriptedLLM()]
    for llm in llms:
        llm.url = str((await aiohttp_server(llm.app())).make_url("")).rstrip("/")  # type: ignore[attr-defined]
    trusting = settings.replace(ml={"trusted_endpoints_regex": (LOOPBACK,), "allow_private_addresses": True})
    api = await aiohttp_client(create_app(trusting, embedder=embedder))
    return api, llms


async def test_each_organisation_infers_with_its_own_registered_llm(tenants, alice, carol):
    api, (alices_llm, carols_llm) = tenants
    facts = {"alice": ["Bob drinks green tea every morning"], "carol": ["Dana keeps a red bicycle"]}
    alices_llm.facts = lambda kind, messages: facts["alice"]
    carols_llm.facts = lambda kind, messages: facts["carol"]
    found = {}
    for caller, llm, user in ((alice, alices_llm, "alice"), (carol, carols_llm, "carol")):
        model_id = await registered_llm(api, caller, llm.url, f"sk-{user}")
        config = {**SEMANTIC_CONFIG, "llm_id": model_id}
        cid = (await call(api, caller, "POST", CONTAINERS + "/_create", {"name": "agent", "configuration": config}))[
            "memory_container_id"
        ]
        added = await call(
            api,
            caller,
            "POST",
            f"{CONTAINERS}/{cid}/memories",
            {"messages": conversation("something personal", "Noted!"), "namespace": {"user_id": "u"}, "infer": True},
        )
        assert added["session_id"]  # llm_id is set: the organisation's LLM titled the session
        await api.app[AGENTIC].settled()
        query = {"query": facts[user][0].split()[1] + " " + facts[user][0].split()[-1]}
        hits = await call(api, caller, "POST", f"{CONTAINERS}/{cid}/memories/long-term/_semantic_search", query)
        found[user] = [hit["_source"]["memory"] for hit in hits["hits"]["hits"]]
    assert found == facts
    # every LLM call went to its organisation's server, with its organisation's key, and nowhere else
    assert alices_llm.api_keys and set(alices_llm.api_keys) == {"Bearer sk-alice"}
    assert carols_llm.api_keys and set(carols_llm.api_keys) == {"Bearer sk-carol"}
    # ml-commons' prompts reach the remote model as its system_prompt and user_prompt, escaped into the JSON
    extraction = next(r for r in alices_llm.requests if "facts" in r["messages"][0]["content"])
    assert "Analyze the following conversation" in extraction["messages"][1]["content"]


async def test_another_organisations_model_id_is_not_yours(tenants, alice, carol):
    api, (alices_llm, _) = tenants
    alices_model = await registered_llm(api, alice, alices_llm.url, "sk-alice")
    config = {**SEMANTIC_CONFIG, "llm_id": alices_model}
    cid = (await call(api, carol, "POST", CONTAINERS + "/_create", {"name": "agent", "configuration": config}))[
        "memory_container_id"
    ]
    body = {"messages": conversation("hi", "hello"), "namespace": {"user_id": "u"}, "infer": True}
    refused = await call(api, carol, "POST", f"{CONTAINERS}/{cid}/memories", body, status=400)
    assert refused["error"]["reason"].startswith("infer=true needs an LLM connector")
    assert alices_llm.api_keys == []  # alice's key was never used for carol


async def test_a_spent_budget_is_a_429_and_calls_are_counted_per_organisation(
    aiohttp_client, aiohttp_server, settings, embedder, alice, carol
):
    llm = ScriptedLLM()
    llm.raw_content = "fine"
    llm.url = str((await aiohttp_server(llm.app())).make_url("")).rstrip("/")  # type: ignore[attr-defined]
    limited = settings.replace(
        ml={"trusted_endpoints_regex": (LOOPBACK,), "allow_private_addresses": True, "org_calls_per_minute": 3},
        auth={"metrics_token": "operator-secret"},
    )
    api = await aiohttp_client(create_app(limited, embedder=embedder))
    model_id = await registered_llm(api, alice, llm.url, "sk-alice")
    carols = await registered_llm(api, carol, llm.url, "sk-carol")
    body = {"parameters": {"system_prompt": "s", "user_prompt": "u"}}
    answers = [await api.post(f"{ML}/models/{model_id}/_predict", json=body, headers=alice.headers) for _ in range(5)]
    assert [a.status for a in answers] == [200, 200, 200, 429, 429]
    throttled = await answers[-1].json()
    assert throttled["status"] == 429 and throttled["error"]["type"] == "status_exception"
    assert throttled["error"]["reason"].startswith("Request is throttled at organization level")
    assert (await api.post(f"{ML}/models/{carols}/_predict", json=body, headers=carol.headers)).status == 200
    assert len(llm.requests) == 4  # a refused call never reaches the remote model
    metrics = await (await api.get("/_metrics", headers={"Authorization": "Bearer operator-secret"})).text()
    assert 'memory_plugin_ml_remote_calls_total{organization="org-1",outcome="ok"} 3.0' in metrics
    assert 'memory_plugin_ml_remote_calls_total{organization="org-1",outcome="throttled"} 2.0' in metrics
    assert 'memory_plugin_ml_remote_calls_total{organization="org-2",outcome="ok"} 1.0' in metrics


async def test_concurrent_calls_beyond_the_budget_are_refused_not_queued(
    aiohttp_client, aiohttp_server, settings, embedder, alice
):
    llm = ScriptedLLM()
    llm.hang = {"SEMANTIC"}  # extraction prompts wait until released
    llm.url = str((await aiohttp_server(llm.app())).make_url("")).rstrip("/")  # type: ignore[attr-defined]
    limited = settings.replace(
        ml={"trusted_endpoints_regex": (LOOPBACK,), "allow_private_addresses": True, "org_concurrent_calls": 2}
    )
    api = await aiohttp_client(create_app(limited, embedder=embedder))
    model_id = await registered_llm(api, alice, llm.url, "sk-alice")
    hanging = {"parameters": {"system_prompt": "extract facts", "user_prompt": "```json\n[{}, {}]\n```"}}
    url = f"{ML}/models/{model_id}/_predict"
    waiting = [asyncio.create_task(api.post(url, json=hanging, headers=alice.headers)) for _ in range(2)]
    await eventually(lambda: len(llm.requests) >= 2, "both calls reach the LLM")
    third = await api.post(url, json=hanging, headers=alice.headers)
    assert third.status == 429 and "at once" in (await third.json())["error"]["reason"]
    llm.release.set()
    assert [(await w).status for w in waiting] == [200, 200]


async def test_a_registered_llm_that_times_out_is_recorded_once_not_retried(
    aiohttp_client, aiohttp_server, settings, embedder, alice, carol
):
    """A remote model's timeout (or any failure of its call) is the run's error in its history, as the default
    LLM's failure is: not retried as an internal error, which held every tenant's queue for five timeouts."""
    hanging, working = ScriptedLLM(), ScriptedLLM()
    hanging.hang = {"SEMANTIC"}
    working.facts = lambda kind, messages: ["Dana keeps a red bicycle"]
    for llm in (hanging, working):
        llm.url = str((await aiohttp_server(llm.app())).make_url("")).rstrip("/")  # type: ignore[attr-defined]
    trusting = settings.replace(
        # the working LLM must answer within it on a loaded machine; the hanging one waits it out
        ml={"trusted_endpoints_regex": (LOOPBACK,), "allow_private_addresses": True, "connector_timeout": 5.0}
    )
    api = await aiohttp_client(create_app(trusting, embedder=embedder))
    containers = {}
    for caller, llm in ((alice, hanging), (carol, working)):
        config = {**SEMANTIC_CONFIG, "llm_id": await registered_llm(api, caller, llm.url, "sk")}
        body = {"name": "agent", "configuration": config}
        containers[caller.user_id] = (await call(api, caller, "POST", CONTAINERS + "/_create", body))[
            "memory_container_id"
        ]
    for caller in (alice, carol):  # alice's run first in the queue
        add = {"messages": conversation("hi", "hello"), "namespace": {"user_id": "u", "session_id": "s"}, "infer": True}
        await call(api, caller, "POST", f"{CONTAINERS}/{containers[caller.user_id]}/memories", add)
    await api.app[AGENTIC].settled()
    history = f"{CONTAINERS}/{containers['alice']}/memories/history/_search"
    [record] = [hit["_source"] for hit in (await call(api, alice, "POST", history, ALL))["hits"]["hits"]]
    assert record["error"] == "the remote model did not answer within 5 s"
    assert len(hanging.requests) == 1, "called once, never retried"
    long_term = f"{CONTAINERS}/{containers['carol']}/memories/long-term/_search"
    assert [h["_source"]["memory"] for h in (await call(api, carol, "POST", long_term, ALL))["hits"]["hits"]] == [
        "Dana keeps a red bicycle"
    ]
    hanging.release.set()


async def test_a_container_embeds_with_its_registered_remote_embedding_model(tenants, embeddings, alice):
    api, (llm, _) = tenants
    cid = await remote_embedding_container(api, alice, llm, embeddings)
    await check_remote_embeddings(api, alice, cid, embeddings)


async def test_a_remote_model_of_another_dimension_than_declared_adds_nothing_and_says_why(tenants, embeddings, alice):
    api, (llm, _) = tenants
    cid = await remote_embedding_container(api, alice, llm, embeddings, embedding_dimension=DIMENSION + 1)
    path = f"{CONTAINERS}/{cid}/memories"
    assert (await call(api, alice, "POST", f"{path}/long-term/_search", {"query": {"match_all": {}}}))["hits"][
        "hits"
    ] == []
    history = await call(api, alice, "POST", f"{path}/history/_search", {"query": {"match_all": {}}})
    [record] = [hit["_source"] for hit in history["hits"]["hits"]]
    assert record["error"].endswith(
        f"answered {DIMENSION}-dimensional vectors; the memory container's embedding_dimension is {DIMENSION + 1}"
    )
    search = {"query": FACTS[0]}
    failed = await call(api, alice, "POST", f"{path}/long-term/_semantic_search", search, status=502)
    assert "embedding_dimension" in failed["error"]["reason"]


async def test_a_remote_embedding_model_decides_the_dimension_and_only_its_owner_names_it(
    tenants, embeddings, alice, carol
):
    api, _ = tenants
    model_id = await registered_embeddings(api, alice, embeddings.url, "sk-embed")
    embedding = {"embedding_model_type": "TEXT_EMBEDDING", "embedding_model_id": model_id}
    for dimension in (0, 16001):
        body = {"name": "c", "configuration": {**embedding, "embedding_dimension": dimension}}
        refused = await call(api, alice, "POST", CONTAINERS + "/_create", body, status=400)
        assert "between 1 and 16000" in refused["error"]["reason"]
    body = {"name": "c", "configuration": {**embedding, "embedding_dimension": 1536}}
    assert (await call(api, alice, "POST", CONTAINERS + "/_create", body))["status"] == "created"
    # to carol the id names nothing of hers: the built-in model, whose dimension rules
    refused = await call(api, carol, "POST", CONTAINERS + "/_create", body, status=400)
    assert "does not match the built-in embedding model" in refused["error"]["reason"]
