"""Rendered message pages, kept with the version of the conversation they show.

The versions are the memory stores' (``messages_version``): a write moves a
conversation's version, and the pages rendered before it are no longer served.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

from aiohttp import web

from memory_plugin.http.json import encode_json


class RenderedPages:
    """Response bodies by key, each kept with the version of the data it shows: OpenSearch's
    request cache in miniature, for the pages agents read again and again.

    A page is served only at the version it was rendered at, so a write that
    moves the version retires it.  The reader must take the version *before*
    it reads (a write that lands in between then only retires the page early).
    Least recently used pages go first once the bodies pass ``max_bytes``; a
    body over an eighth of that is never kept.
    """

    #: What a kept page costs beyond its body (its key's tuple and strings, the entry, the links),
    #: counted generously so that a caller asking for thousands of tiny pages stays within the budget.
    OVERHEAD = 512

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self._pages: OrderedDict[Hashable, tuple[int, bytes]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._pages)

    def get(self, key: Hashable, version: int | None) -> bytes | None:
        found = self._pages.get(key) if version is not None else None
        if found is None or found[0] != version:
            return None
        self._pages.move_to_end(key)
        return found[1]

    def put(self, key: Hashable, version: int | None, body: bytes) -> None:
        cost = len(body) + self.OVERHEAD
        if version is None or cost > self.max_bytes // 8:
            return
        old = self._pages.pop(key, None)
        if old is not None:
            self.size -= len(old[1]) + self.OVERHEAD
        self._pages[key] = (version, body)
        self.size += cost
        while self.size > self.max_bytes:
            _, (_, dropped) = self._pages.popitem(last=False)
            self.size -= len(dropped) + self.OVERHEAD

    async def json(self, key: Hashable, version: int | None, render: Callable[[], Awaitable[Any]]) -> web.Response:
        """The page under ``key`` at ``version``, rendered by ``render`` unless kept."""
        body = self.get(key, version)
        if body is None:
            body = encode_json(await render())
            self.put(key, version, body)
        return web.Response(body=body, content_type="application/json")
