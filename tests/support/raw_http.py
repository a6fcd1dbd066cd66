"""Bytes on a socket, for tests of what an HTTP client library would not send."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any


def strict_json(text: str) -> Any:
    """JSON as strict clients read it: ``NaN`` and ``Infinity`` are errors."""

    def refuse(constant: str) -> Any:
        raise AssertionError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


async def raw_exchange(port: int, request: bytes, timeout: float = 30.0) -> tuple[float, bytes]:
    """Send bytes as they are; return the seconds until the server closed, and all it sent."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    started = time.monotonic()
    writer.write(request)
    await writer.drain()
    try:
        received = await asyncio.wait_for(reader.read(), timeout)
    finally:
        writer.close()
    return time.monotonic() - started, received


def split_response(raw: bytes) -> tuple[int, dict[str, str], Any]:
    """Status, headers (lower-case names) and the strict-JSON body of one raw response."""
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in header_lines)}
    return int(status_line.split()[1]), headers, strict_json(body.decode())
