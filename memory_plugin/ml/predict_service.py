"""ml-commons' predict: the built-in embedding model (or a model registered as it) embeds ``text_docs``;
a remote model calls its connector's predict action, within the owner's call budget, rate limit and
guardrails.  A credential is opened only for the call, and no answer or error carries it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from memory_plugin.auth import Principal
from memory_plugin.errors import InvalidArgument, ServiceError
from memory_plugin.ml.budget import Budget, Throttled
from memory_plugin.ml.config import Embeddings, MLSettings
from memory_plugin.ml.connector_requests import parse_action, parse_client_config
from memory_plugin.ml.connector_service import Connectors, sealing_context
from memory_plugin.ml.connectors import masked, outputs, prepare, trusted
from memory_plugin.ml.guards import RateLimiters, check_guardrail
from memory_plugin.ml.metrics import MLMetrics
from memory_plugin.ml.model_requests import PredictInput
from memory_plugin.ml.model_service import Models
from memory_plugin.ml.remote import RemoteCaller, signed_v4, with_retries
from memory_plugin.ml.results import Inference, Predictions, Tensor
from memory_plugin.ml.secrets import SecretBox

#: The built-in embedding model answers to this id without being registered.
BUILT_IN = "built-in"


class Predict:
    def __init__(
        self,
        embedder: Embeddings,
        settings: MLSettings,
        *,
        models: Models,
        connectors: Connectors,
        rate_limiters: RateLimiters,
        remote: RemoteCaller,
        budget: Budget,
        metrics: MLMetrics,
        box: Callable[[], SecretBox],
    ) -> None:
        self.embedder = embedder
        self.settings = settings
        self.models = models
        self.connectors = connectors
        self.rate_limiters = rate_limiters
        self.remote = remote
        self.budget = budget
        self.metrics = metrics
        self._box = box

    async def predict(
        self, owner: Principal, model_id: str, request: PredictInput, *, text_embedding: bool = False
    ) -> Predictions:
        if model_id == BUILT_IN:
            return await self._embed(request)
        stored = await self.models.stored(owner, model_id, "Failed to find model")
        if stored.source.get("algorithm") != "REMOTE":
            if stored.source.get("rate_limiter"):
                await self.rate_limiters.take(owner, model_id, stored.source["rate_limiter"])
            return await self._embed(request)
        if text_embedding and not request.text_docs:
            raise InvalidArgument("Empty text docs", parameter="text_docs")
        if not text_embedding:  # a remote model's _predict body is ``RemoteInferenceInputDataSet``: parameters only
            request = PredictInput(request.parameters, None)
        if stored.source.get("model_state") != "DEPLOYED":  # ml-commons deploys a remote model on first use
            await self.models.mark_deployed(owner, stored, lenient=True)
        return Predictions((await self._call_remote(owner, model_id, stored.source, request),))

    async def _embed(self, request: PredictInput) -> Predictions:
        if not request.text_docs:
            raise InvalidArgument("Empty text docs", parameter="text_docs")
        vectors = await self.embedder.passages(request.text_docs)
        keep = not request.target_response or "sentence_embedding" in request.target_response
        results = []
        for vector in vectors:
            data = [float(x) for x in vector] if request.return_number else None
            tensor = Tensor("sentence_embedding", "FLOAT32", (len(vector),), data)
            results.append(Inference((tensor,) if keep else ()))
        return Predictions(tuple(results))

    async def _call_remote(
        self, owner: Principal, model_id: str, model: Mapping[str, Any], request: PredictInput
    ) -> Inference:
        if "connector" in model:
            connector = model["connector"]
            context = sealing_context(owner, connector.get("sealed_for", model_id))
        else:
            connector = (await self.connectors.stored(owner, model["connector_id"])).source
            context = sealing_context(owner, model["connector_id"])
        actions = [parse_action(a, "actions") for a in connector.get("actions", [])]
        action = next((a for a in actions if a.action_type == "PREDICT"), None)
        if action is None:
            raise InvalidArgument("no predict action found", parameter="actions")
        parameters = {**connector.get("parameters", {}), **(request.parameters or {})}
        box = self._box()
        credential = {key: box.open(value, context) for key, value in connector.get("credential", {}).items()}
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

    async def predict_remote(self, owner: Principal, model_id: str, request: PredictInput) -> Inference:
        """``chat.Predictor``: how agentic memory's chat and embedding models call a remote model."""
        model = await self.models.stored(owner, model_id, "Failed to find model")
        return await self._call_remote(owner, model_id, model.source, request)
