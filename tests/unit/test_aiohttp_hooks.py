"""The private aiohttp hooks ``memory_plugin.http.runner`` relies on, checked one by one.

aiohttp offers no public way to answer a request it cannot parse; when an
upgrade moves one of these hooks, this file says which, before the server
silently falls back to plain-text errors.
"""

from __future__ import annotations

import asyncio
import inspect
import json

from aiohttp import web
from aiohttp.http_exceptions import LineTooLong
from aiohttp.web_protocol import RequestHandler

from memory_plugin.http.runner import JsonErrorRunner


def parameters(function: object) -> list[str]:
    return list(inspect.signature(function).parameters)  # type: ignore[arg-type]


def test_app_runner_still_builds_its_server_in_make_server():
    hook = getattr(web.AppRunner, "_make_server", None)
    assert hook is not None, "aiohttp hook gone: web.AppRunner._make_server (JsonErrorRunner overrides it)"
    assert inspect.iscoroutinefunction(hook), "aiohttp hook changed: web.AppRunner._make_server is no longer async"
    assert parameters(hook) == ["self"], f"aiohttp hook changed: web.AppRunner._make_server{inspect.signature(hook)}"


def test_server_still_builds_each_connection_from_its_loop_and_kwargs():
    source = inspect.getsource(web.Server.__call__)
    assert "RequestHandler(self, loop=self._loop, **self._kwargs)" in source, (
        "aiohttp hook changed: web.Server.__call__ no longer builds RequestHandler(self, loop=self._loop, "
        "**self._kwargs), which _JsonErrorServer.__call__ copies"
    )


def test_parse_errors_still_go_through_handle_error():
    assert parameters(RequestHandler.handle_error) == ["self", "request", "status", "exc", "message"], (
        f"aiohttp hook changed: RequestHandler.handle_error{inspect.signature(RequestHandler.handle_error)}"
    )
    assert "self.handle_error(" in inspect.getsource(RequestHandler._make_error_handler), (
        "aiohttp hook changed: RequestHandler._make_error_handler no longer answers parse errors with handle_error"
    )


def test_line_too_long_still_carries_the_line_and_the_limit():
    error = LineTooLong(b"GET /v2/x", 8190)
    assert error.args[:2] == (b"GET /v2/x", 8190), f"aiohttp changed LineTooLong.args: {error.args!r}"


async def test_the_runner_answers_an_unparseable_request_with_json():
    runner = JsonErrorRunner(web.Application(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        (port,) = {address[1] for address in runner.addresses}
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /v2/ai/conversation_histories?q=" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        received = await reader.read()
        writer.close()
    finally:
        await runner.cleanup()
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.split(b" ", 2)[1] == b"400", head
    assert b"Content-Type: application/json" in head, head
    (error,) = json.loads(body)["errors"]
    assert error["code"] == "invalid_parameter" and "longer than 8190 bytes" in error["detail"], error
