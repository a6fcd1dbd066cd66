"""A move into a region whose disk is full (issue 12, part B): the 507 leaves the original where it was.

The target region's folder is a small tmpfs, filled to ENOSPC after the server
opened it; the source region is on the ordinary disk.  In-process server, real
embedded stores, the embedder double (this is about our own write ordering).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from memory_plugin.app import create_app
from memory_plugin.settings import EmbeddedRegion, Settings
from tests.http.test_concurrent_writers import copies
from tests.support.fake_embedder import FakeEmbedder
from tests.system.test_faults import fill, mounted

BASE = "/v2/ai/conversation_histories"


@pytest.fixture
def full_target(tmp_path: Path):  # type: ignore[no-untyped-def]
    with mounted(tmp_path / "deu", "-t", "tmpfs", "-o", "size=4m", "tmpfs") as folder:
        yield folder


async def test_a_move_refused_for_a_full_disk_keeps_the_original(
    aiohttp_client, settings: Settings, admin, full_target: Path
):
    regions = {**settings.regions, "DEU": EmbeddedRegion(path=full_target)}
    app = create_app(dataclasses.replace(settings, regions=regions), embedder=FakeEmbedder.with_default_tokenizer())
    client = await aiohttp_client(app)
    original = {"record_id": "moving", "record_type": "voice", "region": "USA", "text": "refund for order 7"}
    response = await client.post(BASE, json={"records": [original]}, headers=admin.headers)
    assert response.status == 201, await response.text()

    filler = fill(full_target)
    # Large enough that no space SQLite already holds can take it.
    moved = {**original, "region": "DEU", "text": "refund for order 7, moved. " + "more words " * 60_000}
    response = await client.post(BASE, json={"records": [moved]}, headers=admin.headers)
    body = await response.json()
    assert response.status == 507, body
    assert body["errors"][0]["code"] == "insufficient_storage", body
    (kept,) = await copies(client, admin, "moving", "refund")
    assert (kept["region"], kept["text"]) == ("USA", "refund for order 7")

    filler.unlink()
    response = await client.post(
        BASE, json={"records": [{**moved, "text": "refund for order 7, moved"}]}, headers=admin.headers
    )
    assert response.status == 201, await response.text()
    (now,) = await copies(client, admin, "moving", "refund")
    assert (now["region"], now["text"]) == ("DEU", "refund for order 7, moved")
