"""Waiting for the history bridge: memory writes are indexed in the background, from the outbox."""

from __future__ import annotations

from aiohttp.test_utils import TestClient

from memory_plugin.app import BRIDGE


async def indexed(client: TestClient, timeout: float = 60.0) -> None:
    """Until every memory write so far is reflected in search (records written, deleted ones gone)."""
    await client.server.app[BRIDGE].settled(timeout)
