"""Which error a request with several problems gets, now that the routes parse the body and the services
look things up: what ml-commons' REST layer parses comes first, what needs the store after it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Caller
from tests.http import test_ml
from tests.http.test_ml import call, remote_model
from tests.support.scripted_openai import chat_connector

pytestmark = pytest.mark.backends("embedded", "opensearch")

ml, openai = test_ml.ml, test_ml.openai


async def refused(api: Any, caller: Caller, method: str, path: str, body: Any, status: int) -> str:
    return str((await call(api, caller, method, path, body, status=status))["error"]["reason"])


async def test_a_bad_body_is_refused_before_the_missing_document_it_names(ml, alice):
    """The body is read before the connector, model or group is looked for."""
    assert "[name] must be a string" in await refused(ml, alice, "PUT", "/connectors/nope", {"name": {}}, 400)
    assert "Wrong access value" in await refused(ml, alice, "PUT", "/model_groups/nope", {"access_mode": "x"}, 400)
    assert "[text_docs] must be an array" in await refused(
        ml, alice, "POST", "/models/nope/_predict", {"text_docs": "x"}, 400
    )
    both = {"connector_id": "c", "connector": {"name": "c"}}
    assert "both stand-alone connector and internal connector" in await refused(
        ml, alice, "PUT", "/models/nope", both, 400
    )
    assert "empty body" in await refused(ml, alice, "PUT", "/models/nope", None, 400)
    assert "[model_ids] must be an array" in await refused(
        ml, alice, "POST", "/models/_undeploy", {"model_ids": 1}, 400
    )


async def test_a_good_body_on_a_missing_document_is_a_404(ml, alice):
    reason = await refused(ml, alice, "PUT", "/connectors/nope", {"name": "x"}, 404)
    assert reason == "Failed to find connector with the provided connector id: nope"
    assert (
        await refused(ml, alice, "POST", "/models/nope/_predict", {"text_docs": ["x"]}, 404) == "Failed to find model"
    )


async def test_checks_that_need_the_model_come_after_it_is_found(ml, alice):
    """An update field this server refuses is checked on a model that exists: a missing one is a 404 first."""
    limiter = {"rate_limiter": {"limit": "1", "unit": "MINUTES"}}
    reason = await refused(ml, alice, "PUT", "/models/nope", limiter, 404)
    assert reason == "Failed to find model to update with the provided model id: nope"


async def test_a_remote_models_own_connector_is_read_before_its_group_is_looked_for(ml, alice, openai):
    body = {"name": "m", "function_name": "remote", "model_group_id": "nope", "connector": {"name": "c"}}
    assert await refused(ml, alice, "POST", "/models/_register", body, 400) == "connector protocol is null"
    inline = chat_connector(openai.url, "k")
    del inline["credential"]
    body["connector"] = inline
    assert (
        await refused(ml, alice, "POST", "/models/_register", body, 400) == "Connector credential is null or empty list"
    )
    body["connector"] = chat_connector(openai.url, "k")
    assert await refused(ml, alice, "POST", "/models/_register", body, 404) == "Model group not found"
    # a built-in model's body never reads a connector
    built_in = {"name": "m", "function_name": "TEXT_EMBEDDING", "model_format": "ONNX", "connector": {"name": "c"}}
    assert "is not available here" in await refused(ml, alice, "POST", "/models/_register", built_in, 400)


async def test_a_search_body_is_parsed_before_anything_is_read(ml, alice, openai):
    await remote_model(ml, alice, chat_connector(openai.url, "k"))
    for path in ("/connectors/_search", "/models/_search", "/tasks/_search", "/model_groups/_search"):
        reason = await refused(ml, alice, "POST", path, {"query": {"nope": {}}}, 400)
        assert "unknown query [nope]" in reason, path
