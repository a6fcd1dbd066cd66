"""The OpenAPI description matches the router both ways, and fuzzing finds no 5xx."""

from __future__ import annotations

import functools
from typing import Any

import pytest
import requests
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings

from memory_plugin.app import create_app
from memory_plugin.openapi import openapi_document
from tests.support.live import app_in_thread_with_key

METHODS = {"get", "post", "put", "delete", "patch", "head", "options"}


def routed_operations(app) -> set[tuple[str, str]]:
    operations = set()
    for route in app.router.routes():
        path = route.resource.canonical.rstrip("/") or "/"  # a trailing slash is the same operation
        methods = ["get", "post"] if route.method == "*" else [route.method.lower()]
        operations |= {(method, path) for method in methods if method != "head"}
    return operations


def described_operations() -> set[tuple[str, str]]:
    return {
        (method, path) for path, item in openapi_document()["paths"].items() for method in item if method in METHODS
    }


def test_description_and_router_agree(settings, embedder):
    app = create_app(settings, embedder=embedder)
    assert described_operations() == routed_operations(app)


async def test_description_is_served_with_a_credential(client, alice):
    assert (await client.get("/_openapi.json")).status == 401
    document = await (await client.get("/_openapi.json", headers=alice.headers)).json()
    assert document["openapi"] == "3.1.0"
    assert "/v2/ai/conversation_histories" in document["paths"]


@pytest.fixture(scope="module")
def live(tmp_path_factory, fake_embedder):
    """The app on a socket (schemathesis calls it synchronously), with the embedder double: no 5xx is about our logic."""
    with app_in_thread_with_key(tmp_path_factory.mktemp("fuzz") / "data", fake_embedder, "org-fuzz", "fuzzer") as app:
        yield app


@functools.cache
def schema_operations() -> dict[str, Any]:
    """schemathesis' operations by label, loaded by a worker when it first fuzzes (its import takes a second)."""
    import schemathesis

    schema = schemathesis.openapi.from_dict(openapi_document())
    return {result.ok().label: result.ok() for result in schema.get_all_operations()}


def api_error_format(response, path: str) -> None:
    body = response.json()
    if "/v2/" in path:
        assert isinstance(body.get("errors"), list) and body["errors"], body
        assert {"code", "title", "detail"} <= set(body["errors"][0]), body
    elif isinstance(body.get("error"), str):  # OpenSearch's REST layer: wrong method, content type, no handler
        assert body.get("status", 400) == response.status_code, body
        assert body["error"].startswith(("Incorrect HTTP method", "Content-Type header", "no handler found")), body
    else:
        assert set(body) == {"error", "status"} and body["status"] == response.status_code, body
        error = body["error"]
        assert isinstance(error["type"], str) and isinstance(error["reason"], str), body
        root = error["root_cause"][0]
        # A cause nested under the error (a failed search phase, a mapping error) names its own type.
        assert root["type"] == error["type"] or "caused_by" in error, body


def _operations_taking_input() -> dict[str, bool]:
    """Every operation's label as schemathesis names it, and whether it takes a query or path parameter (declared,
    or only in the path's template) or a body."""
    labels = {}
    for path, item in openapi_document()["paths"].items():
        shared = item.get("parameters", [])
        for method, operation in item.items():
            if method in METHODS:
                parameters = [*shared, *operation.get("parameters", [])]
                declared = any(p.get("in") in ("query", "path") for p in parameters)
                takes = declared or "{" in path or "requestBody" in operation
                labels[f"{method.upper()} {path}"] = takes
    return labels


LABELS = _operations_taking_input()
CASES = [(label, "positive") for label in sorted(LABELS)] + [
    (label, "negative") for label in sorted(LABELS) if LABELS[label]
]


def test_the_cases_are_schemathesis_operations():
    assert set(schema_operations()) == set(LABELS)
    for label, operation in schema_operations().items():
        takes = bool(len(operation.query) or len(operation.path_parameters) or len(operation.body))
        assert takes == LABELS[label], label


@pytest.mark.parametrize(("label", "mode"), CASES, ids=[f"{label}-{mode}" for label, mode in CASES])
def test_fuzz_no_server_errors_and_every_4xx_in_the_api_format(live, label, mode, pytestconfig):
    from schemathesis import GenerationMode

    operation = schema_operations()[label]
    mode = GenerationMode(mode)
    examples = pytestconfig.getoption("fuzz_examples")

    session = requests.Session()  # one connection for the case's examples, not one each

    @given(case=operation.as_strategy(generation_mode=mode))
    @hypothesis_settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def check(case) -> None:
        response = case.call(base_url=live.url, session=session, headers=live.headers, timeout=30)
        assert response.status_code < 500, (
            f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:500]}"
        )
        if 400 <= response.status_code < 500:
            api_error_format(response, case.path)

    with session:
        check()


def test_a_request_line_over_aiohttps_limit_is_answered_in_the_api_format(live):
    """The fuzz sends such lines (a query parameter repeated hundreds of times): the app is served as ``serve``
    serves it, so that aiohttp's refusal comes in the API's JSON, not its plain text."""
    long_query = "&".join(["next_token=abcdefgh"] * 600)
    response = requests.get(f"{live.url}/_plugins/_ml/memory?{long_query}", headers=live.headers, timeout=30)
    assert response.status_code == 400
    api_error_format(response, "/_plugins/_ml/memory")
