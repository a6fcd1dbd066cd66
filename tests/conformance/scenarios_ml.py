"""Conformance scenarios of remote models: connectors, models, tasks and predict, as the ml-commons docs use them.

Each scenario is an async function over a :class:`Differ` and the scripted
OpenAI-compatible server both sides' connectors call (its URL is only known at
run time, so it comes in as an argument).  The differ compares the replies and,
through its ``observe`` hook, the requests each side's connector sent to that
server (method, path, ``Authorization``, ``x-scripted``, body).

Ids are ``<id:n>``: the n-th id a side showed, in the order its replies showed
them (a register reply names ``task_id`` before ``model_id``; a model, its
``model_group_id`` after its own id).  The comments say which alias is what.

The real node writes a model's or a task's state after it answered (a register's
task is ``CREATED`` for a moment, a deployed model ``DEPLOYING``; a predict on an
undeployed model deploys it in the background), and its searches see a write
only after the next refresh (every second): :func:`settle` waits those out
before any read that depends on them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from tests.conformance.differ import Differ
from tests.support.polling import eventually
from tests.support.scripted_openai import ScriptedOpenAI

CONNECTORS = "/_plugins/_ml/connectors"
MODELS = "/_plugins/_ml/models"
TASKS = "/_plugins/_ml/tasks"
GROUPS = "/_plugins/_ml/model_groups"
CREATE = f"{CONNECTORS}/_create"
REGISTER = f"{MODELS}/_register"
EMBED = "/_plugins/_ml/_predict/text_embedding"

MLScenario = Callable[[Differ, ScriptedOpenAI], Awaitable[None]]

#: A task or model state the real node leaves for another once its background work is done.
PASSING_TASK_STATES = {"CREATED", "RUNNING"}
PASSING_MODEL_STATES = {"REGISTERING", "DEPLOYING"}


async def settle(d: Differ) -> None:
    """Until the real node's background state writes have landed and its searches see them.

    Polled, not slept: on a loaded machine those writes can take seconds.  Our server writes
    a model's and a task's state before it answers, so only the real node is waited for.
    """
    await eventually(lambda: judge_settled(d), "the real node's tasks and models settle")


async def judge_settled(d: Differ) -> bool:
    """No task or model in a passing state, and every model marked deployed exactly when the node holds it
    (an undeploy answers before it writes ``UNDEPLOYED``)."""
    url, session = d.real.base_url, d.session
    async with session.post(f"{url}/.plugins-ml-*/_refresh?ignore_unavailable=true&allow_no_indices=true") as response:
        assert response.status == 200, await response.text()

    async def states(index: str, field: str) -> dict[str, str]:
        body = {"size": 1000, "_source": [field], "query": {"match_all": {}}}
        async with session.post(f"{url}/{index}/_search?ignore_unavailable=true", json=body) as response:
            assert response.status == 200, await response.text()
            hits = (await response.json())["hits"]["hits"]
        return {hit["_id"]: hit["_source"].get(field) for hit in hits}

    tasks = await states(".plugins-ml-task", "state")
    models = await states(".plugins-ml-model", "model_state")
    async with session.get(f"{url}/_plugins/_ml/profile/models") as response:
        assert response.status == 200, await response.text()
        profile = await response.json()
    held = {model_id for node in profile.get("nodes", {}).values() for model_id in node.get("models", {})}
    return (
        not PASSING_TASK_STATES & set(tasks.values())
        and not PASSING_MODEL_STATES & set(models.values())
        and all((state == "DEPLOYED") == (model_id in held) for model_id, state in models.items())
    )


def chat_connector(llm: ScriptedOpenAI, **changes: Any) -> dict[str, Any]:
    """The docs' OpenAI chat connector (blueprint ``openai_connector_chat_blueprint``), aimed at the scripted server."""
    body = {
        "name": "OpenAI Chat Connector",
        "description": "The connector to the scripted OpenAI chat model",
        "version": 1,
        "protocol": "http",
        "parameters": {
            "endpoint": llm.url.removeprefix("http://"),
            "model": "gpt-scripted",
            "temperature": 0.5,
            "max_tokens": 16,
        },
        "credential": {"openAI_key": "sk-chat-one"},
        "actions": [
            {
                "action_type": "predict",
                "method": "POST",
                "url": "http://${parameters.endpoint}/v1/chat/completions",
                "headers": {"Authorization": "Bearer ${credential.openAI_key}", "x-scripted": "${parameters.model}"},
                "request_body": '{ "model": "${parameters.model}", "messages": ${parameters.messages}, '
                '"temperature": ${parameters.temperature}, "max_tokens": ${parameters.max_tokens} }',
            }
        ],
    }
    return {**body, **changes}


def embedding_connector(llm: ScriptedOpenAI, **changes: Any) -> dict[str, Any]:
    """The docs' OpenAI embedding connector, with the built-in OpenAI pre- and post-process functions."""
    body = {
        "name": "OpenAI embedding connector",
        "description": "The connector to the scripted OpenAI embedding model",
        "version": "1.0",
        "protocol": "http",
        "parameters": {"model": "text-embedding-scripted"},
        "credential": {"openAI_key": "sk-embed-one"},
        "actions": [
            {
                "action_type": "predict",
                "method": "POST",
                "url": f"{llm.url}/v1/embeddings",
                "headers": {"Authorization": "Bearer ${credential.openAI_key}"},
                "request_body": '{ "input": ${parameters.input}, "model": "${parameters.model}" }',
                "pre_process_function": "connector.pre_process.openai.embedding",
                "post_process_function": "connector.post_process.openai.embedding",
            }
        ],
    }
    return {**body, **changes}


def ask(*contents: str) -> dict[str, Any]:
    """A chat predict body: ``parameters.messages`` as the docs send it, a list of messages."""
    return {"parameters": {"messages": [{"role": "user", "content": c} for c in contents]}}


async def connectors(d: Differ, llm: ScriptedOpenAI) -> None:
    """Create, get, search, update and delete connectors that no model uses."""
    await d.send("POST", CREATE, chat_connector(llm))  # <id:0>
    await d.send("POST", CREATE, embedding_connector(llm))  # <id:1>
    await d.send("GET", f"{CONNECTORS}/<id:0>")
    await d.send("GET", f"{CONNECTORS}/<id:1>")
    await d.send("POST", f"{CONNECTORS}/_search", {"query": {"match_all": {}}})
    await d.send("GET", f"{CONNECTORS}/_search", {"query": {"match_all": {}}, "size": 1})
    await d.send("POST", f"{CONNECTORS}/_search", {"query": {"match": {"name": "embedding"}}})
    await d.send("POST", f"{CONNECTORS}/_search", {"query": {"term": {"protocol": "http"}}})
    await d.send("GET", f"{CONNECTORS}/_search")
    await d.send("PUT", f"{CONNECTORS}/<id:0>", {"description": "updated", "parameters": {"model": "gpt-other"}})
    await d.send("GET", f"{CONNECTORS}/<id:0>")
    await d.send("PUT", f"{CONNECTORS}/<id:0>", {"credential": {"openAI_key": "sk-chat-two"}})
    await d.send("GET", f"{CONNECTORS}/<id:0>")
    await d.send("PUT", f"{CONNECTORS}/not-a-connector", {"description": "x"})
    await d.send("DELETE", f"{CONNECTORS}/<id:1>")
    await d.send("GET", f"{CONNECTORS}/<id:1>")
    await d.send("DELETE", f"{CONNECTORS}/<id:1>")
    await d.send("DELETE", f"{CONNECTORS}/not-a-connector")
    await d.send("GET", f"{CONNECTORS}/not-a-connector")
    await d.send("POST", f"{CONNECTORS}/_search", {"query": {"match_all": {}}})


async def connector_errors(d: Differ, llm: ScriptedOpenAI) -> None:
    """What create refuses (and the odd things it accepts), after one valid create so that the index exists."""
    await d.send("POST", CREATE, chat_connector(llm))  # <id:0>
    good = chat_connector(llm)
    action = good["actions"][0]
    for missing in ("name", "version", "protocol", "credential", "actions"):
        await d.send("POST", CREATE, {k: v for k, v in good.items() if k != missing}, step=f"create without {missing}")
    await d.send("POST", CREATE, {**good, "credential": {}})
    await d.send("POST", CREATE, {**good, "protocol": "ftp"})
    await d.send("POST", CREATE, {**good, "protocol": "aws_sigv4"})
    await d.send("POST", CREATE, {**good, "actions": [{**action, "action_type": "train"}]})
    await d.send("POST", CREATE, {**good, "actions": [{**action, "action_type": "bogus"}]})
    await d.send("POST", CREATE, {**good, "actions": [{k: v for k, v in action.items() if k != "method"}]})
    await d.send("POST", CREATE, {**good, "actions": [{k: v for k, v in action.items() if k != "url"}]})
    await d.send("POST", CREATE, {**good, "actions": [{k: v for k, v in action.items() if k != "action_type"}]})
    await d.send("POST", CREATE, {**good, "actions": action})
    await d.send("POST", CREATE, {**good, "actions": "predict"})
    await d.send("POST", CREATE, {**good, "actions": [{**action, "url": "http://example.com/v1/chat/completions"}]})
    await d.send("POST", CREATE, {**good, "parameters": {**good["parameters"], "endpoint": "example.com"}})
    await d.send("POST", CREATE, raw="{bad json")
    await d.send("POST", CREATE, raw='{"name": ')
    await d.send("POST", CREATE, raw="")
    await d.send("POST", CREATE, {**good, "description": None})
    # accepted as they are
    await d.send("POST", CREATE, {**good, "actions": []})  # <id:1>
    await d.send("POST", CREATE, {**good, "name": 5, "unknown_field": 1})  # <id:2>
    await d.send("GET", f"{CONNECTORS}/<id:1>")
    await d.send("GET", f"{CONNECTORS}/<id:2>")


async def chat_model(d: Differ, llm: ScriptedOpenAI) -> None:
    """The docs' walk-through: connector, register, task, deploy, predict, undeploy, delete."""
    await d.send("POST", CREATE, chat_connector(llm))  # <id:0> connector
    register = {
        "name": "scripted chat",
        "function_name": "remote",
        "description": "chat over the scripted LLM",
        "connector_id": "<id:0>",
    }
    await d.send("POST", REGISTER, register)  # <id:1> task, <id:2> model
    await settle(d)
    await d.send("GET", f"{TASKS}/<id:1>")
    await d.send("GET", f"{MODELS}/<id:2>")  # <id:3> model group
    await d.send("POST", f"{MODELS}/<id:2>/_deploy")  # <id:4> task
    await settle(d)
    await d.send("GET", f"{TASKS}/<id:4>")
    await d.send("GET", f"{MODELS}/<id:2>")
    await d.send("POST", f"{MODELS}/<id:2>/_predict", ask("hello"))
    await d.send(
        "POST",
        f"{MODELS}/<id:2>/_predict",
        {
            "parameters": {
                "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": 'héllo "quoted"'}],
                "model": "gpt-other",
                "temperature": 1,
            }
        },
    )
    await d.send(
        "POST", f"{MODELS}/<id:2>/_predict", {"parameters": {"messages": '[{"role": "user", "content": "x"}]'}}
    )
    await d.send("POST", f"{MODELS}/<id:2>/_predict", {**ask("extra field"), "bogus": 1})
    # what predict refuses
    await d.send("POST", f"{MODELS}/<id:2>/_predict", {"parameters": {"prompt": "no messages"}})
    await d.send("POST", f"{MODELS}/<id:2>/_predict", {"parameters": {"messages": "not json"}})
    await d.send("POST", f"{MODELS}/<id:2>/_predict", {})
    await d.send("POST", f"{MODELS}/<id:2>/_predict")
    await d.send("POST", f"{MODELS}/<id:2>/_predict", raw='{"parameters": ')
    await d.send("POST", f"{EMBED}/<id:2>", {"text_docs": ["a chat model has no embeddings"]})
    # a deployed model holds its connector and itself
    await d.send("DELETE", f"{CONNECTORS}/<id:0>")
    await d.send("PUT", f"{CONNECTORS}/<id:0>", {"description": "while deployed"})
    await d.send("DELETE", f"{MODELS}/<id:2>")
    await d.send("POST", f"{MODELS}/<id:2>/_undeploy")
    await settle(d)
    await d.send("GET", f"{MODELS}/<id:2>")
    await d.send("POST", f"{MODELS}/<id:2>/_undeploy")
    # a new key: the next call carries it
    await d.send("PUT", f"{CONNECTORS}/<id:0>", {"credential": {"openAI_key": "sk-chat-two"}})
    await d.send("DELETE", f"{CONNECTORS}/<id:0>")  # an undeployed model still holds its connector
    await d.send("POST", f"{MODELS}/<id:2>/_deploy")  # <id:5> task
    await settle(d)
    await d.send("POST", f"{MODELS}/<id:2>/_predict", ask("with the new key"))
    await d.send("POST", f"{MODELS}/<id:2>/_undeploy")
    await settle(d)
    await d.send("DELETE", f"{MODELS}/<id:2>")
    await d.send("GET", f"{MODELS}/<id:2>")
    await d.send("POST", f"{MODELS}/<id:2>/_predict", ask("gone"))
    await d.send("GET", f"{TASKS}/<id:1>")
    await d.send("DELETE", f"{CONNECTORS}/<id:0>")
    await d.send("GET", f"{CONNECTORS}/<id:0>")


async def predict_deploys_on_demand(d: Differ, llm: ScriptedOpenAI) -> None:
    """A remote model answers a predict without a deploy, and is deployed by it (in the background)."""
    await d.send("POST", CREATE, chat_connector(llm))  # <id:0>
    await d.send(
        "POST", REGISTER, {"name": "lazy", "function_name": "remote", "connector_id": "<id:0>"}
    )  # <id:1>, <id:2>
    await settle(d)
    await d.send("POST", f"{MODELS}/<id:2>/_predict", ask("never deployed"))
    await settle(d)
    await d.send("GET", f"{MODELS}/<id:2>")  # <id:3> model group
    await d.send("PUT", f"{CONNECTORS}/<id:0>", {"description": "while deployed"})
    await d.send("POST", f"{MODELS}/<id:2>/_undeploy")
    await settle(d)
    await d.send("GET", f"{MODELS}/<id:2>")
    await d.send("DELETE", f"{MODELS}/<id:2>")


async def embedding_model(d: Differ, llm: ScriptedOpenAI) -> None:
    """A model registered with its connector inline, asked through the text_embedding API."""
    register = {
        "name": "scripted embeddings",
        "function_name": "remote",
        "description": "embeddings over the scripted LLM",
        "connector": embedding_connector(llm),
    }
    await d.send("POST", REGISTER, register)  # <id:0> task, <id:1> model
    await settle(d)
    await d.send("GET", f"{TASKS}/<id:0>")
    await d.send("GET", f"{MODELS}/<id:1>")  # <id:2> model group
    await d.send("POST", f"{MODELS}/<id:1>/_deploy")  # <id:3> task
    await settle(d)
    await d.send("GET", f"{MODELS}/<id:1>")
    await d.send("POST", f"{EMBED}/<id:1>", {"text_docs": ["hello", "world"]})
    await d.send("POST", f"{EMBED}/<id:1>", {"text_docs": ["hello"], "return_number": True})
    await d.send(
        "POST", f"{EMBED}/<id:1>", {"text_docs": ["héllo wörld", ""], "target_response": ["sentence_embedding"]}
    )
    await d.send("POST", f"{MODELS}/<id:1>/_predict", {"parameters": {"input": ["hello"]}})
    await d.send("POST", f"{MODELS}/<id:1>/_predict", {"text_docs": ["hello"]})
    await d.send("POST", f"{EMBED}/<id:1>", {"text_docs": []})
    await d.send("POST", f"{EMBED}/<id:1>", {})
    await d.send("POST", f"{EMBED}/<id:1>", {"text_docs": "hello"})
    await d.send("POST", f"{MODELS}/<id:1>/_undeploy")
    await settle(d)
    await d.send("DELETE", f"{MODELS}/<id:1>")
    await d.send("GET", f"{TASKS}/<id:3>")


async def model_search(d: Differ, llm: ScriptedOpenAI) -> None:
    """Several models: one model group per new name, a second version under a name already used, searches."""
    await d.send("POST", CREATE, chat_connector(llm))  # <id:0>
    await d.send("POST", REGISTER, {"name": "alpha chat", "function_name": "remote", "connector_id": "<id:0>"})  # 1, 2
    await d.send("POST", REGISTER, {"name": "beta chat", "function_name": "remote", "connector_id": "<id:0>"})  # 3, 4
    await settle(d)
    await d.send("POST", REGISTER, {"name": "alpha chat", "function_name": "remote", "connector_id": "<id:0>"})  # 5, 6
    await settle(d)
    await d.send("GET", f"{MODELS}/<id:2>")  # <id:7> alpha's group
    await d.send("GET", f"{MODELS}/<id:6>")
    await d.send("GET", f"{MODELS}/<id:4>")  # <id:8> beta's group
    await d.send("POST", f"{MODELS}/<id:4>/_deploy")  # <id:9>
    await settle(d)
    await d.send("POST", f"{MODELS}/_search", {"query": {"match_all": {}}})
    await d.send("GET", f"{MODELS}/_search", {"query": {"match_all": {}}, "size": 2})
    await d.send("POST", f"{MODELS}/_search", {"query": {"match": {"name": "beta"}}})
    await d.send("POST", f"{MODELS}/_search", {"query": {"term": {"model_state": "DEPLOYED"}}})
    await d.send("POST", f"{MODELS}/_search", {"query": {"term": {"model_group_id": "<id:7>"}}})
    await d.send("POST", f"{MODELS}/_search", {"query": {"match": {"connector_id": "<id:0>"}}, "_source": ["name"]})
    await d.send("GET", f"{MODELS}/_search")
    await d.send("DELETE", f"{CONNECTORS}/<id:0>")
    await d.send("POST", f"{MODELS}/<id:4>/_undeploy")
    await settle(d)
    for model in (2, 4, 6):
        await d.send("DELETE", f"{MODELS}/<id:{model}>")
    await d.send("DELETE", f"{CONNECTORS}/<id:0>")


async def register_errors(d: Differ, llm: ScriptedOpenAI) -> None:
    """What register refuses (and accepts), after one valid connector so that the indices exist."""
    await d.send("POST", CREATE, chat_connector(llm))  # <id:0>
    await d.send("POST", REGISTER, {"name": "x", "function_name": "remote", "connector_id": "not-a-connector"})
    await d.send("POST", REGISTER, {"name": "x", "function_name": "remote"})
    await d.send("POST", REGISTER, {"function_name": "remote", "connector_id": "<id:0>"})
    await d.send("POST", REGISTER, {"name": "x", "connector_id": "<id:0>"})
    await d.send("POST", REGISTER, {"name": "x", "function_name": "bogus", "connector_id": "<id:0>"})
    await d.send(
        "POST", REGISTER, {"name": "x", "function_name": "remote", "connector_id": "<id:0>", "model_group_id": "nope"}
    )
    inline = {"name": "x", "function_name": "remote"}
    bad_action = {**chat_connector(llm)["actions"][0], "action_type": "bogus"}
    await d.send("POST", REGISTER, {**inline, "connector": {"name": "only a name"}})
    await d.send("POST", REGISTER, {**inline, "connector": chat_connector(llm, actions=[bad_action])})
    untrusted = {**chat_connector(llm)["actions"][0], "url": "http://example.com/v1/chat/completions"}
    await d.send("POST", REGISTER, {**inline, "connector": chat_connector(llm, actions=[untrusted])})
    await d.send("POST", REGISTER, {})
    await d.send("POST", REGISTER)
    await d.send("POST", REGISTER, raw="{bad json")
    # accepted as they are
    await d.send("POST", REGISTER, {"name": "upper", "function_name": "REMOTE", "connector_id": "<id:0>"})  # 1, 2
    await d.send("POST", REGISTER, {"name": 5, "function_name": "remote", "connector_id": "<id:0>"})  # 3, 4
    await settle(d)
    await d.send("GET", f"{MODELS}/<id:2>")
    await d.send("GET", f"{MODELS}/<id:4>")


async def unknown_ids(d: Differ, llm: ScriptedOpenAI) -> None:
    """Every API on an id nobody handed out, once the indices exist (a connector and a model were made)."""
    await d.send("POST", CREATE, chat_connector(llm))  # <id:0>
    await d.send("POST", REGISTER, {"name": "known", "function_name": "remote", "connector_id": "<id:0>"})  # 1, 2
    await settle(d)
    await d.send("GET", f"{CONNECTORS}/nope")
    await d.send("PUT", f"{CONNECTORS}/nope", {"description": "x"})
    await d.send("DELETE", f"{CONNECTORS}/nope")
    await d.send("GET", f"{MODELS}/nope")
    await d.send("DELETE", f"{MODELS}/nope")
    await d.send("POST", f"{MODELS}/nope/_deploy")
    await d.send("POST", f"{MODELS}/nope/_undeploy")
    await d.send("POST", f"{MODELS}/nope/_predict", ask("anyone?"))
    await d.send("POST", f"{EMBED}/nope", {"text_docs": ["anyone?"]})
    await d.send("GET", f"{TASKS}/nope")
    await d.send("GET", f"{TASKS}/<id:2>")  # a model's id is not a task's
    await d.send("GET", f"{MODELS}/<id:1>")  # nor a task's a model's
    await d.send("GET", f"{CONNECTORS}/<id:2>")
    await d.send("POST", f"{MODELS}/<id:2>/_undeploy")  # known, never deployed


async def remote_errors(d: Differ, llm: ScriptedOpenAI) -> None:
    """The remote service fails: its status and body come back inside the node's error."""
    await d.send("POST", CREATE, chat_connector(llm))  # <id:0>
    await d.send("POST", REGISTER, {"name": "flaky", "function_name": "remote", "connector_id": "<id:0>"})  # 1, 2
    await settle(d)
    await d.send("POST", f"{MODELS}/<id:2>/_deploy")  # <id:3>
    await settle(d)
    try:
        for status in (429, 401, 500):
            llm.fail_with = status
            await d.send("POST", f"{MODELS}/<id:2>/_predict", ask(f"fail with {status}"))
    finally:
        llm.fail_with = None
    await d.send("POST", f"{MODELS}/<id:2>/_predict", ask("recovered"))
    await d.send("POST", f"{MODELS}/<id:2>/_undeploy")
    await settle(d)
    # a URL placeholder no parameter fills: Java's URI.create refuses it, and nothing is sent
    action = {**chat_connector(llm)["actions"][0], "url": "http://${parameters.endpoint}/v1/${parameters.route}"}
    await d.send("POST", CREATE, chat_connector(llm, actions=[action]))  # <id:4>
    await d.send("POST", REGISTER, {"name": "routed", "function_name": "remote", "connector_id": "<id:4>"})  # 5, 6
    await settle(d)
    await d.send("POST", f"{MODELS}/<id:6>/_deploy")  # <id:7>
    await settle(d)
    await d.send("POST", f"{MODELS}/<id:6>/_predict", ask("no route"))
    routed = ask("routed")
    routed["parameters"]["route"] = "chat/completions"
    await d.send("POST", f"{MODELS}/<id:6>/_predict", routed)
    await d.send("POST", f"{MODELS}/<id:6>/_undeploy")
    await settle(d)


async def call_options(d: Differ, llm: ScriptedOpenAI) -> None:
    """A connector's client_config as ml-commons keeps it; a model's rate limiter and its regex guardrails."""
    config = {"read_timeout": 7, "max_retry_times": "3", "retry_backoff_policy": "exponential_full_jitter"}
    await d.send("POST", CREATE, chat_connector(llm, client_config=config))  # <id:0>
    await d.send("GET", f"{CONNECTORS}/<id:0>")
    await d.send("POST", CREATE, chat_connector(llm, client_config={"retry_backoff_policy": "sometimes"}))
    limited = {"rate_limiter": {"limit": "1", "unit": "MINUTES"}}
    await d.send("POST", REGISTER, {"name": "limited", "function_name": "remote", "connector_id": "<id:0>", **limited})
    await settle(d)  # <id:1> task, <id:2> model
    await d.send("POST", f"{MODELS}/<id:2>/_deploy")  # <id:3> task
    await settle(d)
    await d.send("POST", f"{MODELS}/<id:2>/_predict", ask("first"))
    await d.send("POST", f"{MODELS}/<id:2>/_predict", ask("second, within the minute"))
    guardrails = {"type": "local_regex", "input_guardrail": {"regex": [".*forbidden.*"]}}
    guarded = {"name": "guarded", "function_name": "remote", "connector_id": "<id:0>", "guardrails": guardrails}
    await d.send("POST", REGISTER, guarded)  # <id:4> task, <id:5> model
    await settle(d)
    await d.send("POST", f"{MODELS}/<id:5>/_deploy")  # <id:6> task
    await settle(d)
    await d.send("POST", f"{MODELS}/<id:5>/_predict", ask("the forbidden word"))
    await d.send("POST", f"{MODELS}/<id:5>/_predict", ask("a fine word"))
    for model in ("<id:2>", "<id:5>"):
        await d.send("POST", f"{MODELS}/{model}/_undeploy")
    await settle(d)


async def model_groups(d: Differ, llm: ScriptedOpenAI) -> None:
    """The API specification's model group stories, a model registered into a group, moved and updated."""
    nlp = {"name": "NLP_Group", "description": "Model group for NLP models."}
    await d.send("POST", f"{GROUPS}/_register", nlp)  # <id:0> group
    await d.send("POST", f"{GROUPS}/_register", {"name": "Other_Group"})  # <id:1> group
    await d.send("POST", f"{GROUPS}/_register", nlp)  # the name is taken
    await d.send("POST", f"{GROUPS}/_register", {"description": "no name"})
    await d.send("GET", f"{GROUPS}/<id:0>")
    await d.send("PUT", f"{GROUPS}/<id:0>", {"description": "This is the updated description."})
    await d.send("PUT", f"{GROUPS}/<id:0>", {"description": "This is the updated description."})  # a no-op
    await d.send("PUT", f"{GROUPS}/<id:1>", {"name": "NLP_Group"})  # the name is taken
    await d.send("PUT", f"{GROUPS}/not-a-group", {"description": "x"})
    await d.send("GET", f"{GROUPS}/<id:0>")
    await d.send("GET", f"{GROUPS}/not-a-group")
    await settle(d)
    await d.send("GET", f"{GROUPS}/_search", {"query": {"match_all": {}}, "size": 1000})
    await d.send("POST", f"{GROUPS}/_search", {"query": {"bool": {"must": [{"terms": {"_id": ["<id:0>"]}}]}}})
    await d.send(
        "POST", f"{GROUPS}/_search", {"query": {"bool": {"filter": {"term": {"name.keyword": "Other_Group"}}}}}
    )

    await d.send("POST", CREATE, chat_connector(llm))  # <id:2> connector
    register = {"name": "grouped", "function_name": "remote", "connector_id": "<id:2>", "model_group_id": "<id:0>"}
    await d.send("POST", REGISTER, register)  # <id:3> task, <id:4> model
    await settle(d)
    await d.send("GET", f"{MODELS}/<id:4>")
    await d.send("GET", f"{GROUPS}/<id:0>")
    await d.send("DELETE", f"{GROUPS}/<id:0>")  # it holds a model
    await d.send("PUT", f"{MODELS}/<id:4>", {"name": "updated", "description": "moved", "model_group_id": "<id:1>"})
    await d.send("GET", f"{MODELS}/<id:4>")
    await d.send("GET", f"{GROUPS}/<id:1>")
    await d.send("PUT", f"{MODELS}/<id:4>", {"model_group_id": "not-a-group"})
    await d.send("PUT", f"{MODELS}/<id:4>", {"connector_id": "<id:2>", "connector": {"name": "c"}})
    await d.send("PUT", f"{MODELS}/not-a-model", {"name": "x"})
    await d.send("PUT", f"{MODELS}/<id:4>")
    await settle(d)  # the real node finds a group's models with a search
    await d.send("DELETE", f"{GROUPS}/<id:0>")  # empty now
    await d.send("GET", f"{GROUPS}/<id:0>")
    await d.send("DELETE", f"{MODELS}/<id:4>")
    await settle(d)
    await d.send("DELETE", f"{GROUPS}/<id:1>")


ML_SCENARIOS: dict[str, MLScenario] = {
    "connectors": connectors,
    "connector_errors": connector_errors,
    "chat_model": chat_model,
    "predict_deploys_on_demand": predict_deploys_on_demand,
    "embedding_model": embedding_model,
    "model_search": model_search,
    "register_errors": register_errors,
    "unknown_ids": unknown_ids,
    "remote_errors": remote_errors,
    "call_options": call_options,
    "model_groups": model_groups,
}
