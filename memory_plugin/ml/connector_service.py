"""ml-commons' connectors: create, get, update, delete and search, each the owner's alone.

Credentials are sealed before they are stored, bound to their owner and connector, and opened only to make
a call (``predict_service``); no answer, error or log line carries them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from memory_plugin.auth import Principal
from memory_plugin.clock import new_id
from memory_plugin.dsl import SearchBody
from memory_plugin.errors import StatusBadRequest, StatusError, StatusNotFound
from memory_plugin.ml.config import MLSettings, now_millis
from memory_plugin.ml.connector_requests import ConnectorInput, check_protocol, parse_action
from memory_plugin.ml.connectors import check_urls
from memory_plugin.ml.documents import replace, search_kind
from memory_plugin.ml.results import ConnectorCreated, ConnectorDoc, Found, WriteResult
from memory_plugin.ml.secrets import SecretBox
from memory_plugin.ml.stores.base import MLStore, Stored
from memory_plugin.ml.views import CONNECTOR_INDEX, WRITES, api_version, connector_view


def sealing_context(owner: Principal, connector_id: str) -> str:
    """What a sealed credential is bound to: its owner and its connector."""
    return f"{owner.organization_id}\x00{owner.user_id or ''}\x00{connector_id}"


def uses(model: Mapping[str, Any], connector_id: str, *, deployed: bool) -> bool:
    """The stored model calls the connector (and, with ``deployed``, is deployed)."""
    if model.get("connector_id") != connector_id:
        return False
    return not deployed or model.get("model_state") == "DEPLOYED"


class Connectors:
    def __init__(self, store: MLStore, settings: MLSettings, box: Callable[[], SecretBox]) -> None:
        self.store = store
        self.settings = settings
        self._box = box

    def _sealed(self, owner: Principal, connector_id: str, credential: Mapping[str, str]) -> dict[str, str]:
        context = sealing_context(owner, connector_id)
        box = self._box()
        return {key: box.seal(value, context) for key, value in credential.items()}

    def source(self, owner: Principal, connector_id: str, found: ConnectorInput) -> dict[str, Any]:
        """The document of a new connector (or a model's own one, sealed for ``connector_id``), once it is one
        ``Connector.createConnector`` builds and its URLs are trusted."""
        check_protocol(found)
        assert found.actions is not None
        check_urls(found.actions, found.parameters, self.settings.trusted_endpoints)
        now = now_millis()
        source: dict[str, Any] = {
            "name": found.name,
            "version": found.version,
            "description": found.description,
            "protocol": found.protocol,
            "parameters": found.parameters,
            "credential": self._sealed(owner, connector_id, found.credential),
            "actions": [action.view() for action in found.actions],
            "created_time": now,
            "last_updated_time": now,
            "client_config": found.client_config.view() if found.client_config is not None else None,
        }
        return {key: value for key, value in source.items() if value is not None}

    async def create(self, owner: Principal, found: ConnectorInput) -> ConnectorCreated:
        connector_id = new_id()
        await self.store.create("connector", owner, connector_id, self.source(owner, connector_id, found))
        return ConnectorCreated(connector_id)

    async def stored(self, owner: Principal, connector_id: str) -> Stored:
        stored = await self.store.get("connector", owner, connector_id)
        if stored is None:
            raise StatusNotFound(f"Failed to find connector with the provided connector id: {connector_id}")
        return stored

    async def get(self, owner: Principal, connector_id: str) -> ConnectorDoc:
        return ConnectorDoc.of((await self.stored(owner, connector_id)).source)

    async def update(self, owner: Principal, connector_id: str, update: ConnectorInput) -> WriteResult:
        stored = await self.stored(owner, connector_id)
        source = dict(stored.source)
        for key in ("name", "description", "version", "protocol"):
            if getattr(update, key) is not None:
                source[key] = getattr(update, key)
        if update.parameters:
            source["parameters"] = {**source.get("parameters", {}), **update.parameters}
        if update.credential:
            source["credential"] = self._sealed(owner, connector_id, update.credential)
        if update.actions is not None:
            source["actions"] = [action.view() for action in update.actions]
        if update.client_config is not None:
            source["client_config"] = update.client_config.view()
        actions = [parse_action(a, "actions") for a in source.get("actions", [])]
        check_urls(actions, source.get("parameters", {}), self.settings.trusted_endpoints)
        in_use = [m.id for m in await self.store.all("model", owner) if uses(m.source, connector_id, deployed=True)]
        if in_use:
            raise StatusBadRequest(
                f"{len(in_use)} models are still using this connector, please undeploy the models first: "
                f"[{', '.join(in_use)}]"
            )
        source["last_updated_time"] = now_millis()
        source[WRITES] = stored.source.get(WRITES, 0) + 1
        await replace(self.store, "connector", owner, stored, source)
        return WriteResult(CONNECTOR_INDEX, connector_id, api_version(stored), "updated", refresh=False)

    async def delete(self, owner: Principal, connector_id: str) -> WriteResult:
        in_use = [m.id for m in await self.store.all("model", owner) if uses(m.source, connector_id, deployed=False)]
        if in_use:
            raise StatusError(
                f"{len(in_use)} models are still using this connector, please delete or update the models first: "
                f"[{', '.join(in_use)}]",
                409,
            )
        stored = await self.store.get("connector", owner, connector_id)
        if stored is None or not await self.store.delete("connector", owner, connector_id):
            return WriteResult(CONNECTOR_INDEX, connector_id, 0, "not_found", refresh=True)
        return WriteResult(CONNECTOR_INDEX, connector_id, api_version(stored), "deleted", refresh=True)

    async def search(self, owner: Principal, query: SearchBody) -> Found:
        return await search_kind(self.store, owner, "connector", query, CONNECTOR_INDEX, connector_view)
