"""Request bodies: read within the size limit and the read timeout, as JSON objects with known fields."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

from aiohttp import hdrs, web
from aiohttp.http import HttpVersion11

from memory_plugin.errors import (
    ClientClosedRequest,
    InvalidArgument,
    OpenSearchBadRequest,
    ParseFailure,
    PayloadTooLarge,
    RequestTimeout,
)
from memory_plugin.http.apis import TELNYX, api_of
from memory_plugin.http.json import parse_json
from memory_plugin.opensearch_rest import JSON_MEDIA_TYPES

MAX_BODY_BYTES = web.AppKey("max_body_bytes", int)
#: Seconds a client may take to send the whole body before it gets a 408.
BODY_READ_TIMEOUT = web.AppKey("body_read_timeout", float)

#: Bodies larger than this are parsed off the event loop.
PARSE_IN_THREAD_BYTES = 256 * 1024
#: One thread parses them, one at a time: parsers in many threads only contend for the GIL (the C decoder
#: holds it for a whole document), and the loop waited 1.3 s behind eight 6 MB bodies parsed at once, 0.16 s
#: behind this one thread (``json.loads`` of 400k keys).
_PARSER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="json-parse")

T = TypeVar("T")


MEDIA_TYPE = re.compile(r"[a-z0-9!#$&^_.+-]+/[a-z0-9!#$&^_.+-]+")


class UnsupportedContentType(Exception):
    """A body OpenSearch would not read: its Content-Type is not JSON (a 406 under ``/_plugins``)."""


async def continue_when_read(request: web.Request) -> None:
    """The expect handler of every API route: the ``100 Continue`` a client asked for is sent when the
    handler reads the body (``read_body``), not by aiohttp before any middleware has run.

    So a request refused before its body is read (no valid key, a Content-Length over the limit) gets its
    answer while the client still waits, and sends no body nobody reads: curl asks for it above 1 MB, and
    was sending a whole 50 MB upload to get its 413.  Another expectation is a 417, as aiohttp answers.
    """
    expect = request.headers.get(hdrs.EXPECT, "")
    if request.version == HttpVersion11 and expect.lower() != "100-continue":
        raise web.HTTPExpectationFailed(text=f"Unknown Expect: {expect}")


async def _send_continue(request: web.Request) -> None:
    """The ``100 Continue`` that ``continue_when_read`` left for the first read of a body not yet sent."""
    if (
        request.version == HttpVersion11
        and request.headers.get(hdrs.EXPECT, "").lower() == "100-continue"
        and not request.content.is_eof()
    ):
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0  # as aiohttp's own handler: the answer's size starts after it


async def read_body(request: web.Request) -> bytes:
    """The raw body, within the size limit and the read timeout; under ``/_plugins``, JSON only."""
    limit = request.config_dict[MAX_BODY_BYTES]
    declared = request.content_length
    if declared is not None and declared > limit:  # refused before a byte is read, not after the timeout
        raise PayloadTooLarge(f"request body is larger than {limit} bytes")
    try:
        await _send_continue(request)
        if request.content.is_eof():  # the whole body came with the headers: nothing to wait for
            raw = await request.read()
        else:
            async with asyncio.timeout(request.config_dict[BODY_READ_TIMEOUT]):
                raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise PayloadTooLarge(f"request body is larger than {limit} bytes") from None
    except TimeoutError:
        raise RequestTimeout(
            f"the request body did not arrive within {request.config_dict[BODY_READ_TIMEOUT]:g} s"
        ) from None
    except ConnectionResetError:  # the client went away mid-body: nobody reads the answer, and it is no bug
        raise ClientClosedRequest("the client closed the connection before it sent the whole body") from None
    if raw and api_of(request) is not TELNYX:
        check_content_type(request.headers.get("Content-Type"))
    return raw


def check_content_type(header: str | None) -> None:
    """OpenSearch reads a body only as a media type it knows: a malformed header is a 400, another type a 406."""
    if header is None:
        raise UnsupportedContentType("")
    media_type = header.split(";")[0].strip().lower()
    if not MEDIA_TYPE.fullmatch(media_type):
        raise OpenSearchBadRequest(
            f"java.lang.IllegalArgumentException: invalid Content-Type header [{header}]",
            exception="content_type_header_exception",
            caused_by={"type": "illegal_argument_exception", "reason": f"invalid Content-Type header [{header}]"},
        )
    if not JSON_MEDIA_TYPES.fullmatch(media_type):
        raise UnsupportedContentType(header)


async def read_json(request: web.Request, *, required: bool) -> Any:
    """The body as JSON, or None when it is empty and not required."""
    raw = await read_body(request)
    if not raw.strip():
        if required:
            raise ParseFailure("request body is required")
        return None
    return await parsed(parse_json, raw)


async def parsed(read: Callable[..., T], raw: bytes, *args: Any, check: Callable[[T], object] = lambda _: None) -> T:
    """``read(raw, *args)``, then ``check`` of it: for a large body on the parser thread, as megabytes of JSON
    take a while (where Python's JSON fails, a lexer in Python finds Jackson's error: seconds for a megabyte;
    ``check_sound`` walked 400k keys for 0.6 s on the loop)."""
    if len(raw) > PARSE_IN_THREAD_BYTES:
        return await asyncio.get_running_loop().run_in_executor(_PARSER, partial(_read_checked, read, raw, args, check))
    return _read_checked(read, raw, args, check)


def _read_checked(read: Callable[..., T], raw: bytes, args: tuple[Any, ...], check: Callable[[T], object]) -> T:
    value = read(raw, *args)
    check(value)
    return value


async def read_json_object(request: web.Request, *, required: bool) -> dict[str, Any] | None:
    value = await read_json(request, required=required)
    if value is not None and not isinstance(value, dict):
        raise ParseFailure(f"request body must be a JSON object, not {type(value).__name__}")
    return value


async def search_body(request: web.Request) -> dict[str, Any] | None:
    """A search body, or the ``source`` parameter that stands in for it (OpenSearch accepts both)."""
    body = await read_json(request, required=False)
    if body is None and "source" in request.query:
        body = parse_json(request.query["source"], what="[source] parameter", parameter="source")
    if body is not None and not isinstance(body, dict):
        raise ParseFailure("search body must be a JSON object", parameter="body")
    return body


def string_field(body: dict[str, Any], name: str, *, required: bool = False) -> str | None:
    if name not in body or body[name] is None:
        if required:
            raise InvalidArgument(f"[{name}] is required", parameter=name)
        return None
    value = body[name]
    if not isinstance(value, str):
        raise InvalidArgument(f"[{name}] must be a string, not {_json_type(value)}", parameter=name)
    return value


def check_fields(body: dict[str, Any], allowed: Iterable[str]) -> None:
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise InvalidArgument(
            f"unknown field {unknown} in request body; known fields are {sorted(allowed)}", parameter=unknown[0]
        )


def _json_type(value: Any) -> str:
    return {bool: "boolean", int: "number", float: "number", dict: "object", list: "array"}.get(type(value), "null")
