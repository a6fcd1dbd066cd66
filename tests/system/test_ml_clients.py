"""The real clients, unchanged, drive ml-commons' connector, model, task and predict APIs over a socket.

opensearch-py 3.2.0's ``plugins.ml`` (sync and async) and opensearch-py-ml 1.3.0's ``MLCommonClient`` talk
to one ``memory-plugin serve`` process with the real default model; its remote models are pointed, through
their connectors, at a scripted OpenAI-compatible server (tests/support/scripted_openai.py).  The only thing
added to the clients is the ``Authorization: Bearer`` header.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from opensearch_py_ml.ml_commons import MLCommonClient
from opensearchpy import AsyncOpenSearch, ConflictError, NotFoundError, OpenSearch

from embedder import Embedder, ensure_default_model
from memory_plugin.auth import KeyStore
from tests.support.live import LiveServer
from tests.support.scripted_openai import (
    ScriptedOpenAI,
    chat_connector,
    embedding_connector,
    embedding_of,
    scripted_openai,
)

DEFAULT_MODEL = "multilingual-e5-small"
DIMENSION = 384
SENTENCES = ["The quick brown fox jumps over the lazy dog", "Der schnelle braune Fuchs springt über den Hund"]
# A TOML literal string: the backslashes reach the regex as they are.
CONFIG = """\
ml_trusted_endpoints_regex = ['^http://127\\.0\\.0\\.1:.*$']
ml_allow_private_addresses = true
"""


@pytest.fixture(scope="module")
def llm() -> Iterator[ScriptedOpenAI]:
    with scripted_openai() as scripted:
        yield scripted


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("ml-clients")
    config = root / "memory-plugin.toml"
    config.write_text(CONFIG)
    data_dir = root / "data"
    _, token = KeyStore(data_dir / "keys.json").create("org-1", "alice")
    env = {"MEMORY_PLUGIN_MODEL_DIR": str(ensure_default_model())}
    with LiveServer(data_dir, env=env, config=config) as live:
        live.token = token
        yield live


@pytest.fixture
def client(server: LiveServer) -> Iterator[OpenSearch]:
    os_client = OpenSearch(hosts=[server.url], headers=server.headers)
    yield os_client
    os_client.close()


def assert_real_embeddings(answer: Any, sentences: list[str], embedder: Embedder) -> None:
    """``inference_results`` of the built-in model: one 384-float ``sentence_embedding`` a sentence, the same
    numbers the model gives in this process (to 1e-4: another process, maybe other threads; values are ~0.05)."""
    results = answer["inference_results"]
    assert len(results) == len(sentences)
    for result in results:
        [tensor] = result["output"]
        assert tensor["name"] == "sentence_embedding" and tensor["data_type"] == "FLOAT32"
        assert tensor["shape"] == [DIMENSION] and len(tensor["data"]) == DIMENSION
    vectors = np.array([r["output"][0]["data"] for r in results])
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)  # the model normalises
    np.testing.assert_allclose(vectors, embedder.passage(sentences), atol=1e-4)


async def test_async_plugins_ml_drives_a_remote_chat_model(server: LiveServer, llm: ScriptedOpenAI) -> None:
    llm.take()
    client = AsyncOpenSearch(hosts=[server.url], headers=server.headers)
    ml = client.plugins.ml
    try:
        created = await ml.create_connector(body=chat_connector(llm.url, "sk-async-chat"))
        connector_id = created["connector_id"]
        shown = await ml.get_connector(connector_id=connector_id)
        assert shown["name"] == "scripted chat" and shown["protocol"] == "http"
        assert "credential" not in shown and shown["actions"][0]["action_type"] == "PREDICT"
        updated = await ml.update_connector(connector_id=connector_id, body={"description": "scripted, updated"})
        assert updated["result"] == "updated" and updated["_id"] == connector_id
        found = await ml.search_connectors(body={"query": {"match_all": {}}, "size": 100})
        assert connector_id in [hit["_id"] for hit in found["hits"]["hits"]]

        registered = await ml.register_model(
            body={"name": "scripted chat model", "function_name": "remote", "connector_id": connector_id}
        )
        assert registered["status"] == "CREATED"
        model_id = registered["model_id"]
        task = await ml.get_task(task_id=registered["task_id"])
        assert task["model_id"] == model_id and task["task_type"] == "REGISTER_MODEL"
        assert task["state"] == "COMPLETED" and task["function_name"] == "REMOTE"

        deployed = await ml.deploy_model(model_id=model_id)
        assert deployed["task_type"] == "DEPLOY_MODEL" and deployed["status"] == "COMPLETED"
        deploy_task = await ml.get_task(task_id=deployed["task_id"])
        assert deploy_task["model_id"] == model_id and deploy_task["state"] == "COMPLETED"
        model = await ml.get_model(model_id=model_id)
        assert model["name"] == "scripted chat model" and model["algorithm"] == "REMOTE"
        assert model["model_state"] == "DEPLOYED" and model["connector_id"] == connector_id

        messages = [{"role": "user", "content": "Which sort is stable?"}]
        answer = await ml.predict_model(model_id=model_id, body={"parameters": {"messages": messages}})
        [result] = answer["inference_results"]
        [output] = result["output"]
        assert result["status_code"] == 200 and output["name"] == "response"
        choice = output["dataAsMap"]["choices"][0]
        assert choice["message"] == {"role": "assistant", "content": "scripted answer to: Which sort is stable?"}
        assert [(r["path"], r["headers"]["authorization"], r["body"]) for r in llm.take()] == [
            ("/v1/chat/completions", "Bearer sk-async-chat", {"model": "gpt-4o-mini", "messages": messages})
        ]

        searched = await ml.search_models(body={"query": {"term": {"model_state": "DEPLOYED"}}, "size": 100})
        hits = {hit["_id"]: hit["_source"] for hit in searched["hits"]["hits"]}
        assert hits[model_id]["name"] == "scripted chat model" and hits[model_id]["connector_id"] == connector_id

        undeployed = await ml.undeploy_model(model_id=model_id)
        assert [node["stats"] for node in undeployed.values()] == [{model_id: "undeployed"}]
        assert (await ml.get_model(model_id=model_id))["model_state"] == "UNDEPLOYED"
        deleted = await ml.delete_model(model_id=model_id)
        assert deleted["_id"] == model_id and deleted["result"] == "deleted"
        with pytest.raises(NotFoundError):
            await ml.get_model(model_id=model_id)
        gone = await ml.delete_connector(connector_id=connector_id)
        assert gone["_id"] == connector_id and gone["result"] == "deleted"
        with pytest.raises(NotFoundError):
            await ml.get_connector(connector_id=connector_id)
    finally:
        await client.close()


def test_sync_plugins_ml_drives_a_remote_embedding_model(client: OpenSearch, llm: ScriptedOpenAI) -> None:
    llm.take()
    ml = client.plugins.ml
    connector_id = ml.create_connector(body=embedding_connector(llm.url, "sk-sync-embed"))["connector_id"]
    registered = ml.register_model(
        body={"name": "scripted embeddings", "function_name": "remote", "connector_id": connector_id}
    )
    model_id = registered["model_id"]
    assert ml.get_task(task_id=registered["task_id"])["state"] == "COMPLETED"
    assert ml.deploy_model(model_id=model_id)["status"] == "COMPLETED"
    assert ml.get_model(model_id=model_id)["model_state"] == "DEPLOYED"

    docs = ["first text", "zweiter Text"]
    answer = ml.predict(algorithm_name="text_embedding", model_id=model_id, body={"text_docs": docs})
    [result] = answer["inference_results"]
    assert [o["data"] for o in result["output"]] == [embedding_of(d) for d in docs]
    assert all(o["shape"] == [3] and o["data_type"] == "FLOAT32" for o in result["output"])
    assert [(r["path"], r["headers"]["authorization"], r["body"]) for r in llm.take()] == [
        ("/v1/embeddings", "Bearer sk-sync-embed", {"input": docs, "model": "text-embedding-3-small"})
    ]

    searched = ml.search_models(body={"query": {"match_all": {}}, "size": 100})
    assert model_id in [hit["_id"] for hit in searched["hits"]["hits"]]
    assert list(ml.undeploy_model(model_id=model_id).values())[0]["stats"] == {model_id: "undeployed"}
    assert ml.delete_model(model_id=model_id)["result"] == "deleted"
    assert ml.delete_connector(connector_id=connector_id)["result"] == "deleted"
    with pytest.raises(NotFoundError):
        ml.get_connector(connector_id=connector_id)


def test_ml_commons_client_generates_embeddings_with_the_built_in_model(
    client: OpenSearch, real_embedder: Embedder
) -> None:
    ml_client = MLCommonClient(client)
    answer = ml_client.generate_embedding("built-in", SENTENCES)
    assert_real_embeddings(answer, SENTENCES, real_embedder)
    # plugins.ml.predict sends the same request without target_response: the same numbers
    same = client.plugins.ml.predict(
        algorithm_name="text_embedding", model_id="built-in", body={"text_docs": SENTENCES}
    )
    assert same == answer


def test_ml_commons_client_model_and_connector_helpers(
    client: OpenSearch, llm: ScriptedOpenAI, real_embedder: Embedder
) -> None:
    """``MLCommonClient``'s helpers that need no model file: the connector ones, deploy (which polls the model
    and then reads the task), get/search/undeploy/delete, and generate_embedding by the registered model's id."""
    ml_client = MLCommonClient(client)
    connector_id = ml_client.connector.create_standalone_connector(body=chat_connector(llm.url, "sk-py-ml"))[
        "connector_id"
    ]
    assert ml_client.connector.get_connector(connector_id)["name"] == "scripted chat"
    listed = ml_client.connector.list_connectors()
    assert connector_id in [hit["_id"] for hit in listed["hits"]["hits"]]

    # The built-in model registered under its own name, as ml-commons registers a pretrained one; the body is
    # MLCommonClient.register_pretrained_model's but for its empty model_group_id (tested on its own below).
    registered = client.plugins.ml.register_model(
        body={"name": DEFAULT_MODEL, "version": "1.0.0", "model_format": "ONNX"}
    )
    model_id = registered["model_id"]
    assert ml_client.get_task_info(registered["task_id"], wait_until_task_done=False)["state"] == "COMPLETED"
    deploy_task = ml_client.deploy_model(model_id, wait_until_deployed=True)
    assert deploy_task["model_id"] == model_id and deploy_task["task_type"] == "DEPLOY_MODEL"
    info = ml_client.get_model_info(model_id)
    assert info["name"] == DEFAULT_MODEL and info["algorithm"] == "TEXT_EMBEDDING"
    assert info["model_state"] == "DEPLOYED" and info["model_config"]["embedding_dimension"] == DIMENSION
    assert_real_embeddings(ml_client.generate_embedding(model_id, SENTENCES), SENTENCES, real_embedder)

    found = ml_client.search_model({"query": {"match": {"name": DEFAULT_MODEL}}})
    assert [hit["_id"] for hit in found["hits"]["hits"]] == [model_id]
    undeployed = ml_client.undeploy_model(model_id)
    assert [node["stats"] for node in undeployed.values()] == [{model_id: "undeployed"}]
    assert ml_client.delete_model(model_id)["result"] == "deleted"
    assert ml_client.connector.delete_connector(connector_id)["result"] == "deleted"
    with pytest.raises(NotFoundError):
        ml_client.get_model_info(model_id)


# -- what the clients send that a first version of the server refused (an empty model_group_id, a trailing slash) --


def test_ml_commons_client_registers_a_pretrained_model(client: OpenSearch) -> None:
    ml_client = MLCommonClient(client)
    model_id = ml_client.register_pretrained_model(DEFAULT_MODEL, "1.0.0", "ONNX", deploy_model=True)
    try:
        info = ml_client.get_model_info(model_id)
        assert info["model_state"] == "DEPLOYED" and info["algorithm"] == "TEXT_EMBEDDING"
    finally:
        ml_client.undeploy_model(model_id)
        ml_client.delete_model(model_id)


def test_ml_commons_client_predicts_with_a_remote_model(client: OpenSearch, llm: ScriptedOpenAI) -> None:
    llm.take()
    ml = client.plugins.ml
    connector_id = ml.create_connector(body=chat_connector(llm.url, "sk-py-ml-predict"))["connector_id"]
    model_id = ml.register_model(
        body={"name": "scripted chat via py-ml", "function_name": "remote", "connector_id": connector_id}
    )["model_id"]
    try:
        messages = [{"role": "user", "content": "hello from opensearch-py-ml"}]
        answer = MLCommonClient(client).predict(model_id, {"parameters": {"messages": messages}})
        content = answer["inference_results"][0]["output"][0]["dataAsMap"]["choices"][0]["message"]["content"]
        assert content == "scripted answer to: hello from opensearch-py-ml"
        assert [r["headers"]["authorization"] for r in llm.take()] == ["Bearer sk-py-ml-predict"]
    finally:
        ml.undeploy_model(model_id=model_id)
        ml.delete_model(model_id=model_id)
        ml.delete_connector(connector_id=connector_id)


def test_tasks_search_delete_and_undeploy_of_many(client: OpenSearch, llm: ScriptedOpenAI) -> None:
    """``MLCommonClient.search_task`` (GET /tasks/_search), ``plugins.ml.delete_task`` and ``undeploy_model()``
    without an id (POST /models/_undeploy), as the clients send them."""
    ml = client.plugins.ml
    connector_id = ml.create_connector(body=chat_connector(llm.url, "sk-tasks"))["connector_id"]
    registered = ml.register_model(body={"name": "tasks", "function_name": "remote", "connector_id": connector_id})
    model_id, task_id = registered["model_id"], registered["task_id"]
    ml.deploy_model(model_id=model_id)
    found = MLCommonClient(client).search_task({"query": {"term": {"model_id": model_id}}})
    assert sorted(hit["_source"]["task_type"] for hit in found["hits"]["hits"]) == ["DEPLOY_MODEL", "REGISTER_MODEL"]
    assert ml.delete_task(task_id=task_id)["result"] == "deleted"
    with pytest.raises(NotFoundError):
        ml.get_task(task_id=task_id)
    undeployed = ml.undeploy_model(body={"model_ids": [model_id, "no-such-model"]})
    assert [node["stats"] for node in undeployed.values()] == [{model_id: "undeployed", "no-such-model": "not_found"}]
    ml.delete_model(model_id=model_id)
    ml.delete_connector(connector_id=connector_id)


def test_model_groups_through_both_clients(client: OpenSearch, llm: ScriptedOpenAI) -> None:
    """opensearch-py's model group methods and ``update_model``, and ``MLCommonClient.register_pretrained_model``
    into a group by its id, as opensearch-py-ml's users register models."""
    ml = client.plugins.ml
    group_id = ml.register_model_group(body={"name": "py clients", "description": "made by opensearch-py"})[
        "model_group_id"
    ]
    assert ml.get_model_group(model_group_id=group_id)["description"] == "made by opensearch-py"
    assert ml.update_model_group(model_group_id=group_id, body={"description": "updated"}) == {"status": "Updated"}
    found = ml.search_model_group(body={"query": {"term": {"name.keyword": "py clients"}}})
    assert [hit["_id"] for hit in found["hits"]["hits"]] == [group_id]

    ml_client = MLCommonClient(client)
    model_id = ml_client.register_pretrained_model(DEFAULT_MODEL, "1.0.0", "ONNX", model_group_id=group_id)
    try:
        info = ml_client.get_model_info(model_id)
        assert info["model_group_id"] == group_id and info["model_version"] == "1"
        assert ml.get_model_group(model_group_id=group_id)["latest_version"] == 1
        assert ml.update_model(model_id=model_id, body={"description": "in a group"})["result"] == "updated"
        assert ml_client.get_model_info(model_id)["description"] == "in a group"
        with pytest.raises(ConflictError):
            ml.delete_model_group(model_group_id=group_id)
    finally:
        ml_client.undeploy_model(model_id)
        ml_client.delete_model(model_id)
    assert ml.delete_model_group(model_group_id=group_id)["result"] == "deleted"
    with pytest.raises(NotFoundError):
        ml.get_model_group(model_group_id=group_id)
