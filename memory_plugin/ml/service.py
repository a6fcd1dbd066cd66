"""Connectors, models, model groups, tasks and predict, as ml-commons 2.19 answers them.

Everything here belongs to its owner: another caller's connector or model is
as absent as one that never existed (404), and a user's erasure removes all of
it.  Credentials are sealed before they are stored and opened only to make a
call; no answer, error or log line carries them.  Register and deploy finish
before they answer (a remote model has nothing to load), so their tasks are
already ``COMPLETED`` when the caller reads them.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Mapping
from typing import Any

from memory_plugin.auth import Principal
from memory_plugin.clock import new_id
from memory_plugin.dsl.execute import bounded, execute, search_response
from memory_plugin.dsl.mapping import Fields
from memory_plugin.dsl.parse import parse_search
from memory_plugin.errors import InvalidArgument, ServiceError, StatusBadRequest, StatusError, StatusNotFound
from memory_plugin.ml.budget import Throttled
from memory_plugin.ml.chat import RemoteChat, RemoteEmbedding
from memory_plugin.ml.config import Embeddings, MLSettings, now_millis
from memory_plugin.ml.connector_requests import (
    ConnectorInput,
    check_protocol,
    parse_action,
    parse_client_config,
    parse_connector_input,
)
from memory_plugin.ml.connectors import check_urls, masked, outputs, prepare, trusted
from memory_plugin.ml.guards import RateLimiters, check_guardrail
from memory_plugin.ml.metrics import MLMetrics
from memory_plugin.ml.model_groups import ModelGroups
from memory_plugin.ml.model_requests import PredictInput, RegisterInput, parse_predict_input, parse_register_input
from memory_plugin.ml.remote import RemoteCaller, signed_v4, with_retries
from memory_plugin.ml.secrets import SecretBox, new_master_key
from memory_plugin.ml.stores.base import Kind, MLStore, Stored
from memory_plugin.ml.views import (
    CONNECTOR_FIELDS,
    CONNECTOR_INDEX,
    MODEL_FIELDS,
    MODEL_INDEX,
    TASK_FIELDS,
    TASK_INDEX,
    WRITES,
    api_version,
    connector_view,
    model_search_view,
    model_view,
    task_view,
    write_result,
)

#: Models one ``_undeploy`` call may name.
MAX_BULK_UNDEPLOY = 1000
#: The built-in embedding model answers to this id without being registered.
BUILT_IN = "built-in"


def _context(owner: Principal, connector_id: str) -> str:
    """What a sealed credential is bound to: its owner and its connector."""
    return f"{owner.organization_id}\x00{owner.user_id or ''}\x00{connector_id}"


class MLService:
    def __init__(
        self,
        store: MLStore,
        embedder: Embeddings,
        settings: MLSettings,
        metrics: MLMetrics | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.settings = settings
        self.node_id = hashlib.sha256(settings.node_name.encode()).hexdigest()[:22]
        self.remote = RemoteCaller(timeout=settings.timeout, allow_private=settings.allow_private_addresses)
        self.budget = store.call_budget(settings.calls_per_minute, settings.concurrent_calls, settings.timeout)
        self.rate_limiters = RateLimiters(store)
        self.metrics = metrics or MLMetrics()
        self._box: SecretBox | None = None
        self.groups = ModelGroups(store)

    async def open(self) -> None:
        self._box = SecretBox(await self.store.master_key(new_master_key()))

    async def close(self) -> None:
        await self.remote.close()

    @property
    def box(self) -> SecretBox:
        assert self._box is not None, "MLService.open() first"
        return self._box

    # -- connectors ---------------------------------------------------------------------

    def _sealed(self, owner: Principal, connector_id: str, credential: Mapping[str, str]) -> dict[str, str]:
        context = _context(owner, connector_id)
        return {key: self.box.seal(value, context) for key, value in credential.items()}

    def _connector_source(self, owner: Principal, connector_id: str, found: ConnectorInput) -> dict[str, Any]:
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

    async def create_connector(self, owner: Principal, body: Any) -> dict[str, Any]:
        found = parse_connector_input(body)
        connector_id = new_id()
        await self.store.create("connector", owner, connector_id, self._connector_source(owner, connector_id, found))
        return {"connector_id": connector_id}

    async def _connector(self, owner: Principal, connector_id: str) -> Stored:
        stored = await self.store.get("connector", owner, connector_id)
        if stored is None:
            raise StatusNotFound(f"Failed to find connector with the provided connector id: {connector_id}")
        return stored

    async def get_connector(self, owner: Principal, connector_id: str) -> dict[str, Any]:
        return connector_view((await self._connector(owner, connector_id)).source)

    async def update_connector(self, owner: Principal, connector_id: str, body: Any) -> dict[str, Any]:
        update = parse_connector_input(body, update=True)
        stored = await self._connector(owner, connector_id)
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
        in_use = [m.id for m in await self.store.all("model", owner) if _uses(m.source, connector_id, deployed=True)]
        if in_use:
            raise StatusBadRequest(
                f"{len(in_use)} models are still using this connector, please undeploy the models first: "
                f"[{', '.join(in_use)}]"
            )
        source["last_updated_time"] = now_millis()
        source[WRITES] = stored.source.get(WRITES, 0) + 1
        await self._replace("connector", owner, stored, source)
        return write_result(CONNECTOR_INDEX, connector_id, api_version(stored), "updated", refresh=False)

    async def delete_connector(self, owner: Principal, connector_id: str) -> dict[str, Any]:
        in_use = [m.id for m in await self.store.all("model", owner) if _uses(m.source, connector_id, deployed=False)]
        if in_use:
            raise StatusError(
                f"{len(in_use)} models are still using this connector, please delete or update the models first: "
                f"[{', '.join(in_use)}]",
                409,
            )
        stored = await self.store.get("connector", owner, connector_id)
        if stored is None or not await self.store.delete("connector", owner, connector_id):
            return write_result(CONNECTOR_INDEX, connector_id, 0, "not_found", refresh=True)
        return write_result(CONNECTOR_INDEX, connector_id, api_version(stored), "deleted", refresh=True)

    async def search_connectors(self, owner: Principal, body: Any) -> dict[str, Any]:
        return await self._search(owner, "connector", body, CONNECTOR_INDEX, connector_view, CONNECTOR_FIELDS)

    # -- models -------------------------------------------------------------------------

    async def register(self, owner: Principal, body: Any, *, deploy: bool = False) -> dict[str, Any]:
        found = parse_register_input(body, deploy=deploy)
        source = await self._model_source(owner, found)
        group_id, version = await self._model_group(owner, found)
        model_id = new_id()
        now = now_millis()
        source.update({"model_group_id": group_id, "model_version": version, "created_time": now})
        source["last_updated_time"] = now
        source["model_state"] = "REGISTERED"
        source["is_hidden"] = False
        await self.store.create("model", owner, model_id, source)
        task_id = await self._task(owner, model_id, "REGISTER_MODEL", source["algorithm"])
        answer = {"task_id": task_id, "status": "CREATED", "model_id": model_id}
        if found.deploy:
            await self.deploy(owner, model_id)
        return answer

    async def _model_source(self, owner: Principal, found: RegisterInput) -> dict[str, Any]:
        if found.function_name != "REMOTE":
            if found.name not in self.settings.built_in_names:
                raise InvalidArgument(
                    f"model [{found.name}] is not available here: this server runs no model it cannot load, "
                    f"and its built-in text embedding model registers as one of {list(self.settings.built_in_names)}",
                    parameter="name",
                )
            if found.guardrails is not None:  # ml-commons runs guardrails in remote calls only
                raise InvalidArgument("guardrails apply to remote models only", parameter="guardrails")
            local: dict[str, Any] = {
                "name": found.name,
                "algorithm": "TEXT_EMBEDDING",
                "model_format": found.model_format or "ONNX",
                "model_config": {
                    "model_type": "bert",
                    "embedding_dimension": self.embedder.dimension,
                    "framework_type": "sentence_transformers",
                },
            }
            if found.rate_limiter is not None:
                local["rate_limiter"] = found.rate_limiter
            if found.description is not None:  # ml-commons leaves an absent field out, never null
                local["description"] = found.description
            return local
        source: dict[str, Any] = {"name": found.name, "algorithm": "REMOTE"}
        if found.description is not None:
            source["description"] = found.description
        if found.rate_limiter is not None:
            source["rate_limiter"] = found.rate_limiter
        if found.guardrails is not None:
            source["guardrails"] = found.guardrails
        if found.connector is not None:
            if found.connector.get("protocol") is None:  # ``Connector.createConnector`` reads it first
                raise InvalidArgument("connector protocol is null", parameter="connector.protocol")
            connector = parse_connector_input(found.connector, update=True)
            if not connector.credential:
                raise InvalidArgument("Connector credential is null or empty list", parameter="connector.credential")
            model_key = new_id()
            inline = self._connector_source(owner, model_key, connector)
            inline.pop("created_time", None)
            inline.pop("last_updated_time", None)
            inline["sealed_for"] = model_key  # the credential's context: the model's own key
            source["connector"] = inline
        elif found.connector_id is not None:
            if await self.store.get("connector", owner, found.connector_id) is None:
                raise StatusNotFound(f"Failed to find connector:{found.connector_id}")
            source["connector_id"] = found.connector_id
        else:
            raise InvalidArgument(
                "You must provide connector content when creating a remote model without connector id!",
                parameter="connector",
            )
        return source

    async def _model_group(self, owner: Principal, found: RegisterInput) -> tuple[str, str]:
        """The group a new model joins, and its version there: the named group (if the caller may use it),
        else the caller's group of the model's name (or one of that name it may use), else a new one."""
        group_id = found.model_group_id or None  # ml-commons: an empty id is none (``StringUtils.isEmpty``)
        group = (
            await self.groups.usable(owner, group_id, "Model group not found")
            if group_id is not None
            else await self.groups.own_or_usable_named(owner, found.name)
        )
        if group is None:
            return await self.groups.create_for_model(owner, found.name), "1"
        return group.stored.id, await self.groups.next_version(group)

    async def _task(
        self, owner: Principal, model_id: str, task_type: str, function_name: str, *, is_async: bool = False
    ) -> str:
        task_id = new_id()
        now = now_millis()
        task = {
            "model_id": model_id,
            "task_type": task_type,
            "function_name": function_name,
            "state": "COMPLETED",
            "worker_node": [self.node_id],
            "create_time": now,
            "last_update_time": now,
            "is_async": is_async,
        }
        await self.store.create("task", owner, task_id, task)
        return task_id

    async def _model(self, owner: Principal, model_id: str, missing: str | None = None) -> Stored:
        stored = await self.store.get("model", owner, model_id)
        if stored is None:
            raise StatusNotFound(missing or f"Failed to find model with the provided model id: {model_id}")
        return stored

    async def get_model(self, owner: Principal, model_id: str) -> dict[str, Any]:
        return model_view((await self._model(owner, model_id)).source)

    async def deploy(self, owner: Principal, model_id: str) -> dict[str, Any]:
        stored = await self._model(owner, model_id, "Failed to find model")
        await self._deployed(owner, stored)
        task_id = await self._task(owner, model_id, "DEPLOY_MODEL", stored.source["algorithm"], is_async=True)
        return {"task_id": task_id, "task_type": "DEPLOY_MODEL", "status": "COMPLETED"}

    async def _deployed(self, owner: Principal, stored: Stored, *, lenient: bool = False) -> None:
        """Mark a model deployed: a remote one has nothing to load.  Counted as ml-commons writes it
        (``DEPLOYING``, then ``DEPLOYED``), so that ``_version`` reads the same."""
        now = now_millis()
        deployed = {
            **stored.source,
            "model_state": "DEPLOYED",
            "last_updated_time": now,
            "last_deployed_time": now,
            "auto_redeploy_retry_times": 0,
            "planning_worker_node_count": 1,
            "current_worker_node_count": 1,
            "planning_worker_nodes": [self.node_id],
            "deploy_to_all_nodes": True,
            WRITES: stored.source.get(WRITES, 0) + 2,
        }
        if lenient:  # concurrent first calls all deploy it: one write wins, and the model is deployed either way
            await self.store.replace("model", owner, stored, deployed)
        else:
            await self._replace("model", owner, stored, deployed)

    async def undeploy(self, owner: Principal, model_id: str) -> dict[str, Any]:
        stored = await self._model(owner, model_id, "Failed to find model")
        if stored.source.get("model_state") != "DEPLOYED":
            return {self.node_id: {"stats": {model_id: "not_found"}}}
        undeployed = {
            **stored.source,
            "model_state": "UNDEPLOYED",
            "last_updated_time": now_millis(),
            "planning_worker_node_count": 0,
            "current_worker_node_count": 0,
            "planning_worker_nodes": [],
            WRITES: stored.source.get(WRITES, 0) + 1,
        }
        await self._replace("model", owner, stored, undeployed)
        return {self.node_id: {"stats": {model_id: "undeployed"}}}

    async def delete_model(self, owner: Principal, model_id: str) -> dict[str, Any]:
        stored = await self._model(owner, model_id)
        if stored.source.get("model_state") in ("DEPLOYED", "DEPLOYING", "PARTIALLY_DEPLOYED"):
            raise StatusBadRequest(
                "Model cannot be deleted in deploying or deployed state. Try undeploy model first then delete"
            )
        deleted = await self.store.delete("model", owner, model_id)
        await self.rate_limiters.forget(owner, model_id)
        return write_result(MODEL_INDEX, model_id, api_version(stored), "deleted" if deleted else "not_found", True)

    async def search_models(self, owner: Principal, body: Any) -> dict[str, Any]:
        return await self._search(owner, "model", body, MODEL_INDEX, model_search_view, MODEL_FIELDS)

    async def search_tasks(self, owner: Principal, body: Any) -> dict[str, Any]:
        return await self._search(owner, "task", body, TASK_INDEX, task_view, TASK_FIELDS)

    async def delete_task(self, owner: Principal, task_id: str) -> dict[str, Any]:
        stored = await self.store.get("task", owner, task_id)
        if stored is None or not await self.store.delete("task", owner, task_id):
            raise StatusNotFound("Failed to find task")
        return write_result(TASK_INDEX, task_id, api_version(stored), "deleted", refresh=True)

    async def undeploy_many(self, owner: Principal, body: Any) -> dict[str, Any]:
        """``POST /models/_undeploy`` with ``model_ids``: each of the owner's models, as one undeploy does."""
        ids = body.get("model_ids") if isinstance(body, dict) else None
        if ids is None:
            ids = [m.id for m in await self.store.all("model", owner) if m.source.get("model_state") == "DEPLOYED"]
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise InvalidArgument("[model_ids] must be an array of model ids", parameter="model_ids")
        stats: dict[str, str] = {}
        for model_id in ids[:MAX_BULK_UNDEPLOY]:
            if await self.store.get("model", owner, model_id) is None:
                stats[model_id] = "not_found"
                continue
            stats.update((await self.undeploy(owner, model_id))[self.node_id]["stats"])
        return {self.node_id: {"stats": stats}} if stats else {}

    async def get_task(self, owner: Principal, task_id: str) -> dict[str, Any]:
        stored = await self.store.get("task", owner, task_id)
        if stored is None:
            raise StatusNotFound("Failed to find task")
        return task_view(stored.source)

    # -- predict ------------------------------------------------------------------------

    async def predict(
        self, owner: Principal, model_id: str, body: Any, *, text_embedding: bool = False
    ) -> dict[str, Any]:
        request = parse_predict_input(body)
        if model_id == BUILT_IN:
            return await self._embed(request)
        stored = await self._model(owner, model_id, "Failed to find model")
        if stored.source.get("algorithm") != "REMOTE":
            if stored.source.get("rate_limiter"):
                await self.rate_limiters.take(owner, model_id, stored.source["rate_limiter"])
            return await self._embed(request)
        if text_embedding and not request.text_docs:
            raise InvalidArgument("Empty text docs", parameter="text_docs")
        if not text_embedding:  # a remote model's _predict body is ``RemoteInferenceInputDataSet``: parameters only
            request = PredictInput(request.parameters, None)
        if stored.source.get("model_state") != "DEPLOYED":  # ml-commons deploys a remote model on first use
            await self._deployed(owner, stored, lenient=True)
        return {"inference_results": [await self._call_remote(owner, model_id, stored.source, request)]}

    async def _embed(self, request: PredictInput) -> dict[str, Any]:
        if not request.text_docs:
            raise InvalidArgument("Empty text docs", parameter="text_docs")
        vectors = await self.embedder.passages(request.text_docs)
        results = []
        for vector in vectors:
            tensor: dict[str, Any] = {"name": "sentence_embedding", "data_type": "FLOAT32", "shape": [len(vector)]}
            if request.return_number:
                tensor["data"] = [float(x) for x in vector]
            keep = not request.target_response or "sentence_embedding" in request.target_response
            results.append({"output": [tensor] if keep else []})
        return {"inference_results": results}

    async def _call_remote(
        self, owner: Principal, model_id: str, model: Mapping[str, Any], request: PredictInput
    ) -> dict[str, Any]:
        if "connector" in model:
            connector = model["connector"]
            context = _context(owner, connector.get("sealed_for", model_id))
        else:
            connector = (await self._connector(owner, model["connector_id"])).source
            context = _context(owner, model["connector_id"])
        actions = [parse_action(a, "actions") for a in connector.get("actions", [])]
        action = next((a for a in actions if a.action_type == "PREDICT"), None)
        if action is None:
            raise InvalidArgument("no predict action found", parameter="actions")
        parameters = {**connector.get("parameters", {}), **(request.parameters or {})}
        credential = {key: self.box.open(value, context) for key, value in connector.get("credential", {}).items()}
        prepared = prepare(action, connector.get("parameters", {}), request.parameters, credential, request.text_docs)
        if connector.get("protocol") == "aws_sigv4":
            prepared = signed_v4(prepared, credential, parameters)
        if not trusted(prepared.url, self.settings.trusted_endpoints):  # parameters given now may move it
            raise InvalidArgument(
                "Connector URL is not matching the trusted connector endpoint regex, URL is: "
                + masked(action.url, parameters),
                parameter="url",
            )
        if model.get("rate_limiter"):  # in ml-commons' order: the payload is checked, then the limiter, the guardrails
            await self.rate_limiters.take(owner, model_id, model["rate_limiter"])
        check_guardrail(model.get("guardrails"), "input", prepared.guarded or "")
        config = parse_client_config(connector.get("client_config") or {})
        deadline = asyncio.get_running_loop().time() + self.settings.timeout  # retries included
        slot = f"{owner.organization_id}\x00{context}"
        calls = self.metrics.remote_calls
        try:
            async with self.budget.spend(owner.organization_id):  # one call of the budget, its retries included
                with self.metrics.remote_seconds.time():
                    answer = await with_retries(
                        lambda: self.remote.call(prepared, config, deadline, slot), config, deadline
                    )
        except Throttled:
            calls.labels(owner.organization_id, "throttled").inc()
            raise
        except ServiceError:
            calls.labels(owner.organization_id, "error").inc()
            raise
        calls.labels(owner.organization_id, "ok").inc()
        check_guardrail(model.get("guardrails"), "output", answer.body.decode("utf-8", "replace"))
        return outputs(action, answer.status, answer.body, request.text_docs)

    async def predict_remote(self, owner: Principal, model_id: str, request: PredictInput) -> dict[str, Any]:
        """``chat.Predictor``: how agentic memory's chat and embedding models call a remote model."""
        model = await self._model(owner, model_id, "Failed to find model")
        return await self._call_remote(owner, model_id, model.source, request)

    async def _is_remote(self, owner: Principal, model_id: str) -> bool:
        stored = await self.store.get("model", owner, model_id)
        return stored is not None and stored.source.get("algorithm") == "REMOTE"

    async def chat_model(self, owner: Principal, model_id: str) -> RemoteChat | None:
        """``owner``'s remote model ``model_id`` as a chat model (for agentic memory's ``llm_id``), or None."""
        return RemoteChat(self, owner, model_id) if await self._is_remote(owner, model_id) else None

    async def embedding_model(self, owner: Principal, model_id: str) -> RemoteEmbedding | None:
        """``owner``'s remote model ``model_id`` as an embedding model (agentic ``embedding_model_id``), or None."""
        return RemoteEmbedding(self, owner, model_id) if await self._is_remote(owner, model_id) else None

    # -- shared -------------------------------------------------------------------------

    async def _search(
        self, owner: Principal, kind: Kind, body: Any, index: str, view: Any, fields: Fields
    ) -> dict[str, Any]:
        query = parse_search(body, fields=fields)
        started = time.perf_counter()
        documents = [(s.id, view(s.source), api_version(s)) for s in await self.store.all(kind, owner)]
        results = await bounded(lambda budget: execute(query, documents, budget=budget))
        return search_response(results, int((time.perf_counter() - started) * 1000), index=index)

    async def _replace(self, kind: Kind, owner: Principal, stored: Stored, source: dict[str, Any]) -> None:
        if not await self.store.replace(kind, owner, stored, source):
            raise StatusError(f"the {kind.replace('_', ' ')} was changed by another request; read it again", 409)

    async def erase_user(self, organization_id: str, user_id: str) -> int:
        return await self.store.erase(Principal(organization_id, user_id))


def _uses(model: Mapping[str, Any], connector_id: str, *, deployed: bool) -> bool:
    if model.get("connector_id") != connector_id:
        return False
    return not deployed or model.get("model_state") == "DEPLOYED"
