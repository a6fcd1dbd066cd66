"""API keys in OpenSearch: every server process, on every host, reads the same keys.

One index, ``{index_prefix}-api-keys`` in the home region's cluster, one
document per key, ``_id`` the key id, holding what the keys file holds: the
owner and the SHA-256 of the secret, never the secret.  A key is created
create-only (two ids never collide silently) and revoked by setting
``revoked``; both writes refresh the index before they answer, so a snapshot
read after a revocation is acknowledged sees it.  Servers read every key
(``KeyBackend.read``) at most every ``auth.MAX_AGE`` seconds through the async
client; administration (``memory-plugin keys``) uses a blocking client, as
the CLI is a process of its own.

``open_key_store`` chooses the store from the ``[auth] keys_backend`` setting.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from opensearchpy import AsyncOpenSearch, OpenSearch
from opensearchpy.exceptions import ConflictError, NotFoundError, RequestError

from memory_plugin.auth import KeyBackend, KeyEntry, KeyStore, new_key
from memory_plugin.opensearch_client import client_options, make_client
from memory_plugin.settings import OpenSearchRegion, Settings

#: Keys read per request when reading them all.
PAGE = 1000
#: Seconds an administrative request (``memory-plugin keys``) may take, at least.
ADMIN_TIMEOUT = 60.0

MAPPINGS = {
    "dynamic": "strict",
    "properties": {
        "key_id": {"type": "keyword"},
        "secret_sha256": {"type": "keyword", "index": False},
        "organization_id": {"type": "keyword"},
        "user_id": {"type": "keyword"},
        "created_at": {"type": "keyword"},
        "revoked": {"type": "boolean"},
        "backend_roles": {"type": "keyword"},
    },
}
#: One shard; a replica wherever the cluster has a second node, none on a single node (still green).
SETTINGS = {"index": {"number_of_shards": 1, "auto_expand_replicas": "0-1"}}


def open_key_store(settings: Settings) -> KeyBackend:
    """The keys file (``keys_backend = "file"``) or the keys index in the home region's cluster."""
    if settings.auth.keys_backend == "opensearch":
        home = settings.regions[settings.home_region]
        assert isinstance(home, OpenSearchRegion), "load_settings refuses opensearch keys on an embedded home"
        return OpenSearchKeyStore(home)
    return KeyStore(settings.resolved_keys_file)


def _page_body(after: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {"size": PAGE, "sort": [{"key_id": "asc"}], "query": {"match_all": {}}}
    if after is not None:
        body["search_after"] = [after]
    return body


def _entry(hit: Mapping[str, Any]) -> KeyEntry:
    return KeyEntry.from_stored(hit["_source"])


class OpenSearchKeyStore(KeyBackend):
    def __init__(self, region: OpenSearchRegion) -> None:
        super().__init__()
        self.region = region
        self.index = f"{region.index_prefix.lower()}-api-keys"  # index names are lowercase
        self.where = f"index {self.index} on {', '.join(region.hosts)}"
        #: The server's client, made on its first read (inside the running event loop).
        self._client: AsyncOpenSearch | None = None

    # -- administration: a blocking client -----------------------------------

    def _admin(self, work: Callable[[OpenSearch], Any]) -> Any:
        # No one waits on the CLI but its user: a slow index creation is better than a timeout.
        client = OpenSearch(**{**client_options(self.region), "timeout": max(self.region.timeout, ADMIN_TIMEOUT)})
        try:
            return work(client)
        finally:
            client.close()

    def _ensure_index(self, client: OpenSearch) -> None:
        if client.indices.exists(index=self.index):
            # An index made before keys had roles: its strict mapping learns the new field (idempotent).
            client.indices.put_mapping(index=self.index, body={"properties": MAPPINGS["properties"]})
            return
        try:
            client.indices.create(index=self.index, body={"settings": SETTINGS, "mappings": MAPPINGS})
        except RequestError as error:  # another process created it meanwhile
            if error.error != "resource_already_exists_exception":
                raise

    def create(
        self, organization_id: str, user_id: str | None = None, backend_roles: Sequence[str] = ()
    ) -> tuple[KeyEntry, str]:
        entry, token = new_key(organization_id, user_id, backend_roles)

        def create(client: OpenSearch) -> None:
            self._ensure_index(client)
            client.create(index=self.index, id=entry.key_id, body=asdict(entry), refresh="true")

        try:
            self._admin(create)
        except ConflictError:  # 64 random bits met an existing id: astronomically unlikely, never silent
            raise RuntimeError(f"key id {entry.key_id} exists already; run the command again") from None
        return entry, token

    def revoke(self, key_id: str) -> bool:
        def revoke(client: OpenSearch) -> bool:
            try:
                client.update(index=self.index, id=key_id, body={"doc": {"revoked": True}}, refresh="true")
            except NotFoundError:
                return False
            return True

        return bool(self._admin(revoke))

    def entries(self) -> list[KeyEntry]:
        def read(client: OpenSearch) -> list[KeyEntry]:
            found: list[KeyEntry] = []
            after: str | None = None
            while True:
                hits = client.search(index=self.index, body=_page_body(after), ignore_unavailable=True)["hits"]["hits"]
                found.extend(_entry(hit) for hit in hits)
                if len(hits) < PAGE:
                    return found
                after = hits[-1]["_source"]["key_id"]

        return list(self._admin(read))

    # -- what the server reads -------------------------------------------------

    async def read(self) -> Mapping[str, KeyEntry]:
        if self._client is None:
            self._client = make_client(self.region)
        found: dict[str, KeyEntry] = {}
        after: str | None = None
        while True:
            response = await self._client.search(index=self.index, body=_page_body(after), ignore_unavailable=True)
            hits = response["hits"]["hits"]
            found.update((hit["_id"], _entry(hit)) for hit in hits)
            if len(hits) < PAGE:
                return found
            after = hits[-1]["_source"]["key_id"]

    async def close(self) -> None:
        await super().close()
        client, self._client = self._client, None
        if client is not None:
            await client.close()
