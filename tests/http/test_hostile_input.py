"""Hostile and careless input at the edge (issue 12, part A): each a request against the in-process server.

Every refused request gets the exact status in the API's own error format,
names the culprit, and leaves what was stored as it was.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from memory_plugin.app import create_app
from memory_plugin.settings import Settings
from tests.support.raw_http import raw_exchange, split_response, strict_json

MEMORY = "/_plugins/_ml/memory"
CONVERSATIONS = "/_plugins/_ml/memory/conversation"
HISTORIES = "/v2/ai/conversation_histories"


def json_headers(caller: Any) -> dict[str, str]:
    """A caller's headers for a JSON body: OpenSearch reads no other content type."""
    return {**caller.headers, "Content-Type": "application/json"}


def assert_opensearch_error(body: dict[str, Any], status: int, type_: str, fragment: str) -> None:
    assert body["status"] == status, body
    assert body["error"]["type"] == type_, body
    assert body["error"]["root_cause"][0]["type"] == type_, body
    assert fragment in body["error"]["reason"], body


def assert_telnyx_error(body: dict[str, Any], code: str, fragment: str, parameter: str | None = None) -> None:
    (error,) = body["errors"]
    assert error["code"] == code, body
    assert fragment in error["detail"], body
    if parameter is not None:
        assert error["source"]["parameter"] == parameter, body


async def memory_names(client, caller) -> list[str]:  # type: ignore[no-untyped-def]
    response = await client.get(MEMORY, headers=caller.headers)
    assert response.status == 200
    return sorted(memory["name"] for memory in strict_json(await response.text())["memories"])


async def history_texts(client, caller) -> list[str]:  # type: ignore[no-untyped-def]
    response = await client.get(HISTORIES, params={"q": "billing", "record_type": "voice"}, headers=caller.headers)
    assert response.status == 200
    return sorted(hit["text"] for hit in strict_json(await response.text())["data"])


async def seed(client, alice, admin) -> tuple[list[str], list[str]]:  # type: ignore[no-untyped-def]
    """One memory of alice's and one record of the organisation's: what must survive every refusal."""
    assert (await client.post(MEMORY, json={"name": "kept"}, headers=alice.headers)).status == 200
    record = {
        "record_id": "kept",
        "record_type": "voice",
        "user_id": "alice",
        "text": "billing question",
        "metadata": {"x": "y"},
    }
    assert (await client.post(HISTORIES, json={"records": [record]}, headers=admin.headers)).status == 201
    return await memory_names(client, alice), await history_texts(client, admin)


# -- item 5: credentials, huge integers, deep `source` --------------------------------------------------


@pytest.mark.parametrize(
    "authorization",
    [b"Bearer key_0123456789abcdef.s\xffcret", b"Bearer \xc3\x28", b"Basic \xff\xfe\xfd", b"Basic d\xe9j\xe0"],
    ids=["bearer secret", "bearer bad utf-8", "basic raw bytes", "basic latin-1"],
)
@pytest.mark.parametrize("path", [MEMORY, HISTORIES + "?q=x&record_type=voice"])
async def test_non_utf8_credentials_are_401_and_log_no_traceback(client, caplog, authorization, path):
    request = (
        b"GET "
        + path.encode()
        + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: "
        + authorization
        + b"\r\n\r\n"
    )
    with caplog.at_level(logging.INFO):
        _, received = await raw_exchange(client.server.port, request)
    status, headers, body = split_response(received)
    assert status == 401
    assert "Bearer" in headers["www-authenticate"]
    if path.startswith("/v2"):
        assert_telnyx_error(body, "unauthorized", "malformed credentials")
    else:
        assert_opensearch_error(body, 401, "security_exception", "malformed credentials")
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR or record.exc_info]


async def test_integer_of_more_than_4300_digits_is_400_and_stores_nothing(client, alice, admin):
    before = await seed(client, alice, admin)
    huge = "9" * 4301
    memory = await client.post(
        MEMORY, data=f'{{"name": "x", "additional_info": {{"n": {huge}}}}}', headers=json_headers(alice)
    )
    assert memory.status == 400
    # Jackson's own limit, as the real node words it: numbers of more than 1000 digits.
    assert_opensearch_error(
        await memory.json(), 400, "parse_exception", "Number value length (4301) exceeds the maximum allowed (1000"
    )
    record = f'{{"records": [{{"record_type": "voice", "text": "billing", "metadata": {{"n": -{huge}}}}}]}}'
    history = await client.post(HISTORIES, data=record, headers=admin.headers)
    assert history.status == 400
    assert_telnyx_error(await history.json(), "invalid_body", "more than 4300 digits")
    assert (await memory_names(client, alice), await history_texts(client, admin)) == before
    # 4300 digits still parse: the limit is Python's own, not a new one.
    at_limit = f'{{"records": [{{"record_id": "big", "record_type": "voice", "text": "billing", "metadata": {{"n": {"9" * 4300}}}}}]}}'
    assert (await client.post(HISTORIES, data=at_limit, headers=admin.headers)).status == 201


@pytest.mark.parametrize("depth", [65, 1300])
async def test_source_parameter_nested_deep_is_400(client, alice, depth):
    conversation = await (await client.post(MEMORY, json={"name": "n"}, headers=alice.headers)).json()
    source = "[" * depth + "]" * depth
    for path in (f"{MEMORY}/_search", f"{MEMORY}/{conversation['memory_id']}/_search"):
        response = await client.get(path, params={"source": source}, headers=alice.headers)
        assert response.status == 400, path
        assert_opensearch_error(
            await response.json(), 400, "parse_exception", "[source] parameter nests deeper than 64 levels"
        )
    fine = await client.get(
        f"{MEMORY}/_search", params={"source": json.dumps({"query": {"match_all": {}}})}, headers=alice.headers
    )
    assert fine.status == 200 and (await fine.json())["hits"]["total"]["value"] == 1


# -- item 2: lone surrogates ----------------------------------------------------------------------------

#: Over ``PARSE_IN_THREAD_BYTES``: read and checked on the parser thread.
PADDING = "p" * 300_000

POISONED_MEMORY = [
    ("POST", MEMORY, '{"name": "half \\ud83d"}', "name"),
    (
        "POST",
        MEMORY,
        f'{{"name": "ok", "additional_info": {{"pad": "{PADDING}", "t": "\\udc00"}}}}',
        "additional_info.t",
    ),
    ("POST", MEMORY, '{"name": "ok", "additional_info": {"topic": "\\udc00"}}', "additional_info.topic"),
    ("POST", MEMORY, '{"name": "ok", "additional_info": {"k\\ud800": "v"}}', "additional_info.k\\ud800"),
    ("POST", CONVERSATIONS, '{"name": "\\ud800"}', "name"),
    ("POST", f"{MEMORY}/_search", '{"query": {"match": {"name": "\\udfff"}}}', "query.match.name"),
]


@pytest.mark.parametrize(("method", "path", "body", "culprit"), POISONED_MEMORY)
async def test_lone_surrogate_in_memory_body_is_400_naming_the_field(client, alice, admin, method, path, body, culprit):
    before = await seed(client, alice, admin)
    response = await client.request(
        method, path, data=body, headers={**alice.headers, "Content-Type": "application/json"}
    )
    assert response.status == 400
    assert_opensearch_error(
        strict_json(await response.text()), 400, "illegal_argument_exception", f"[{culprit}] holds a lone surrogate"
    )
    assert (await memory_names(client, alice), await history_texts(client, admin)) == before


async def test_lone_surrogate_in_message_and_update_is_400(client, alice, admin):
    memory_id = (await (await client.post(MEMORY, json={"name": "kept"}, headers=alice.headers)).json())["memory_id"]
    message = await client.post(
        f"{MEMORY}/{memory_id}/messages",
        data='{"input": "a", "additional_info": {"deep": "x\\ud800"}}',
        headers=json_headers(alice),
    )
    assert message.status == 400
    assert_opensearch_error(await message.json(), 400, "illegal_argument_exception", "[additional_info.deep]")
    update = await client.put(f"{MEMORY}/{memory_id}", data='{"name": "\\ud800"}', headers=json_headers(alice))
    assert update.status == 400
    stored = await (await client.get(f"{MEMORY}/{memory_id}", headers=alice.headers)).json()
    assert stored["name"] == "kept"
    assert (await (await client.get(f"{MEMORY}/{memory_id}/messages", headers=alice.headers)).json())["messages"] == []


POISONED_RECORDS = [
    ({"record_type": "voice", "text": "billing \ud800 cut"}, "records[1].text"),
    ({"record_type": "voice", "text": "billing", "metadata": {"x": "\udbff"}}, "records[1].metadata.x"),
    ({"record_type": "voice", "text": "billing", "metadata": {"lang\udc00": "en"}}, "records[1].metadata.lang\\udc00"),
    ({"record_type": "voice\ud800", "text": "billing"}, "records[1].record_type"),
    ({"record_type": "voice", "text": "billing", "user_id": "\ud800"}, "records[1].user_id"),
]


@pytest.mark.parametrize(("record", "culprit"), POISONED_RECORDS)
async def test_lone_surrogate_in_a_record_is_400_naming_the_field_and_search_still_works(
    client, alice, admin, record, culprit
):
    before = await seed(client, alice, admin)
    good = {"record_id": "good", "record_type": "voice", "text": "billing good"}
    body = json.dumps({"records": [good, {"record_id": "bad", **record}]})  # escapes the surrogate: "\\ud800"
    assert "\\ud" in body or "\\ud" in body.lower()
    response = await client.post(HISTORIES, data=body, headers={**admin.headers, "Content-Type": "application/json"})
    assert response.status == 400
    assert_telnyx_error(strict_json(await response.text()), "invalid_parameter", "holds a lone surrogate", culprit)
    # Nothing of the batch was stored, and the organisation's search still answers.
    assert (await memory_names(client, alice), await history_texts(client, admin)) == before


# -- issue 46, item 2: emoji, escaped or raw, on every endpoint that takes text ------------------------

AGENTIC = "/_plugins/_ml/memory_containers"
EMOJI = "rock on \U0001f918"


async def _created(response, key: str) -> str:  # type: ignore[no-untyped-def]
    body = strict_json(await response.text())
    assert response.status in (200, 201), body
    return str(body[key])


async def _memory(client, caller) -> str:  # type: ignore[no-untyped-def]
    return await _created(await client.post(MEMORY, json={"name": "m"}, headers=caller.headers), "memory_id")


async def _message(client, caller) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    memory_id = await _memory(client, caller)
    created = await client.post(
        f"{MEMORY}/{memory_id}/messages", json={"input": "q", "response": "r"}, headers=caller.headers
    )
    return memory_id, await _created(created, "message_id")


async def _read(client, caller, path: str, *keys: str | int) -> Any:  # type: ignore[no-untyped-def]
    response = await client.get(path, headers=caller.headers)
    value = strict_json(await response.text())
    assert response.status == 200, value
    for key in keys:
        value = value[key]
    return value


async def conversation_211(client, caller, body):  # type: ignore[no-untyped-def]
    """2.11 ``POST conversation``; reads the name back."""
    response = await client.post(CONVERSATIONS, data=body({"name": ...}), headers=json_headers(caller))
    if response.status != 200:
        return response, None
    conversation_id = await _created(response, "conversation_id")
    return response, await _read(client, caller, f"{MEMORY}/{conversation_id}", "name")


async def interaction_211(client, caller, body):  # type: ignore[no-untyped-def]
    """2.11 ``POST conversation/{id}``; reads the input back."""
    conversation_id = await _created(
        await client.post(CONVERSATIONS, json={"name": "c"}, headers=caller.headers), "conversation_id"
    )
    path = f"{CONVERSATIONS}/{conversation_id}"
    response = await client.post(path, data=body({"input": ..., "response": "r"}), headers=json_headers(caller))
    if response.status != 200:
        return response, None
    return response, await _read(client, caller, path, "interactions", 0, "input")


async def memory_create(client, caller, body):  # type: ignore[no-untyped-def]
    response = await client.post(MEMORY, data=body({"name": ...}), headers=json_headers(caller))
    if response.status != 200:
        return response, None
    memory_id = await _created(response, "memory_id")
    return response, await _read(client, caller, f"{MEMORY}/{memory_id}", "name")


async def memory_update(client, caller, body):  # type: ignore[no-untyped-def]
    memory_id = await _memory(client, caller)
    response = await client.put(f"{MEMORY}/{memory_id}", data=body({"name": ...}), headers=json_headers(caller))
    return response, await _read(client, caller, f"{MEMORY}/{memory_id}", "name")


async def message_create(client, caller, body):  # type: ignore[no-untyped-def]
    memory_id = await _memory(client, caller)
    path = f"{MEMORY}/{memory_id}/messages"
    response = await client.post(path, data=body({"input": ...}), headers=json_headers(caller))
    if response.status != 200:
        return response, None
    message_id = await _created(response, "message_id")
    return response, await _read(client, caller, f"{MEMORY}/message/{message_id}", "input")


async def message_update(client, caller, body):  # type: ignore[no-untyped-def]
    _, message_id = await _message(client, caller)
    path = f"{MEMORY}/message/{message_id}"
    response = await client.put(path, data=body({"response": ...}), headers=json_headers(caller))
    return response, await _read(client, caller, path, "response")


async def record_ingest(client, caller, body):  # type: ignore[no-untyped-def]
    """``/v2`` ingest, read back by a search for the record."""
    record = {"record_id": "emoji", "record_type": "voice", "text": ...}
    response = await client.post(HISTORIES, data=body({"records": [record]}), headers=json_headers(caller))
    if response.status != 201:
        return response, None
    search = await client.get(HISTORIES, params={"q": "rock", "record_type": "voice"}, headers=caller.headers)
    hits = strict_json(await search.text())["data"]
    return response, next(hit["text"] for hit in hits if hit["record_id"] == "emoji")


async def container_create(client, caller, body):  # type: ignore[no-untyped-def]
    response = await client.post(f"{AGENTIC}/_create", data=body({"name": ...}), headers=json_headers(caller))
    if response.status != 200:
        return response, None
    container_id = await _created(response, "memory_container_id")
    return response, await _read(client, caller, f"{AGENTIC}/{container_id}", "name")


async def agentic_memory_create(client, caller, body):  # type: ignore[no-untyped-def]
    container = await client.post(f"{AGENTIC}/_create", json={"name": "c"}, headers=caller.headers)
    path = f"{AGENTIC}/{await _created(container, 'memory_container_id')}/memories"
    messages = [{"role": "user", "content": [{"type": "text", "text": ...}]}]
    response = await client.post(path, data=body({"messages": messages}), headers=json_headers(caller))
    if response.status != 200:
        return response, None
    working = await _read(client, caller, f"{path}/working/{await _created(response, 'working_memory_id')}")
    return response, working["messages"][0]["content"][0]["text"]


#: Each endpoint that stores text: how to write a body with the text in it and read the text back,
#: where a refusal names it, and in which error format.
TEXT_ENDPOINTS = [
    pytest.param(conversation_211, "name", "opensearch", id="2.11 conversation"),
    pytest.param(interaction_211, "input", "opensearch", id="2.11 interaction"),
    pytest.param(memory_create, "name", "opensearch", id="memory create"),
    pytest.param(memory_update, "name", "opensearch", id="memory update"),
    pytest.param(message_create, "input", "opensearch", id="message create"),
    pytest.param(message_update, "response", "opensearch", id="message update"),
    pytest.param(record_ingest, "records[0].text", "telnyx", id="v2 records"),
    pytest.param(container_create, "name", "opensearch", id="agentic container"),
    pytest.param(agentic_memory_create, "messages[0].content[0].text", "opensearch", id="agentic memory"),
]


def _filled(template: Any, text: str) -> Any:
    """``template`` with ``...`` replaced by ``text``."""
    if template is Ellipsis:
        return text
    if isinstance(template, dict):
        return {key: _filled(value, text) for key, value in template.items()}
    if isinstance(template, list):
        return [_filled(value, text) for value in template]
    return template


@pytest.mark.parametrize("escaped", [True, False], ids=["escaped pair", "raw UTF-8"])
@pytest.mark.parametrize(("endpoint", "field", "style"), TEXT_ENDPOINTS)
async def test_an_emoji_is_stored_and_read_back_whether_escaped_or_raw(
    client, alice, admin, endpoint, field, style, escaped
):
    """``json.dumps`` (so ``requests``' ``json=``) writes an emoji as the escaped pair ``\\ud83e\\udd18``."""

    def body(template: Any) -> bytes:
        text = json.dumps(_filled(template, EMOJI), ensure_ascii=escaped)
        assert ("\\ud83e\\udd18" in text) is escaped
        return text.encode()

    response, stored = await endpoint(client, admin if style == "telnyx" else alice, body)
    assert response.status in (200, 201), await response.text()
    assert stored == EMOJI


LONE_HALVES = {
    "lone high": "rock \ud83e on",
    "lone low": "rock \udd18 on",
    "high at the end": "rock on \ud83e",
    "high then no low": "rock \ud83ex\udd18",
    "reversed pair": "rock \udd18\ud83e",
    "high then pair": "rock \ud83e\ud83e\udd18",
}


@pytest.mark.parametrize(("endpoint", "field", "style"), TEXT_ENDPOINTS)
async def test_a_lone_half_of_a_pair_is_400_naming_the_field(client, alice, admin, endpoint, field, style, subtests):
    """Each lone half a subtest, on one app per endpoint."""
    caller = admin if style == "telnyx" else alice
    for label, text in LONE_HALVES.items():
        with subtests.test(label):
            response, stored = await endpoint(
                client, caller, lambda template, text=text: json.dumps(_filled(template, text)).encode()
            )
            body = strict_json(await response.text())
            assert response.status == 400, body
            if style == "telnyx":
                assert_telnyx_error(body, "invalid_parameter", f"[{field}] holds a lone surrogate", field)
            else:
                assert_opensearch_error(body, 400, "illegal_argument_exception", f"[{field}] holds a lone surrogate")
            assert stored is None or text not in stored


async def test_invalid_utf8_in_query_parameters_is_400_naming_the_parameter(client, alice, admin):
    before = await seed(client, alice, admin)
    cases = [
        (f"{HISTORIES}?q=billing%ED%A0%80&record_type=voice", "q", "telnyx"),
        (f"{HISTORIES}?q=billing&record_type=voice&filter[x]=%F0%9F", "filter[x]", "telnyx"),
        (f"{MEMORY}/_search?source=%ED%B0%80", "source", "opensearch"),
        (f"{CONVERSATIONS}?max_results=%FF", "max_results", "opensearch"),
    ]
    for url, name, style in cases:
        response = await client.get(url, headers=admin.headers if style == "telnyx" else alice.headers)
        assert response.status == 400, url
        body = await response.json()
        if style == "telnyx":
            assert_telnyx_error(body, "invalid_parameter", f"[{name}] is not valid UTF-8", name)
        else:
            assert_opensearch_error(body, 400, "illegal_argument_exception", f"[{name}] is not valid UTF-8")
    # A real U+FFFD, sent as UTF-8, is text like any other.
    replacement = await client.get(
        HISTORIES, params={"q": "billing \ufffd", "record_type": "voice"}, headers=admin.headers
    )
    assert replacement.status == 200
    assert (await memory_names(client, alice), await history_texts(client, admin)) == before


# -- item 9: numbers ------------------------------------------------------------------------------------


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999", "-1e400"])
async def test_non_finite_numbers_in_request_json_are_400(client, alice, admin, literal):
    before = await seed(client, alice, admin)
    memory = await client.post(
        MEMORY, data=f'{{"name": "x", "additional_info": {{"n": {literal}}}}}', headers=json_headers(alice)
    )
    assert memory.status == 400
    # NaN and Infinity are not JSON to Jackson either; 1e999 is, and becomes an infinity we refuse.
    fragment = "Non-standard token" if literal.lstrip("-")[0].isalpha() else "numbers must be finite"
    assert_opensearch_error(await memory.json(), 400, "parse_exception", fragment)
    search = await client.post(
        f"{MEMORY}/_search",
        data=f'{{"query": {{"match": {{"name": {{"query": "kept", "boost": {literal}}}}}}}}}',
        headers=json_headers(alice),
    )
    assert search.status == 400
    record = f'{{"records": [{{"record_type": "voice", "text": "billing", "metadata": {{"score": {literal}}}}}]}}'
    history = await client.post(HISTORIES, data=record, headers=admin.headers)
    assert history.status == 400
    assert_telnyx_error(await history.json(), "invalid_body", "numbers must be finite")
    assert (await memory_names(client, alice), await history_texts(client, admin)) == before


async def test_scores_that_overflow_are_finite_json(client, alice):
    """Two should-clauses of boost 1e308 add up to infinity; the response stays strict JSON."""
    await client.post(MEMORY, json={"name": "billing"}, headers=alice.headers)
    clause = {"match": {"name": {"query": "billing", "boost": 1e308}}}
    response = await client.post(
        f"{MEMORY}/_search", json={"query": {"bool": {"should": [clause, clause]}}}, headers=alice.headers
    )
    assert response.status == 200
    hits = strict_json(await response.text())["hits"]
    assert hits["max_score"] == sys.float_info.max
    assert hits["hits"][0]["_score"] == sys.float_info.max


@pytest.mark.parametrize("value", ["1_0", " 5", "5 ", "0x10", "1e2", "5.0", "", "++5"])
async def test_integer_parameters_are_what_java_reads(client, alice, admin, value):
    """Under /_plugins the real node is the judge: ``Integer.parseInt`` refuses these, as here."""
    response = await client.get(CONVERSATIONS, params={"max_results": value}, headers=alice.headers)
    assert response.status == 400
    assert_opensearch_error(
        await response.json(),
        400,
        "illegal_argument_exception",
        f"Failed to parse int parameter [max_results] with value [{value}]",
    )
    memories = await client.get(MEMORY, params={"max_results": value}, headers=alice.headers)
    assert_opensearch_error(await memories.json(), 400, "number_format_exception", f'For input string: "{value}"')


@pytest.mark.parametrize("value", ["+5", "\u0665", "\uff15"])
async def test_signed_and_other_script_digits_read_as_java_reads_them(client, alice, admin, value):
    """``Integer.parseInt`` takes a plus sign and decimal digits of any script; /v2 takes ASCII digits only."""
    for path in (CONVERSATIONS, MEMORY):
        response = await client.get(path, params={"max_results": value}, headers=alice.headers)
        assert response.status == 200, await response.text()


@pytest.mark.parametrize("value", ["1_0", "+5", "\u0665", "\uff15", " 5", "5 ", "0x10", "1e2", "5.0", ""])
async def test_v2_integer_parameters_are_ascii_digits_only(client, alice, admin, value):
    v2 = await client.get(HISTORIES, params={"q": "x", "record_type": "voice", "top_k": value}, headers=admin.headers)
    assert v2.status == 400
    assert_telnyx_error(
        await v2.json(), "invalid_parameter", f"Failed to parse int parameter [top_k] with value [{value}]", "top_k"
    )


async def test_plain_and_negative_integers_still_parse(client, alice, admin):
    assert (await client.get(CONVERSATIONS, params={"max_results": "007"}, headers=alice.headers)).status == 200
    negative = await client.get(CONVERSATIONS, params={"next_token": "-1"}, headers=alice.headers)
    assert_opensearch_error(await negative.json(), 400, "action_request_validation_exception", "must be nonnegative")
    assert (
        await client.get(
            HISTORIES, params={"q": "x", "record_type": "voice", "top_k": "5", "min_score": ".5"}, headers=admin.headers
        )
    ).status == 200
    bad_float = await client.get(
        HISTORIES, params={"q": "x", "record_type": "voice", "min_score": "0_5"}, headers=admin.headers
    )
    assert_telnyx_error(
        await bad_float.json(),
        "invalid_parameter",
        "Failed to parse float parameter [min_score] with value [0_5]",
        "min_score",
    )


# -- item 9: files, keys, metrics, whitespace -----------------------------------------------------------


@pytest.mark.fresh_data_dir  # every file made under the umask, none copied
async def test_data_files_are_0600_and_folders_0700_whatever_the_umask(
    aiohttp_client, settings: Settings, embedder, keys, admin
):
    previous = os.umask(0o002)  # as permissive as a shared machine's
    try:
        client = await aiohttp_client(create_app(settings, embedder=embedder))
        record = {"record_type": "voice", "text": "billing question"}
        assert (await client.post(HISTORIES, json={"records": [record]}, headers=admin.headers)).status == 201
        assert (await client.post(MEMORY, json={"name": "n"}, headers=admin.headers)).status == 200
        running = modes_under(settings.data_dir)  # with the WAL and shared-memory files
        await client.close()  # writes the faiss snapshots
    finally:
        os.umask(previous)
    stopped = modes_under(settings.data_dir)
    modes = {**running, **stopped}
    for suffix in ("-wal", "-shm", ".faiss", ".ids.npy", "keys.json", "keys.json.lock", "memory.sqlite3"):
        assert any(name.endswith(suffix) for name in modes), (suffix, modes)
    wrong = {name: oct(mode) for name, mode in modes.items() if mode != (0o700 if name.endswith("/") else 0o600)}
    assert not wrong, wrong


def modes_under(folder: Path) -> dict[str, int]:
    """Permission bits of ``folder`` and all below it; folders' names end in ``/``."""
    return {
        str(path.relative_to(folder.parent)) + ("/" if path.is_dir() else ""): stat.S_IMODE(path.stat().st_mode)
        for path in (folder, *folder.rglob("*"))
    }


async def test_metrics_are_disabled_without_an_operator_token(client, alice, admin):
    assert (await client.get("/_metrics")).status == 401
    for caller in (alice, admin):
        response = await client.get("/_metrics", headers=caller.headers)
        assert response.status == 403
        assert_opensearch_error(await response.json(), 403, "security_exception", "metrics are disabled")


async def test_metrics_need_the_operator_token_not_a_tenant_key(aiohttp_client, settings, embedder, alice, admin):
    operator = "operator-" + "x" * 32
    client = await aiohttp_client(create_app(settings.replace(auth={"metrics_token": operator}), embedder=embedder))
    await client.get(MEMORY, headers=alice.headers)
    ok = await client.get("/_metrics", headers={"Authorization": f"Bearer {operator}"})
    assert ok.status == 200
    assert 'memory_plugin_requests_total{method="GET",route="/_plugins/_ml/memory",status="200"}' in await ok.text()
    for caller in (alice, admin):
        tenant = await client.get("/_metrics", headers=caller.headers)
        assert tenant.status == 403
        assert_opensearch_error(await tenant.json(), 403, "security_exception", "operator's metrics token")
    for wrong in (f"Bearer {operator}x", f"Basic {base64.b64encode(operator.encode()).decode()}", ""):
        assert (await client.get("/_metrics", headers={"Authorization": wrong} if wrong else {})).status == 401


async def test_a_million_spaces_do_not_make_a_million_character_chunk(client, admin):
    text = "refund" + " " * 1_000_000 + "invoice"
    response = await client.post(
        HISTORIES,
        json={"records": [{"record_id": "spaces", "record_type": "voice", "text": text}]},
        headers=admin.headers,
    )
    assert response.status == 201
    assert (await response.json())["data"][0]["chunk_total"] == 2
    found = await client.get(HISTORIES, params={"q": "refund invoice", "record_type": "voice"}, headers=admin.headers)
    texts = sorted(hit["text"].strip() for hit in (await found.json())["data"])
    assert texts == ["invoice", "refund"]


@pytest.mark.parametrize(
    "reader, method, path",
    [
        ("check_search_syntax", "POST", "/_plugins/_ml/memory/_search"),
        ("new_memory", "POST", "/_plugins/_ml/memory"),
    ],
)
async def test_a_large_broken_body_is_read_for_its_error_off_the_event_loop(
    client, alice, monkeypatch, reader, method, path
):
    """Jackson's error for a body Python's JSON refuses comes from a lexer written in Python: for a body of
    megabytes that takes seconds, so it runs in a thread, never on the loop that serves everyone else."""
    import threading

    from memory_plugin.memory import requests_v212

    real, threads = getattr(requests_v212, reader), []

    def recording(*args):  # type: ignore[no-untyped-def]
        threads.append(threading.current_thread() is threading.main_thread())
        return real(*args)

    monkeypatch.setattr(requests_v212, reader, recording)
    body = b'{"query": {"match": {"name": "' + b"x" * (1024 * 1024) + b'"}}'  # truncated at the very end
    headers = {**alice.headers, "Content-Type": "application/json"}
    response = await client.request(method, path, data=body, headers=headers)
    assert response.status == 400, await response.text()
    assert threads == [False]
