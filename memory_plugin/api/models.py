"""Connectors, models and predict in-process (``plugin.models``), as ml-commons' model API serves them.

The keywords here become the request bodies the HTTP routes read, parsed by the same parsers into the typed
inputs the ML services take, so every check (and its message) applies.  Gets answer ml-commons' documents,
typed by their documented keys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict, cast

from memory_plugin.api.results import Registered, SearchHits, Written
from memory_plugin.auth import Principal
from memory_plugin.dsl import SearchBody, parse_search
from memory_plugin.dsl.mapping import Fields
from memory_plugin.ml.connector_requests import Action, parse_connector_input
from memory_plugin.ml.model_requests import parse_predict_input, parse_register_input
from memory_plugin.ml.results import Inference
from memory_plugin.ml.service import BUILT_IN, MLService
from memory_plugin.ml.views import (
    CONNECTOR_FIELDS,
    MODEL_FIELDS,
    document_view,
    found_view,
    model_doc_view,
    written_view,
)

#: One HTTP call a connector makes: ``Action("PREDICT", "POST", url, headers=…, request_body=…)``.
ConnectorAction = Action


class ConnectorView(TypedDict, total=False):
    """A connector as get shows it; the credential never leaves the server."""

    name: str
    version: str
    description: str
    protocol: str
    parameters: dict[str, str]
    actions: list[dict[str, Any]]
    created_time: int
    last_updated_time: int
    client_config: dict[str, Any]


class ModelView(TypedDict, total=False):
    """A model as get shows it (ml-commons' ``MLModel``)."""

    name: str
    model_group_id: str
    algorithm: str
    model_version: str
    model_format: str
    description: str
    model_state: str
    model_config: dict[str, Any]
    created_time: int
    last_updated_time: int
    last_deployed_time: int
    last_undeployed_time: int
    is_hidden: bool
    connector_id: str
    connector: dict[str, Any]


def _query(query: Mapping[str, Any], fields: Fields) -> SearchBody:
    return parse_search(dict(query), fields=fields)


def _present(**values: Any) -> dict[str, Any]:
    return {name: value for name, value in values.items() if value is not None}


class Models:
    """The principal's connectors and models, and predict with them or with the built-in embedding model."""

    def __init__(self, service: MLService) -> None:
        self._service = service

    # -- connectors -------------------------------------------------------------------------

    async def create_connector(
        self,
        principal: Principal,
        name: str,
        *,
        actions: Sequence[ConnectorAction],
        protocol: str = "http",
        parameters: Mapping[str, Any] | None = None,
        credential: Mapping[str, str] | None = None,
        description: str | None = None,
        version: str = "1",
        client_config: Mapping[str, Any] | None = None,
    ) -> str:
        """A new connector's id.  ``credential`` is sealed before it is stored."""
        body = _present(
            name=name,
            description=description,
            version=version,
            protocol=protocol,
            parameters=dict(parameters) if parameters is not None else None,
            credential=dict(credential) if credential is not None else None,
            actions=[action.view() for action in actions],
            client_config=dict(client_config) if client_config is not None else None,
        )
        return (await self._service.connectors.create(principal, parse_connector_input(body))).connector_id

    async def get_connector(self, principal: Principal, connector_id: str) -> ConnectorView:
        return cast(ConnectorView, document_view(await self._service.connectors.get(principal, connector_id)))

    async def delete_connector(self, principal: Principal, connector_id: str) -> Written:
        return Written.of(written_view(await self._service.connectors.delete(principal, connector_id)))

    async def search_connectors(self, principal: Principal, query: Mapping[str, Any]) -> SearchHits:
        """A query DSL body over the principal's connectors."""
        return SearchHits.of(
            found_view(await self._service.connectors.search(principal, _query(query, CONNECTOR_FIELDS)))
        )

    # -- models -----------------------------------------------------------------------------

    async def register(
        self,
        principal: Principal,
        name: str,
        *,
        connector_id: str | None = None,
        function_name: str = "remote",
        description: str | None = None,
        model_group_id: str | None = None,
        model_format: str | None = None,
        deploy: bool = False,
    ) -> Registered:
        """Register a remote model over a connector (or, with ``function_name="TEXT_EMBEDDING"`` and
        ``model_format="ONNX"``, the built-in embedding model under its name)."""
        body = _present(
            name=name,
            function_name=function_name,
            connector_id=connector_id,
            description=description,
            model_group_id=model_group_id,
            model_format=model_format,
        )
        registered = await self._service.models.register(principal, parse_register_input(body, deploy=deploy))
        return Registered(registered.model_id, registered.task_id)

    async def get(self, principal: Principal, model_id: str) -> ModelView:
        return cast(ModelView, model_doc_view(await self._service.models.get(principal, model_id)))

    async def search_models(self, principal: Principal, query: Mapping[str, Any]) -> SearchHits:
        """A query DSL body over the principal's models."""
        return SearchHits.of(found_view(await self._service.models.search(principal, _query(query, MODEL_FIELDS))))

    async def deploy(self, principal: Principal, model_id: str) -> None:
        await self._service.models.deploy(principal, model_id)

    async def undeploy(self, principal: Principal, model_id: str) -> None:
        await self._service.models.undeploy(principal, model_id)

    async def delete(self, principal: Principal, model_id: str) -> Written:
        """A deployed model must be undeployed first."""
        return Written.of(written_view(await self._service.models.delete(principal, model_id)))

    # -- predict ----------------------------------------------------------------------------

    async def predict(
        self,
        principal: Principal,
        model_id: str,
        *,
        parameters: Mapping[str, Any] | None = None,
        text_docs: Sequence[str] | None = None,
    ) -> list[Inference]:
        """The ``inference_results`` of one predict: a remote model's answer to ``parameters`` (each
        tensor's ``data_as_map``, and the status code), or the embedding model's tensors for ``text_docs``."""
        body = _present(
            parameters=dict(parameters) if parameters is not None else None,
            text_docs=list(text_docs) if text_docs is not None else None,
        )
        predicted = await self._service.predictions.predict(principal, model_id, parse_predict_input(body))
        return list(predicted.results)

    async def embed(self, principal: Principal, texts: Sequence[str], model_id: str = BUILT_IN) -> list[list[float]]:
        """One vector per text, from the built-in embedding model (or a model registered as it)."""
        predicted = await self._service.predictions.predict(
            principal, model_id, parse_predict_input({"text_docs": list(texts)})
        )
        return [[float(x) for x in result.output[0].data or ()] for result in predicted.results]
