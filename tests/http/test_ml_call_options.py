"""The connector and model options ml-commons acts on are acted on here too, or refused when saved.

``client_config`` (timeouts, retries, connections), a model's ``rate_limiter`` and its
``guardrails``, against a local remote that counts its calls and answers as scripted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from memory_plugin.auth import Principal
from memory_plugin.errors import StatusError
from memory_plugin.ml.model_requests import parse_predict_input
from memory_plugin.ml.routes import ML as ML_SERVICE
from memory_plugin.ml.service import MLService
from tests.http.test_ml import call, ml_client
from tests.support.scripted_openai import chat_connector

CHAT = {"parameters": {"messages": [{"role": "user", "content": "hello"}]}}
THROTTLED = (
    "Error from remote service: The request was denied due to remote server throttling. "
    "To change the retry policy and behavior, please update the connector client_config."
)


@dataclass
class Remote:
    """An OpenAI-style chat endpoint: each call takes the next scripted answer (the last one repeats)."""

    url: str = ""
    script: list[Callable[[], web.Response | None]] = field(default_factory=list)
    calls: int = 0
    in_flight: int = 0
    #: Set to let calls that wait on it answer.
    gate: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.calls += 1
        self.in_flight += 1
        try:
            answer = self.script[min(self.calls, len(self.script)) - 1]() if self.script else ok(body_text(body))
            if answer is None:  # a remote that answers nothing until released
                await self.gate.wait()
            return answer or ok(body_text(body))
        finally:
            self.in_flight -= 1


def body_text(body: Any) -> str:
    return str(body["messages"][-1]["content"])


def ok(content: str = "hello") -> web.Response:
    return web.json_response({"choices": [{"message": {"role": "assistant", "content": f"echo: {content}"}}]})


def hang() -> None:
    """A remote that answers nothing until the test releases it."""


def throttling() -> web.Response:
    return web.json_response(
        {"message": "Rate exceeded"}, status=429, headers={"x-amzn-ErrorType": "ThrottlingException:http://internal"}
    )


def too_many() -> web.Response:
    return web.json_response({"error": "slow down"}, status=429)


def bad_request() -> web.Response:
    return web.json_response({"error": "no"}, status=400)


@pytest.fixture
async def remote(aiohttp_server):  # type: ignore[no-untyped-def]
    scripted = Remote()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", scripted.handle)
    server = await aiohttp_server(app)
    scripted.url = str(server.make_url("")).rstrip("/")
    yield scripted
    scripted.gate.set()


@pytest.fixture
async def ml(aiohttp_client, settings, embedder, alice):  # type: ignore[no-untyped-def]
    return await ml_client(aiohttp_client, settings, embedder, connector_timeout=20.0)


async def model_on(api, caller, remote: Remote, **register: Any) -> str:
    connector = chat_connector(remote.url, "sk-x", **register.pop("connector", {}))
    connector_id = (await call(api, caller, "POST", "/connectors/_create", connector))["connector_id"]
    body = {"name": "m", "function_name": "remote", "connector_id": connector_id, **register}
    return str((await call(api, caller, "POST", "/models/_register", body))["model_id"])


async def test_read_timeout_ends_a_call_the_remote_does_not_answer(ml, alice, remote):
    """``read_timeout`` (seconds, as ml-commons reads it) ends the call long before the call's own deadline:
    ml-commons' words, with 504 where ml-commons answers 500 (the remote, not this server, failed)."""
    remote.script = [hang]  # never answers until the test ends
    model = await model_on(ml, alice, remote, connector={"client_config": {"read_timeout": 1}})
    failed = await call(ml, alice, "POST", f"/models/{model}/_predict", CHAT, status=504)
    assert failed["error"]["reason"] == "Error communicating with remote model: Read timed out"
    assert remote.calls == 1  # no max_retry_times: not tried again


async def test_a_throttled_call_is_retried_max_retry_times(ml, alice, remote):
    """ml-commons retries the remote's throttling (``x-amzn-ErrorType: ThrottlingException``), its 429s and
    5xx, ``max_retry_times`` times; then the last failure is the answer, in ml-commons' words."""
    remote.script = [throttling, too_many, ok]
    retried = {"client_config": {"max_retry_times": 2, "retry_backoff_millis": 10}}
    model = await model_on(ml, alice, remote, connector=retried)
    answer = await call(ml, alice, "POST", f"/models/{model}/_predict", CHAT)
    assert answer["inference_results"][0]["output"][0]["dataAsMap"]["choices"][0]["message"]["content"] == (
        "echo: hello"
    )
    assert remote.calls == 3

    remote.calls, remote.script = 0, [throttling]
    once = {"client_config": {"max_retry_times": 1, "retry_backoff_millis": 10}}
    model = await model_on(ml, alice, remote, connector=once)
    failed = await call(ml, alice, "POST", f"/models/{model}/_predict", CHAT, status=429)
    assert failed["error"]["reason"] == THROTTLED
    assert remote.calls == 2

    # no client_config: ml-commons' default, max_retry_times 0, tries once
    remote.calls = 0
    model = await model_on(ml, alice, remote)
    failed = await call(ml, alice, "POST", f"/models/{model}/_predict", CHAT, status=429)
    assert failed["error"]["reason"] == THROTTLED and remote.calls == 1

    # a 400 is the caller's: never retried
    remote.calls, remote.script = 0, [bad_request, ok]
    model = await model_on(ml, alice, remote, connector=retried)
    failed = await call(ml, alice, "POST", f"/models/{model}/_predict", CHAT, status=400)
    assert failed["error"]["reason"] == 'Error from remote service: {"error": "no"}' and remote.calls == 1


async def test_unbounded_retries_end_at_the_calls_deadline(aiohttp_client, settings, embedder, alice, remote):
    """``max_retry_times: -1`` retries until ``retry_timeout_seconds``, and never past the call's deadline."""
    # one second of retries 10 ms apart: a few dozen calls, each a round trip of this process's own CPU
    ml = await ml_client(aiohttp_client, settings, embedder, connector_timeout=1.0)
    remote.script = [too_many]
    forever = {"client_config": {"max_retry_times": -1, "retry_backoff_millis": 10, "retry_timeout_seconds": 600}}
    model = await model_on(ml, alice, remote, connector=forever)
    failed = await call(ml, alice, "POST", f"/models/{model}/_predict", CHAT, status=429)
    assert failed["error"]["reason"] == 'Error from remote service: {"error": "slow down"}'
    assert remote.calls >= 2


async def test_max_connection_bounds_a_connectors_calls_at_once(ml, alice, remote):
    remote.script = [hang]  # each call waits for the gate
    model = await model_on(ml, alice, remote, connector={"client_config": {"max_connection": 1}})
    calls = [asyncio.create_task(call(ml, alice, "POST", f"/models/{model}/_predict", CHAT)) for _ in range(2)]
    slots = ml.app[ML_SERVICE].remote._slots
    await _until(lambda: remote.calls == 1 and any(users == 2 for _, users in slots._held.values()))
    assert remote.in_flight == 1  # the second call waits for the first one's connection
    remote.gate.set()
    await asyncio.gather(*calls)
    assert remote.calls == 2


async def test_client_config_is_kept_as_ml_commons_keeps_it_and_bad_values_are_refused(ml, alice, remote):
    model_connector = chat_connector(remote.url, "k", client_config={"read_timeout": "7", "max_retry_times": 3})
    connector_id = (await call(ml, alice, "POST", "/connectors/_create", model_connector))["connector_id"]
    shown = await call(ml, alice, "GET", f"/connectors/{connector_id}")
    assert shown["client_config"] == {
        "max_connection": 30,
        "connection_timeout": 30000,
        "read_timeout": 7,
        "retry_backoff_millis": 200,
        "retry_timeout_seconds": 30,
        "max_retry_times": 3,
        "retry_backoff_policy": "constant",
    }
    for config, reason in [
        ({"retry_backoff_policy": "sometimes"}, "Unsupported retry backoff policy"),
        ({"read_timeout": -1}, "[client_config.read_timeout] must be at least 0, found [-1]"),
        ({"max_connection": 0}, "[client_config.max_connection] must be at least 1, found [0]"),
        ({"max_retry_times": "often"}, "[client_config.max_retry_times] must be an integer, found [often]"),
        ({"connection_timeout": {}}, "[client_config.connection_timeout] must be a number, found [START_OBJECT]"),
        ({"skip_ssl_verification": True}, "[client_config.skip_ssl_verification] is not supported here"),
    ]:
        refused = await call(
            ml, alice, "POST", "/connectors/_create", chat_connector(remote.url, "k", client_config=config), 400
        )
        assert refused["error"]["reason"].startswith(reason), (config, refused)
        updated = await call(ml, alice, "PUT", f"/connectors/{connector_id}", {"client_config": config}, 400)
        assert updated["error"]["reason"].startswith(reason)


async def test_a_models_rate_limiter_throttles_as_ml_commons(ml, alice, remote):
    limited = await model_on(ml, alice, remote, rate_limiter={"limit": "1", "unit": "MINUTES"})
    await call(ml, alice, "POST", f"/models/{limited}/_predict", CHAT)
    throttled = await call(ml, alice, "POST", f"/models/{limited}/_predict", CHAT, status=429)
    assert throttled["error"] == {
        "root_cause": [{"type": "status_exception", "reason": "Request is throttled at model level."}],
        "type": "status_exception",
        "reason": "Request is throttled at model level.",
    }
    assert remote.calls == 1  # the throttled call never reached the remote
    assert (await call(ml, alice, "GET", f"/models/{limited}"))["rate_limiter"] == {"limit": "1", "unit": "MINUTES"}
    other = await model_on(ml, alice, remote)  # another model has its own (no) limit
    await call(ml, alice, "POST", f"/models/{other}/_predict", CHAT)

    built_in = {"name": "built-in", "model_format": "ONNX", "rate_limiter": {"limit": 1, "unit": "HOURS"}}
    local = (await call(ml, alice, "POST", "/models/_register", built_in))["model_id"]
    await call(ml, alice, "POST", f"/_predict/text_embedding/{local}", {"text_docs": ["a"]})
    await call(ml, alice, "POST", f"/_predict/text_embedding/{local}", {"text_docs": ["a"]}, status=429)

    for limiter, reason in [
        ({"limit": "many", "unit": "MINUTES"}, "Limit field must be a positive number."),
        ({"limit": "-1", "unit": "MINUTES"}, "Limit field must be a positive number."),
        ({"limit": "1", "unit": "minutes"}, "No enum constant java.util.concurrent.TimeUnit.minutes"),
        ({"limit": "1"}, "[rate_limiter] needs both limit and unit"),
    ]:
        body = {"name": "m", "function_name": "remote", "connector": chat_connector(remote.url, "k")}
        refused = await call(ml, alice, "POST", "/models/_register", {**body, "rate_limiter": limiter}, 400)
        assert refused["error"]["reason"].startswith(reason), limiter


async def test_a_models_rate_limit_is_kept_in_the_store_that_every_process_shares(ml, alice, remote):
    """Another service over the same store (another process of the deployment: its OpenSearch ml index)
    draws from the same bucket: the limit is the deployment's, not each process's."""
    model = await model_on(ml, alice, remote, rate_limiter={"limit": "2", "unit": "HOURS"})
    await call(ml, alice, "POST", f"/models/{model}/_predict", CHAT)
    first = ml.app[ML_SERVICE]
    second = MLService(first.store, first.embedder, first.settings)
    await second.open()
    try:
        owner = Principal(alice.organization_id, alice.user_id)
        await second.predictions.predict(owner, model, parse_predict_input(CHAT))
        with pytest.raises(StatusError) as refused:
            await second.predictions.predict(owner, model, parse_predict_input(CHAT))
        assert refused.value.status == 429 and str(refused.value) == "Request is throttled at model level."
    finally:
        await second.close()
    await call(ml, alice, "POST", f"/models/{model}/_predict", CHAT, status=429)
    assert remote.calls == 2
    # a deleted model's bucket goes with it
    await call(ml, alice, "POST", f"/models/{model}/_undeploy")
    await call(ml, alice, "DELETE", f"/models/{model}")
    assert await first.store.get("rate_limit", owner, model) is None


async def test_regex_guardrails_refuse_input_before_it_is_sent_and_output_before_it_is_shown(ml, alice, remote):
    guardrails = {
        "type": "local_regex",
        "input_guardrail": {"regex": [".*forbidden.*"]},
        "output_guardrail": {"regex": [".*echo: leak.*"]},
    }
    model = await model_on(ml, alice, remote, guardrails=guardrails)

    def say(text: str) -> dict[str, Any]:
        return {"parameters": {"messages": [{"role": "user", "content": text}]}}

    refused = await call(ml, alice, "POST", f"/models/{model}/_predict", say("the forbidden word"), status=400)
    assert refused["error"]["reason"] == "guardrails triggered for user input"
    assert refused["error"]["type"] == "illegal_argument_exception"
    assert remote.calls == 0  # nothing was sent
    hidden = await call(ml, alice, "POST", f"/models/{model}/_predict", say("leak"), status=400)
    assert hidden["error"]["reason"] == "guardrails triggered for LLM output" and remote.calls == 1
    await call(ml, alice, "POST", f"/models/{model}/_predict", say("fine"))
    assert remote.calls == 2
    assert (await call(ml, alice, "GET", f"/models/{model}"))["guardrails"] == guardrails


async def test_guardrails_that_cannot_run_here_are_refused_when_the_model_is_saved(ml, alice, remote):
    body = {"name": "m", "function_name": "remote", "connector": chat_connector(remote.url, "k")}
    stop_words = {"input_guardrail": {"stop_words": [{"index_name": "words", "source_fields": ["title"]}]}}
    model_type = {"type": "model", "input_guardrail": {"model_id": "x", "response_validation_regex": "^accept$"}}
    for guardrails, reason in [
        (stop_words, "[guardrails.input_guardrail.stop_words] are not run here"),
        (model_type, "guardrails of type [model] are not run here"),
        ({"type": "words"}, "The type of guardrails is required, can not be null."),
        ({"output_guardrail": {"regex": ["(?<=x)y"]}}, "[guardrails.output_guardrail.regex[0]] is not a regular"),
    ]:
        refused = await call(ml, alice, "POST", "/models/_register", {**body, "guardrails": guardrails}, 400)
        assert refused["error"]["reason"].startswith(reason), guardrails
    built_in = {"name": "built-in", "model_format": "ONNX", "guardrails": {"input_guardrail": {"regex": ["x"]}}}
    refused = await call(ml, alice, "POST", "/models/_register", built_in, 400)
    assert refused["error"]["reason"] == "guardrails apply to remote models only"
    assert remote.calls == 0


async def _until(condition: Callable[[], bool], seconds: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)
