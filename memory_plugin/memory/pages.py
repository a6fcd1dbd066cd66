"""Rendered message pages, kept with the version of the conversation they show.

The versions are the memory stores' (``messages_version``): a write moves a
conversation's version, and the pages rendered before it are no longer served.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from typing import Any

from aiohttp import web

from memory_plugin.http.json import encode_json
from memory_plugin.versioned_cache import VersionedCache


class RenderedPages:
    """Response bodies by key, each kept with the version of the data it shows (``VersionedCache``), for
    the pages agents read again and again.  The reader must take the version *before* it reads."""

    #: What a kept page costs beyond its body (its key's tuple and strings, the entry, the links),
    #: counted generously so that a caller asking for thousands of tiny pages stays within the budget.
    OVERHEAD = 512

    def __init__(self, max_bytes: int) -> None:
        self._pages: VersionedCache[bytes] = VersionedCache(max_bytes)

    def __len__(self) -> int:
        return len(self._pages)

    @property
    def keeps(self) -> bool:
        """False where no page may be kept (``page_cache_mb = 0``)."""
        return self._pages.max_bytes > 0

    @property
    def size(self) -> int:
        return self._pages.size

    def get(self, key: Hashable, version: int | None) -> bytes | None:
        return self._pages.get(key, version)

    def put(self, key: Hashable, version: int | None, body: bytes) -> None:
        self._pages.put(key, version, body, len(body) + self.OVERHEAD)

    async def json(self, key: Hashable, version: int | None, render: Callable[[], Awaitable[Any]]) -> web.Response:
        """The page under ``key`` at ``version``, rendered by ``render`` unless kept."""
        body = self.get(key, version)
        if body is None:
            body = encode_json(await render())
            self.put(key, version, body)
        return web.Response(body=body, content_type="application/json")
