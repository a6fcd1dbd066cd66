"""Connectors, models, tasks and predict over HTTP: the documented flow, privacy, credentials, hostile input.

Remote models call a real local OpenAI-compatible server (tests/support/scripted_openai.py)
through the real connector code; the built-in model is the test embedder double.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import numpy as np
import pytest
from aiohttp import web

from memory_plugin.app import create_app
from memory_plugin.auth import Principal
from memory_plugin.ml.routes import ML as ML_SERVICE
from memory_plugin.ml.service import BUILT_IN
from memory_plugin.ml.stores.base import KINDS
from tests.support.scripted_openai import ScriptedOpenAI, chat_connector, embedding_connector, embedding_of

pytestmark = pytest.mark.backends("embedded", "opensearch")

ML = "/_plugins/_ml"
LOOPBACK = r"^http://127\.0\.0\.1:.*$"
JSON = {"Content-Type": "application/json"}
ALL = {"query": {"match_all": {}}}


@pytest.fixture
async def openai(aiohttp_server):  # type: ignore[no-untyped-def]
    scripted = ScriptedOpenAI()
    server = await aiohttp_server(scripted.app())
    scripted.url = str(server.make_url("")).rstrip("/")  # type: ignore[attr-defined]
    return scripted


def ml_client(aiohttp_client, settings, embedder, **changes):  # type: ignore[no-untyped-def]
    """``changes``: keys of ``[ml]``."""
    trusting = {"trusted_endpoints_regex": (LOOPBACK,), "allow_private_addresses": True, **changes}
    return aiohttp_client(create_app(settings.replace(ml=trusting), embedder=embedder))


@pytest.fixture
async def ml(aiohttp_client, settings, embedder, alice, bob, carol, admin):  # type: ignore[no-untyped-def]
    """The app, trusting loopback endpoints (where the scripted server runs)."""
    return await ml_client(aiohttp_client, settings, embedder)


async def call(api, caller, method: str, path: str, body: Any = None, status: int = 200) -> Any:
    response = await api.request(method, ML + path, json=body, headers=caller.headers)
    payload = await response.json()
    assert response.status == status, payload
    return payload


async def remote_model(api, caller, connector: dict[str, Any]) -> tuple[str, str]:
    connector_id = (await call(api, caller, "POST", "/connectors/_create", connector))["connector_id"]
    registered = await call(
        api, caller, "POST", "/models/_register", {"name": "m", "function_name": "remote", "connector_id": connector_id}
    )
    assert registered["status"] == "CREATED"
    return connector_id, registered["model_id"]


async def test_the_documented_flow_calls_the_remote_model_with_its_owners_key(ml, alice, openai):
    connector_id, model_id = await remote_model(ml, alice, chat_connector(openai.url, "sk-alice"))
    shown = await call(ml, alice, "GET", f"/connectors/{connector_id}")
    assert "credential" not in shown and shown["version"] == "1" and shown["actions"][0]["action_type"] == "PREDICT"

    deployed = await call(ml, alice, "POST", f"/models/{model_id}/_deploy")
    assert deployed["task_type"] == "DEPLOY_MODEL" and deployed["status"] == "COMPLETED"
    task = await call(ml, alice, "GET", f"/tasks/{deployed['task_id']}")
    assert task["model_id"] == model_id and task["state"] == "COMPLETED"
    model = await call(ml, alice, "GET", f"/models/{model_id}")
    assert model["model_state"] == "DEPLOYED" and model["connector_id"] == connector_id

    messages = [{"role": "user", "content": 'say "hi"'}]
    answer = await call(ml, alice, "POST", f"/models/{model_id}/_predict", {"parameters": {"messages": messages}})
    [result] = answer["inference_results"]
    [output] = result["output"]
    assert result["status_code"] == 200 and output["name"] == "response"
    assert output["dataAsMap"]["choices"][0]["message"]["content"] == 'scripted answer to: say "hi"'
    assert output["dataAsMap"]["usage"]["total_tokens"] == 12.0  # ml-commons reads answers with Gson: doubles
    [sent] = openai.requests
    assert sent.authorization == "Bearer sk-alice"
    assert sent.body == {"model": "gpt-4o-mini", "messages": messages}


async def test_credentials_are_sealed_at_rest_and_never_shown(ml, alice, openai):
    connector_id, model_id = await remote_model(ml, alice, chat_connector(openai.url, "sk-very-secret"))
    inline = {"name": "inline", "function_name": "remote", "connector": chat_connector(openai.url, "sk-inline-secret")}
    inline_id = (await call(ml, alice, "POST", "/models/_register", inline))["model_id"]
    for path in (f"/connectors/{connector_id}", f"/models/{inline_id}", "/connectors/_search", "/models/_search"):
        text = await (await ml.get(ML + path, headers=alice.headers)).text()
        assert "-secret" not in text and '"credential"' not in text, path
    owner = Principal(alice.organization_id, alice.user_id)
    stored = [json.dumps(d.source) for kind in KINDS for d in await ml.app[ML_SERVICE].store.all(kind, owner)]
    assert len(stored) == 7 and not any("-secret" in text for text in stored)  # a connector; 2 models, groups, tasks
    assert sum('"openAI_key": "v1:' in text for text in stored) == 2
    # the inline connector's key still works: it is opened only for the call
    parameters = {"parameters": {"messages": [{"role": "user", "content": "x"}]}}
    await call(ml, alice, "POST", f"/models/{inline_id}/_predict", parameters)
    assert openai.requests[-1].authorization == "Bearer sk-inline-secret"


async def test_two_organisations_use_their_own_endpoints_and_keys(aiohttp_server, ml, alice, carol):
    first, second = ScriptedOpenAI(), ScriptedOpenAI()
    urls = [str((await aiohttp_server(s.app())).make_url("")).rstrip("/") for s in (first, second)]
    _, alice_model = await remote_model(ml, alice, chat_connector(urls[0], "sk-org-1"))
    carol_connector, carol_model = await remote_model(ml, carol, chat_connector(urls[1], "sk-org-2"))
    body = {"parameters": {"messages": [{"role": "user", "content": "hello"}]}}
    await asyncio.gather(
        *(call(ml, who, "POST", f"/models/{model}/_predict", body) for who, model in [(alice, alice_model)] * 3),
        *(call(ml, who, "POST", f"/models/{model}/_predict", body) for who, model in [(carol, carol_model)] * 3),
    )
    assert [r.authorization for r in first.requests] == ["Bearer sk-org-1"] * 3
    assert [r.authorization for r in second.requests] == ["Bearer sk-org-2"] * 3
    # nothing of one organisation exists for the other
    for method, path in [
        ("GET", f"/models/{carol_model}"),
        ("POST", f"/models/{carol_model}/_predict"),
        ("POST", f"/models/{carol_model}/_deploy"),
        ("GET", f"/connectors/{carol_connector}"),
        ("PUT", f"/connectors/{carol_connector}"),
        ("DELETE", f"/models/{carol_model}"),
    ]:
        answer = await call(ml, alice, method, path, body if method != "GET" else None, status=404)
        assert answer["error"]["type"] == "status_exception"
    assert (await call(ml, alice, "DELETE", f"/connectors/{carol_connector}"))["result"] == "not_found"
    listed = await call(ml, alice, "POST", "/models/_search", {"query": {"match_all": {}}})
    assert [hit["_id"] for hit in listed["hits"]["hits"]] == [alice_model]
    await call(ml, carol, "GET", f"/models/{carol_model}")  # still there for its owner


async def test_text_embedding_remote_and_built_in(ml, alice, openai, embedder):
    _, model_id = await remote_model(ml, alice, embedding_connector(openai.url, "sk-e"))
    docs = ["first text", "zweiter Text"]
    answer = await call(ml, alice, "POST", f"/_predict/text_embedding/{model_id}", {"text_docs": docs})
    [result] = answer["inference_results"]
    assert [o["data"] for o in result["output"]] == [embedding_of(d) for d in docs]
    assert all(o["shape"] == [3] and o["data_type"] == "FLOAT32" for o in result["output"])
    assert openai.requests[-1].body == {"input": docs, "model": "text-embedding-3-small"}

    expected = embedder.passage(docs)
    for model in ("built-in", embedder.describe()["name"] if hasattr(embedder, "describe") else None):
        if model is None:
            continue
        if model != "built-in":
            body = {"name": model, "version": "1.0.0", "model_format": "ONNX"}
            model = (await call(ml, alice, "POST", "/models/_register", body))["model_id"]
            shown = await call(ml, alice, "GET", f"/models/{model}")
            assert shown["algorithm"] == "TEXT_EMBEDDING"
        answer = await call(ml, alice, "POST", f"/_predict/text_embedding/{model}", {"text_docs": docs})
        vectors = [r["output"][0]["data"] for r in answer["inference_results"]]
        # the same float32 numbers, through the batcher and JSON: 1e-6 covers float32's last digit only
        np.testing.assert_allclose(np.array(vectors), expected, atol=1e-6)
    bare = await call(
        ml, alice, "POST", "/_predict/text_embedding/built-in", {"text_docs": ["x"], "return_number": False}
    )
    assert bare["inference_results"][0]["output"][0] == {
        "name": "sentence_embedding",
        "data_type": "FLOAT32",
        "shape": [embedder.dimension],
    }
    unknown = {"name": "huggingface/sentence-transformers/all-MiniLM-L6-v2", "version": "1.0.1", "model_format": "ONNX"}
    refused = await call(ml, alice, "POST", "/models/_register", unknown, status=400)
    assert "built-in" in refused["error"]["reason"]


async def test_an_optional_field_left_out_is_left_out_of_get_and_search(ml, alice, openai):
    """ml-commons' ``toXContent`` writes a field only when it has a value (the API specification's model
    schema refuses a null description)."""
    bare_connector = embedding_connector(openai.url, "sk-d")
    connector_id, remote = await remote_model(ml, alice, bare_connector)
    local = (
        await call(ml, alice, "POST", "/models/_register", {"name": BUILT_IN, "version": "1", "model_format": "ONNX"})
    )["model_id"]
    described = {"name": BUILT_IN, "version": "1", "model_format": "ONNX", "description": "kept"}
    kept = (await call(ml, alice, "POST", "/models/_register", described))["model_id"]
    shown = {model: await call(ml, alice, "GET", f"/models/{model}") for model in (remote, local, kept)}
    hits = (await call(ml, alice, "POST", "/models/_search", ALL))["hits"]["hits"]
    found = {hit["_id"]: hit["_source"] for hit in hits}
    assert found.keys() == shown.keys()
    for model, view in [*shown.items(), *found.items()]:
        assert None not in view.values(), view
        assert ("description" in view) is (model == kept), view
    assert shown[kept]["description"] == found[kept]["description"] == "kept"
    connector = await call(ml, alice, "GET", f"/connectors/{connector_id}")
    [connector_hit] = (await call(ml, alice, "POST", "/connectors/_search", ALL))["hits"]["hits"]
    for view in (connector, connector_hit["_source"]):
        assert "description" not in view and None not in view.values(), view


async def test_connector_rules_and_errors_as_ml_commons_words_them(ml, alice, openai):
    good = chat_connector(openai.url, "k")
    cases = [
        ({}, "Connector name is null"),
        ({"name": "x"}, "Connector version is null"),
        ({"name": "x", "version": 1}, "Connector protocol is null"),
        ({"name": "x", "version": 1, "protocol": "http"}, "Connector credential is null or empty list"),
        ({**good, "protocol": "ftp"}, "Can't find class for type ftp"),
        ({k: v for k, v in good.items() if k != "actions"}, "No actions configured for this connector"),
        ({**good, "actions": [{"action_type": "eat", "method": "POST", "url": "x"}]}, "No enum constant"),
        ({**good, "actions": [{"action_type": "predict", "url": "x"}]}, "method can't be null"),
        ({**good, "actions": [{"action_type": "predict", "method": "POST"}]}, "url can't be null"),
        ({**good, "name": {"a": 1}}, "[name] must be a string"),
        ({**good, "credential": {"k": {"a": 1}}}, "[credential.k] must be a string"),
        (
            {**good, "actions": [{**good["actions"][0], "url": "https://evil.example.com/x"}]},
            "Connector URL is not matching the trusted connector endpoint regex, URL is: https://evil.example.com/x",
        ),
        ({**good, "protocol": "aws_sigv4"}, "Missing credential"),
    ]
    for body, reason in cases:
        answer = await call(ml, alice, "POST", "/connectors/_create", body, status=400)
        assert answer["error"]["reason"].startswith(reason), (body, answer)
    malformed = await ml.post(ML + "/connectors/_create", data=b'{"name": "x"', headers=JSON | alice.headers)
    assert malformed.status == 400 and (await malformed.json())["error"]["type"] == "json_e_o_f_exception"
    not_array = await call(ml, alice, "POST", "/connectors/_create", {**good, "actions": {}}, status=400)
    assert not_array["error"]["type"] == "parsing_exception"
    sigv4 = {
        **good,
        "protocol": "aws_sigv4",
        "credential": {"access_key": "a", "secret_key": "b"},
        "parameters": {**good["parameters"], "region": "us-east-1", "service_name": "bedrock"},
    }
    assert (await call(ml, alice, "POST", "/connectors/_create", sigv4))["connector_id"]
    for missing in ("connectors/nope", "models/nope", "tasks/nope"):
        await call(ml, alice, "GET", "/" + missing, status=404)


async def test_update_and_delete_follow_the_models_that_use_a_connector(ml, alice, openai):
    connector_id, model_id = await remote_model(ml, alice, chat_connector(openai.url, "k"))
    updated = await call(
        ml, alice, "PUT", f"/connectors/{connector_id}", {"description": "new", "parameters": {"a": 1}}
    )
    assert updated["result"] == "updated"
    shown = await call(ml, alice, "GET", f"/connectors/{connector_id}")
    assert shown["description"] == "new" and shown["parameters"]["a"] == "1" and shown["parameters"]["model"]
    await call(ml, alice, "POST", f"/models/{model_id}/_deploy")
    busy = await call(ml, alice, "PUT", f"/connectors/{connector_id}", {"description": "x"}, status=400)
    assert busy["error"]["reason"] == (
        f"1 models are still using this connector, please undeploy the models first: [{model_id}]"
    )
    in_use = await call(ml, alice, "DELETE", f"/connectors/{connector_id}", status=409)
    assert "please delete or update the models first" in in_use["error"]["reason"]
    deployed = await call(ml, alice, "DELETE", f"/models/{model_id}", status=400)
    assert deployed["error"]["reason"].startswith("Model cannot be deleted in deploying or deployed state")
    await call(ml, alice, "POST", f"/models/{model_id}/_undeploy")
    assert (await call(ml, alice, "GET", f"/models/{model_id}"))["model_state"] == "UNDEPLOYED"
    assert (await call(ml, alice, "DELETE", f"/models/{model_id}"))["result"] == "deleted"
    assert (await call(ml, alice, "DELETE", f"/connectors/{connector_id}"))["result"] == "deleted"
    await call(ml, alice, "GET", f"/connectors/{connector_id}", status=404)


async def test_concurrent_registers_into_one_group_get_distinct_versions(ml, alice, openai):
    connector_id, first = await remote_model(ml, alice, chat_connector(openai.url, "k"))
    group = (await call(ml, alice, "GET", f"/models/{first}"))["model_group_id"]
    body = {"name": "m", "function_name": "remote", "connector_id": connector_id, "model_group_id": group}
    made = await asyncio.gather(*(call(ml, alice, "POST", "/models/_register", body) for _ in range(6)))
    versions = [(await call(ml, alice, "GET", f"/models/{m['model_id']}"))["model_version"] for m in made]
    assert sorted(versions, key=int) == [str(v) for v in range(2, 8)]


async def test_hostile_connectors_and_remote_endpoints(aiohttp_client, aiohttp_server, settings, embedder, alice):
    async def hang(request: web.Request) -> web.Response:
        await asyncio.sleep(30)
        return web.json_response({})

    async def garbage(request: web.Request) -> web.Response:
        return web.Response(body=b"\x00not json{{", content_type="application/json")

    async def broken(request: web.Request) -> web.Response:
        return web.json_response({"error": "down"}, status=503)

    remote = web.Application()
    remote.router.add_post("/hang", hang)
    remote.router.add_post("/garbage", garbage)
    remote.router.add_post("/broken", broken)
    url = str((await aiohttp_server(remote)).make_url("")).rstrip("/")

    # trusted patterns say loopback is fine, but private addresses are not allowed: refused at call time
    strict = await ml_client(aiohttp_client, settings, embedder, allow_private_addresses=False)
    _, model = await remote_model(strict, alice, chat_connector(url, "sk-hidden"))
    body = {"parameters": {"messages": []}}
    refused = await call(strict, alice, "POST", f"/models/{model}/_predict", body, status=400)
    assert refused["error"]["reason"] == "Remote inference host name has private ip address: 127.0.0.1"
    await strict.close()

    def at(path: str, **action: Any) -> dict[str, Any]:
        connector = chat_connector(url, "sk-hidden")
        connector["actions"][0].update(url=url + path, **action)
        return connector

    # A short timeout only where it is tested: the remotes that do answer may be slow on a loaded machine.
    impatient = await ml_client(aiohttp_client, settings, embedder, connector_timeout=2.0)
    _, hanging = await remote_model(impatient, alice, at("/hang"))
    timed_out = await call(impatient, alice, "POST", f"/models/{hanging}/_predict", body, status=504)
    assert timed_out["error"]["reason"] == "the remote model did not answer within 2 s"  # not its 30 s
    await impatient.close()

    ml = await ml_client(aiohttp_client, settings, embedder)

    _, down = await remote_model(ml, alice, at("/broken"))
    failed = await call(ml, alice, "POST", f"/models/{down}/_predict", body, status=503)
    assert failed["error"]["reason"] == 'Error from remote service: {"error": "down"}'

    _, nonsense = await remote_model(ml, alice, at("/garbage"))
    wrapped = await call(ml, alice, "POST", f"/models/{nonsense}/_predict", body)
    assert wrapped["inference_results"][0]["output"][0]["dataAsMap"] == {"response": "\x00not json{{"}
    _, as_embedding = await remote_model(
        ml, alice, at("/garbage", post_process_function="connector.post_process.openai.embedding")
    )
    await call(ml, alice, "POST", f"/_predict/text_embedding/{as_embedding}", {"text_docs": ["a"]}, status=400)

    # a template naming a parameter nobody gave: ml-commons' "Invalid payload", the credential masked
    in_body = at("/hang", request_body='{"key": "${credential.openAI_key}", "x": ${parameters.missing}}')
    _, leaky = await remote_model(ml, alice, in_body)
    invalid = await call(ml, alice, "POST", f"/models/{leaky}/_predict", body, status=400)
    assert invalid["error"]["reason"] == 'Invalid payload: {"key": "*****", "x": ${parameters.missing}}'
    # a credential in the URL's query string, sent where the trusted patterns do not allow: masked too
    in_query = at("/hang")
    in_query["actions"][0]["url"] = "http://${parameters.host}/v1?key=${credential.openAI_key}"
    in_query["parameters"]["host"] = url.removeprefix("http://")
    _, moved = await remote_model(ml, alice, in_query)
    elsewhere = {"parameters": {"messages": [], "host": "evil.example.com"}}
    moved_answer = await call(ml, alice, "POST", f"/models/{moved}/_predict", elsewhere, status=400)
    assert moved_answer["error"]["reason"].endswith("URL is: http://evil.example.com/v1?key=*****")
    # a call's parameter is JSON-escaped ("/" as "\/"): a URL Java's URI.create refuses, as on the real node
    escaped = {"parameters": {"messages": [], "host": "evil.example.com/x"}}
    moved_answer = await call(ml, alice, "POST", f"/models/{moved}/_predict", escaped, status=400)
    assert moved_answer["error"]["reason"] == (
        "Illegal character in authority at index 7: http://evil.example.com\\/x/v1?key=*****"
    )
    # a huge predict body is refused before it is read whole
    huge = b'{"parameters": {"x": "' + b"a" * (settings.http.max_body_bytes + 1) + b'"}}'
    too_big = await ml.post(f"{ML}/models/{hanging}/_predict", data=huge, headers=JSON | alice.headers)
    assert too_big.status == 413
    everything = str([r async for r in _all_text(ml, alice)])
    assert "sk-hidden" not in everything


async def test_a_connector_call_that_cannot_be_sent_is_400_and_never_shows_its_credential(
    aiohttp_client, settings, embedder, alice, openai, caplog
):
    """A URL made invalid by its credential, a credential that would split a header, a URL with a user part:
    a 400 whose message masks the credential (and no log line shows it), or the call made as ml-commons makes it."""
    trusted = (LOOPBACK, r"^http://user:[^@]*@127\.0\.0\.1:.*$")
    ml = await ml_client(aiohttp_client, settings, embedder, trusted_endpoints_regex=trusted)
    body = {"parameters": {"messages": [{"role": "user", "content": "hi"}]}}
    bad_port = chat_connector(openai.url, "sk-hidden-1")
    bad_port["actions"][0]["url"] = "http://127.0.0.1:99999/${credential.openAI_key}"
    _, model = await remote_model(ml, alice, bad_port)
    refused = await call(ml, alice, "POST", f"/models/{model}/_predict", body, status=400)
    assert refused["error"]["reason"] == "the connector's URL is not a valid URL: http://127.0.0.1:99999/*****"

    split = chat_connector(openai.url, "sk-hidden-2\r\nX-Injected: 1")
    _, model = await remote_model(ml, alice, split)
    refused = await call(ml, alice, "POST", f"/models/{model}/_predict", body, status=400)
    assert refused["error"]["reason"] == "the connector's header ['Authorization'] holds a control character"
    assert not openai.requests

    # ml-commons' HTTP client keeps no user part: the call goes out with the connector's Authorization alone
    with_user = chat_connector(openai.url, "sk-hidden-3")
    with_user["actions"][0]["url"] = "http://user:sk-hidden-4@${parameters.endpoint}/v1/chat/completions"
    _, model = await remote_model(ml, alice, with_user)
    await call(ml, alice, "POST", f"/models/{model}/_predict", body)
    assert [sent.authorization for sent in openai.requests] == ["Bearer sk-hidden-3"]
    everything = str([r async for r in _all_text(ml, alice)]) + caplog.text
    assert not any(f"sk-hidden-{n}" in everything for n in (1, 2, 4))


@pytest.mark.parametrize(
    ("url", "what", "at"),
    [
        ("{base}/v1/chat/completions?v=${parameters.v}", "query", "{"),
        ("{base}/v1/${parameters.v}/completions", "path", "{"),
        ("http://127.0.0.1:${parameters.v}/v1/chat/completions", "authority", "127"),  # the authority's start
    ],
    ids=["query", "path", "port"],
)
async def test_a_url_placeholder_left_unfilled_sends_nothing_and_is_uri_creates_400(ml, alice, openai, url, what, at):
    """ml-commons fills the URL, then ``URI.create`` refuses the placeholder's "{": an
    illegal_argument_exception in Java's words, and no call; with the parameter given, the call is made."""
    sent = url.replace("{base}", openai.url)
    connector = chat_connector(openai.url, "sk-url")
    connector["actions"][0]["url"] = sent
    _, model = await remote_model(ml, alice, connector)
    messages = [{"role": "user", "content": "hi"}]
    refused = await call(ml, alice, "POST", f"/models/{model}/_predict", {"parameters": {"messages": messages}}, 400)
    reason = f"Illegal character in {what} at index {sent.index(at)}: {sent}"
    assert refused["error"]["type"] == "illegal_argument_exception" and refused["error"]["reason"] == reason
    assert refused["error"]["caused_by"] == {"type": "u_r_i_syntax_exception", "reason": reason}
    assert not openai.requests
    if what == "query":
        await call(ml, alice, "POST", f"/models/{model}/_predict", {"parameters": {"messages": messages, "v": "1"}})
        assert [request.path for request in openai.requests] == ["/v1/chat/completions?v=1"]


def _poisoned(path: list[str | int], text: str = "x\ud800") -> str:
    """A connector as JSON text with a lone surrogate (valid JSON, not Unicode) at ``path``."""
    connector: Any = chat_connector("http://127.0.0.1:1", "sk-1")
    place = connector
    for step in path[:-1]:
        place = place[step]
    if isinstance(place, dict) and path[-1] == "KEY":
        place[text] = "v"
    else:
        place[path[-1]] = text
    return json.dumps(connector)  # ensure_ascii: the surrogate travels as the escape \ud800


@pytest.mark.parametrize(
    ("path", "culprit"),
    [
        (["name"], "[name]"),
        (["parameters", "model"], "[parameters.model]"),
        (["credential", "KEY"], "the key [credential.x\\ud800]"),
        (["actions", 0, "url"], "[actions[0].url]"),
        (["actions", 0, "headers", "Authorization"], "[actions[0].headers.Authorization]"),
        (["actions", 0, "request_body"], "[actions[0].request_body]"),
    ],
)
async def test_a_lone_surrogate_anywhere_in_an_ml_body_is_400_naming_it_and_nothing_is_stored(ml, alice, path, culprit):
    """ml-commons' node stores it (Jackson reads the escape); here it failed the insert with a 500."""
    headers = JSON | alice.headers
    created = await ml.post(f"{ML}/connectors/_create", data=_poisoned(path), headers=headers)
    body = await created.json()
    assert created.status == 400, body
    assert body["error"]["type"] == "illegal_argument_exception"
    assert f"{culprit} holds a lone surrogate" in body["error"]["reason"], body
    assert (await call(ml, alice, "POST", "/connectors/_search", ALL))["hits"]["total"]["value"] == 0


async def test_a_lone_surrogate_in_model_register_update_and_search_is_400(ml, alice, openai):
    connector_id, model_id = await remote_model(ml, alice, chat_connector(openai.url, "sk-1"))
    headers = JSON | alice.headers
    for method, path, text in [
        ("POST", "/models/_register", '{"name": "m\\ud800", "function_name": "remote", "connector_id": "%s"}'),
        ("PUT", f"/connectors/{connector_id}", '{"description": "\\udfff"}'),
        ("POST", "/models/_search", '{"query": {"term": {"name": "m\\ud800"}}}'),
        ("POST", "/connectors/_search", '{"query": {"term": {"name": "\\udc00"}}}'),
    ]:
        answer = await ml.request(method, ML + path, data=text.replace("%s", connector_id), headers=headers)
        assert answer.status == 400, (path, await answer.text())
        assert "holds a lone surrogate" in (await answer.json())["error"]["reason"]
    assert (await call(ml, alice, "GET", f"/connectors/{connector_id}"))["description"] == (
        "an OpenAI-compatible chat model"
    )
    assert (await call(ml, alice, "POST", "/models/_search", ALL))["hits"]["total"]["value"] == 1
    assert (await call(ml, alice, "GET", f"/models/{model_id}"))["name"] == "m"


async def _all_text(ml, alice):  # type: ignore[no-untyped-def]
    for path in ("/connectors/_search", "/models/_search"):
        yield await (await ml.get(ML + path, headers=alice.headers)).text()


async def test_a_users_erasure_removes_their_models_and_connectors(ml, alice, bob, openai):
    await remote_model(ml, alice, chat_connector(openai.url, "k"))
    _, bobs = await remote_model(ml, bob, chat_connector(openai.url, "k2"))
    response = await ml.delete("/v2/ai/conversation_histories?filter[user_id]=alice", headers=alice.headers)
    erased = (await response.json())["data"]
    assert response.status == 200 and erased["deleted_ml_documents"] == 4  # connector, model, group, task
    assert (await call(ml, alice, "POST", "/models/_search", {}))["hits"]["hits"] == []
    await call(ml, bob, "GET", f"/models/{bobs}")


async def test_the_reported_version_is_one_with_every_api_served_and_configurable(
    aiohttp_client, settings, embedder, alice, tmp_path
):
    """3.9.0 by default, the newest OpenSearch whose memory APIs are all served (a client gating on the
    version then uses 3.9's custom container ids); ``reported_version`` sets an older one."""
    from memory_plugin.settings import load_settings

    for reported, lucene in ((None, "10.5.1"), ("3.3.0", "10.3.1"), ("2.19.1", "9.12.1")):
        changed = settings.replace(auth={"keys_file": settings.resolved_keys_file}, data_dir=tmp_path / str(reported))
        changed = changed if reported is None else changed.replace(node={"reported_version": reported})
        api = await aiohttp_client(create_app(changed, embedder=embedder))
        version = (await (await api.get("/", headers=alice.headers)).json())["version"]
        assert (version["number"], version["lucene_version"]) == (reported or "3.9.0", lucene)
        if reported is None:  # a 3.9 request: a container under an id of the caller's choosing
            body = {"name": "c", "memory_container_id": "chosen-id"}
            created = await api.post("/_plugins/_ml/memory_containers/_create", json=body, headers=alice.headers)
            assert (await created.json())["memory_container_id"] == "chosen-id"
    assert load_settings(environ={"MEMORY_PLUGIN_NODE_REPORTED_VERSION": "3.3.0"}).node.reported_version == "3.3.0"
    with pytest.raises(ValueError, match="reported_version"):
        load_settings(environ={"MEMORY_PLUGIN_NODE_REPORTED_VERSION": "9.9.9"})


async def test_an_aws_sigv4_connector_signs_each_call_with_its_keys(aiohttp_server, ml, alice):
    """The remote end checks the signature as AWS does: botocore recomputes it from what arrived."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    seen: list[bool] = []

    async def bedrock(request: web.Request) -> web.Response:
        body = await request.read()
        authorization = request.headers["Authorization"]
        signed = authorization.split("SignedHeaders=")[1].split(",")[0].split(";")
        headers = {name: request.headers[name] for name in signed}
        aws = AWSRequest(method=request.method, url=str(request.url), data=body, headers=headers)
        aws.context["timestamp"] = request.headers["X-Amz-Date"]
        auth = SigV4Auth(Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI", "session-1"), "bedrock", "us-east-1")
        signature = auth.signature(auth.string_to_sign(aws, auth.canonical_request(aws)), aws)
        seen.append(authorization.endswith(f"Signature={signature}"))
        assert "/us-east-1/bedrock/aws4_request" in authorization and request.headers["X-Amz-Security-Token"]
        if not seen[-1]:
            return web.json_response({"message": "SignatureDoesNotMatch"}, status=403)
        return web.json_response({"embedding": [0.5, -0.25]})

    remote = web.Application()
    remote.router.add_post("/model/titan/invoke", bedrock)
    url = str((await aiohttp_server(remote)).make_url("")).rstrip("/")
    connector = {
        "name": "bedrock",
        "version": "1",
        "protocol": "aws_sigv4",
        "parameters": {"region": "us-east-1", "service_name": "bedrock"},
        "credential": {"access_key": "AKIDEXAMPLE", "secret_key": "wJalrXUtnFEMI", "session_token": "session-1"},
        "actions": [
            {
                "action_type": "predict",
                "method": "POST",
                "url": f"{url}/model/titan/invoke",
                "request_body": '{ "inputText": "${parameters.inputText}" }',
                "pre_process_function": "connector.pre_process.bedrock.embedding",
                "post_process_function": "connector.post_process.bedrock.embedding",
            }
        ],
    }
    _, model_id = await remote_model(ml, alice, connector)
    answer = await call(ml, alice, "POST", f"/_predict/text_embedding/{model_id}", {"text_docs": ['say "hi"']})
    assert answer["inference_results"][0]["output"][0]["data"] == [0.5, -0.25]
    assert seen == [True]
    # a wrong secret is seen as such by the remote end: the signature is the keys', not decoration
    wrong = {**connector, "credential": {**connector["credential"], "secret_key": "not-the-secret"}}
    _, other = await remote_model(ml, alice, wrong)
    refused = await call(ml, alice, "POST", f"/_predict/text_embedding/{other}", {"text_docs": ["x"]}, status=403)
    assert refused["error"]["reason"] == 'Error from remote service: {"message": "SignatureDoesNotMatch"}'
    assert seen == [True, False]
