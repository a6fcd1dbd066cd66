"""API keys in an OpenSearch index (``keys_backend = "opensearch"``): the CLI writes them, two independent
servers read them, and a revocation through either, or through the CLI, is refused by both within the
documented bound (``auth.MAX_AGE``, plus one read: under 2 s)."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from opensearchpy import AsyncOpenSearch

from memory_plugin import auth
from memory_plugin.app import KEYS, create_app
from memory_plugin.auth import Principal
from memory_plugin.auth_opensearch import OpenSearchKeyStore
from memory_plugin.cli import main
from memory_plugin.errors import Unavailable
from memory_plugin.settings import OpenSearchRegion, Settings, load_settings
from tests.support.polling import eventually

pytestmark = pytest.mark.opensearch

LIST = "/_plugins/_ml/memory"


@pytest.fixture
async def config(opensearch_nodes, tmp_path: Path) -> AsyncIterator[Path]:  # type: ignore[no-untyped-def]
    """A settings file with every store (and the keys) on nodes[0], under a fresh prefix; indices dropped after."""
    prefix = f"k-{uuid.uuid4().hex[:10]}"
    path = tmp_path / "memory-plugin.toml"
    path.write_text(
        f'data_dir = "{tmp_path / "data"}"\n[auth]\nkeys_backend = "opensearch"\n[bridge]\nenabled = false\n'
        f'[regions.USA]\nstore = "opensearch"\nhosts = ["{opensearch_nodes[0].url}"]\nindex_prefix = "{prefix}"\ntimeout = 30\n'
    )
    yield path
    client = AsyncOpenSearch(hosts=[opensearch_nodes[0].url], max_retries=0)
    try:
        await client.indices.delete(index=f"{prefix}-*", ignore_unavailable=True)
    finally:
        await client.close()


def cli(capsys, *args: str) -> str:  # type: ignore[no-untyped-def]
    code = main(list(args))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return str(captured.out)


def create_key(capsys, config: Path, user: str) -> tuple[str, dict[str, str]]:  # type: ignore[no-untyped-def]
    out = cli(capsys, "keys", "create", "--config", str(config), "--org", "org-1", "--user", user)
    token = out.strip().splitlines()[-1].split()[-1]
    return token.split(".", 1)[0], {"Authorization": f"Bearer {token}"}


async def refused_past_the_bound(client, headers: dict[str, str], revoked_at: float) -> None:  # type: ignore[no-untyped-def]
    """Once ``auth.MAX_AGE`` has passed since the revocation was acknowledged, the next request is refused,
    however long it takes: a snapshot that old is read again first, and that read began after the revocation.
    (Not a bound on the read's time, which a loaded machine stretches.)"""
    await asyncio.sleep(max(0.0, revoked_at + auth.MAX_AGE - time.monotonic()))
    response = await client.get(LIST, headers=headers)
    assert response.status == 401, await response.text()
    assert "revoked" in (await response.json())["error"]["reason"]


async def test_a_key_made_by_the_cli_works_everywhere_and_a_revocation_anywhere_is_refused_everywhere(
    aiohttp_client, embedder, config: Path, capsys, opensearch_nodes
):  # type: ignore[no-untyped-def]
    settings: Settings = load_settings(config, environ={}, http={"port": 0})
    alice_id, alice = create_key(capsys, config, "alice")
    bob_id, bob = create_key(capsys, config, "bob")

    store = OpenSearchKeyStore(settings.regions["USA"])  # type: ignore[arg-type]
    status, document = opensearch_nodes[0].request("GET", f"/{store.index}/_doc/{alice_id}")
    assert status == 200 and document["_source"]["organization_id"] == "org-1", document
    assert alice["Authorization"].split(".", 1)[1] not in str(document), "only the secret's hash is stored"

    first = await aiohttp_client(create_app(settings, embedder=embedder))
    second = await aiohttp_client(create_app(settings, embedder=embedder))
    assert isinstance(first.app[KEYS], OpenSearchKeyStore) and first.app[KEYS] is not second.app[KEYS]
    for client in (first, second):
        for headers in (alice, bob):
            assert (await client.get(LIST, headers=headers)).status == 200

    # Revoked through one server's store: refused by the other, which shares nothing with it but OpenSearch.
    assert first.app[KEYS].revoke(alice_id)
    revoked_at = time.monotonic()
    await refused_past_the_bound(second, alice, revoked_at)
    await refused_past_the_bound(first, alice, revoked_at)

    # Revoked through the CLI: refused by both; the other key still works.
    cli(capsys, "keys", "revoke", "--config", str(config), bob_id)
    revoked_at = time.monotonic()
    for client in (first, second):
        await refused_past_the_bound(client, bob, revoked_at)
    carol_id, carol = create_key(capsys, config, "carol")
    for client in (first, second):

        async def accepted(client=client) -> bool:  # type: ignore[no-untyped-def]
            return (await client.get(LIST, headers=carol)).status == 200

        await eventually(accepted, "a new key is accepted once the snapshot is read again")

    listing = cli(capsys, "keys", "list", "--config", str(config))
    states = {line.split("\t")[0]: line.split("\t")[-1] for line in listing.strip().splitlines()}
    assert states == {alice_id: "revoked", bob_id: "revoked", carol_id: "active"}


async def test_keys_that_cannot_be_read_are_refused_not_trusted(config: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """Past the bound, a snapshot may hold a revoked key: a server that cannot read the keys answers 503."""
    region = load_settings(config, environ={}).regions["USA"]
    assert isinstance(region, OpenSearchRegion)
    _, alice = create_key(capsys, config, "alice")
    store = OpenSearchKeyStore(region)
    await store.open()
    away = OpenSearchKeyStore(dataclasses.replace(region, hosts=("http://127.0.0.1:1",)))
    try:
        assert await store.authenticate(alice["Authorization"]) == Principal("org-1", "alice")
        away._entries, away._checked_at = store._entries, store._checked_at  # the same snapshot, then the cluster goes
        assert await away.authenticate(alice["Authorization"]) == Principal("org-1", "alice"), "within the bound"
        away._checked_at -= auth.MAX_AGE
        with pytest.raises(Unavailable, match="cannot be read"):
            await away.authenticate(alice["Authorization"])
    finally:
        await store.close()
        await away.close()
