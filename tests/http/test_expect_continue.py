"""``Expect: 100-continue``: the interim answer comes only when the body is wanted.

curl asks for it before sending a body over 1 MB.  aiohttp answered ``100 Continue`` before any
middleware ran, so a request about to be refused (too large by its Content-Length, no valid key)
sent its whole body first.  These tests speak HTTP on a socket, as such a client does.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.support.polling import PATIENCE
from tests.support.raw_http import split_response

MEMORY = "/_plugins/_ml/memory"
HISTORIES = "/v2/ai/conversation_histories"
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


def head(path: str, length: int, authorization: str | None, expect: str = "100-continue") -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: x", "Content-Type: application/json", f"Content-Length: {length}"]
    if authorization is not None:
        lines.append(f"Authorization: {authorization}")
    lines.append(f"Expect: {expect}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def open_socket(client):  # type: ignore[no-untyped-def]
    return await asyncio.open_connection("127.0.0.1", client.server.port)


async def answer_to_head_alone(client, request: bytes) -> bytes:  # type: ignore[no-untyped-def]
    """What the server sends to the headers alone, the body held back as the client holds it: all of it, up
    to the connection's close."""
    reader, writer = await open_socket(client)
    try:
        writer.write(request)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), PATIENCE)
    finally:
        writer.close()


@pytest.mark.parametrize("path", [MEMORY, HISTORIES])
async def test_a_body_over_the_limit_is_refused_before_the_client_sends_it(client, alice, path):
    received = await answer_to_head_alone(client, head(path, 999_999_999, alice.headers["Authorization"]))
    assert not received.startswith(b"HTTP/1.1 100"), received[:200]
    status, headers, body = split_response(received)
    assert status == 413, body
    assert headers["connection"] == "close"
    assert "larger than" in json.dumps(body)


@pytest.mark.parametrize("path", [MEMORY, HISTORIES])
async def test_a_request_without_a_valid_key_is_refused_before_the_client_sends_its_body(client, path):
    for authorization in (None, "Bearer key_0000000000000000.wrong"):
        received = await answer_to_head_alone(client, head(path, 50 << 20, authorization))
        assert not received.startswith(b"HTTP/1.1 100"), received[:200]
        status, headers, _ = split_response(received)
        assert status == 401
        assert headers["connection"] == "close"


async def test_an_accepted_request_gets_100_continue_then_its_answer(client, alice):
    body = json.dumps({"name": "asked first"}).encode()
    reader, writer = await open_socket(client)
    try:
        writer.write(head(MEMORY, len(body), alice.headers["Authorization"]))
        await writer.drain()
        assert await asyncio.wait_for(reader.readexactly(len(CONTINUE)), PATIENCE) == CONTINUE
        writer.write(body)
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), PATIENCE)
        assert status_line.startswith(b"HTTP/1.1 200"), status_line
    finally:
        writer.close()
    listed = await client.get(MEMORY, headers=alice.headers)
    assert [memory["name"] for memory in (await listed.json())["memories"]] == ["asked first"]


async def test_a_body_sent_without_waiting_gets_no_100_continue(client, alice):
    """A client may send its body at once (curl does after a second): nothing is left to ask for."""
    body = json.dumps({"name": "not waiting"}).encode()
    reader, writer = await open_socket(client)
    try:
        writer.write(head(MEMORY, len(body), alice.headers["Authorization"]) + body)
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), PATIENCE)
        assert status_line.startswith(b"HTTP/1.1 200"), status_line
    finally:
        writer.close()


async def test_another_expectation_is_417(client, alice):
    reader, writer = await open_socket(client)
    try:
        writer.write(head(MEMORY, 2, alice.headers["Authorization"], expect="magic"))
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), PATIENCE)
        assert status_line.startswith(b"HTTP/1.1 417"), status_line
    finally:
        writer.close()
