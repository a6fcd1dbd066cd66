"""A registered remote model as agentic memory's chat model (what ``llm_id`` names) and embedding model
(what ``embedding_model_id`` names)."""

from __future__ import annotations

import json
from collections.abc import Hashable, Sequence
from typing import Any, Protocol

import numpy as np

from memory_plugin.auth import Principal
from memory_plugin.errors import StatusError
from memory_plugin.ml.model_requests import PredictInput
from memory_plugin.ml.results import Inference


class Predictor(Protocol):
    """What calls a registered remote model (``MLService``)."""

    async def predict_remote(self, owner: Principal, model_id: str, request: PredictInput) -> Inference:
        """One ``inference_results`` entry of ``owner``'s remote model ``model_id``, the model read at this call
        (it may be gone since it was chosen: a 404 then)."""
        ...


class RemoteChat:
    """A registered remote model called as ml-commons' agentic memory calls it: ``_predict`` with the
    parameters ``system_prompt`` and ``user_prompt`` (and ``messages``, the two as an OpenAI chat list, for
    connectors written for chat completions).  The answer is the remote JSON, as ``dataAsMap`` shows it."""

    def __init__(self, predictor: Predictor, owner: Principal, model_id: str) -> None:
        self.predictor, self.owner, self.model_id = predictor, owner, model_id

    async def complete(self, system_prompt: str, user_prompt: str) -> dict[str, Any]:
        messages = [{"role": "system", "content": system_prompt}, {"role": "user", "content": user_prompt}]
        parameters = {
            "system_prompt": system_prompt,
            "user_prompt": user_prompt,
            "messages": json.dumps(messages, ensure_ascii=False),
        }
        result = await self.predictor.predict_remote(self.owner, self.model_id, PredictInput(parameters, None))
        answer = result.output[0].data_as_map if result.output else None
        if not isinstance(answer, dict):
            raise StatusError("the remote model's answer is not a JSON object", 502)
        return answer

    async def close(self) -> None:
        """Nothing to close: calls go through the predictor's client."""


class RemoteEmbedding:
    """A registered remote model embedding texts as ``_predict/text_embedding`` does: all the texts in one
    call (``text_docs``), one vector each back.  Queries and passages are embedded alike: a remote model
    takes no e5-style prefixes."""

    def __init__(self, predictor: Predictor, owner: Principal, model_id: str) -> None:
        self.predictor, self.owner, self.model_id = predictor, owner, model_id

    async def passages(self, texts: Sequence[str], *, tenant: Hashable = None) -> np.ndarray:
        result = await self.predictor.predict_remote(self.owner, self.model_id, PredictInput(None, list(texts)))
        vectors = [tensor.data for tensor in result.output]
        if len(vectors) != len(texts) or len({len(v) for v in vectors if v is not None}) != 1:
            raise StatusError(
                f"the embedding model answered {len(vectors)} vectors of unequal or no length for {len(texts)} texts",
                502,
            )
        return np.asarray(vectors, dtype=np.float32)

    async def query(self, text: str) -> np.ndarray:
        return (await self.passages([text])).reshape(-1)
