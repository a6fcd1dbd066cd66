"""What the service needs of an LLM: the ``ChatModel`` protocol and reading its answers.

The connector itself (``connector.py``) is an OpenAI-compatible chat-completions
client.  ml-commons calls a remote model's ``_predict`` with a ``system_prompt`` and a
``user_prompt`` and reads the answer at ``llm_result_path``.  Here the remote
model is whatever the settings name (URL, key, model, timeout); the answer is
the raw JSON response, read at the same kind of path
(``$.choices[0].message.content`` by default).
"""

from __future__ import annotations

import json
import re
from collections.abc import Hashable, Sequence
from typing import Any, Protocol

import numpy as np

from embedder import AsyncEmbedder
from memory_plugin.agentic.models import EmbeddingChoice
from memory_plugin.auth import Principal
from memory_plugin.errors import InsufficientStorage, ServiceError, Unavailable, UpstreamFailed

DEFAULT_RESULT_PATH = "$.choices[0].message.content"
NO_LLM = (
    "infer=true needs an LLM connector, and none is configured: set url in [agentic.llm] "
    "(MEMORY_PLUGIN_AGENTIC_LLM_URL) to an OpenAI-compatible chat completions endpoint, or register a "
    "remote model (/_plugins/_ml/models/_register) and name it as the container's llm_id"
)
#: The store's own failures (unreachable, full), worth another try.  Any other error a registered model's call
#: raises (its connector, the remote service, a timeout, the organisation's call budget) is the model's answer.
STORE_FAILURES = (Unavailable, InsufficientStorage)
_PATH_STEP = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]|\['([^']*)'\]")


class LLMError(Exception):
    """The connector failed: transport, status, or an answer without the expected JSON."""


class ChatModel(Protocol):
    async def complete(self, system_prompt: str, user_prompt: str) -> dict[str, Any]: ...

    async def close(self) -> None: ...


class TextEmbedding(Protocol):
    """What embeds a container's long-term memories and its queries: the built-in model
    (``embedder.AsyncEmbedder``) or a registered remote one."""

    async def passages(self, texts: Sequence[str], *, tenant: Hashable = None) -> np.ndarray: ...

    async def query(self, text: str) -> np.ndarray: ...


class RegisteredModels(Protocol):
    """The owner's registered remote models (the ml service): a container's ``llm_id`` and
    ``embedding_model_id`` name them."""

    async def chat_model(self, owner: Principal, model_id: str) -> ChatModel | None:
        """The owner's remote model ``model_id``, or None when they registered none by that id."""
        ...

    async def embedding_model(self, owner: Principal, model_id: str) -> TextEmbedding | None:
        """The owner's remote model ``model_id`` as an embedding model, or None when they registered none."""
        ...


def read_path(document: Any, path: str) -> Any:
    """A JSONPath subset (``$.a.b[0]['c']``), as ``llm_result_path`` uses it."""
    if not path.startswith("$"):
        raise LLMError(f"llm_result_path must start with $: {path}")
    position, value = 1, document
    while position < len(path):
        step = _PATH_STEP.match(path, position)
        if step is None:
            raise LLMError(f"Invalid llm_result_path: {path}")
        key, index, quoted = step.groups()
        try:
            value = value[int(index)] if index is not None else value[key if key is not None else quoted]
        except (KeyError, IndexError, TypeError):
            raise LLMError(f"Nothing at llm_result_path {path} in the LLM answer") from None
        position = step.end()
    return value


def first_json_object(text: Any) -> dict[str, Any]:
    """The first JSON object in an LLM's text (it may wrap it in prose or a code fence)."""
    if isinstance(text, dict):
        return text
    if not isinstance(text, str):
        raise LLMError("The LLM answer at llm_result_path is not text")
    decoder = json.JSONDecoder()
    for start in (match.start() for match in re.finditer(r"\{", text)):
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    raise LLMError("The LLM answer holds no JSON object")


class RegisteredChat:
    """A registered model as the chat model, failing as the default LLM fails (``LLMError``): an inferring add
    records the failure in its history once, where a retry would hold up every tenant's queue for as long as
    the remote model takes to time out."""

    def __init__(self, model: ChatModel) -> None:
        self.model = model

    async def complete(self, system_prompt: str, user_prompt: str) -> dict[str, Any]:
        try:
            return await self.model.complete(system_prompt, user_prompt)
        except STORE_FAILURES:
            raise
        except ServiceError as error:
            raise LLMError(error.reason) from None

    async def close(self) -> None:
        await self.model.close()


class ContainerModels:
    """The models a container names: its ``llm_id`` and ``embedding_model_id`` are the owner's registered
    remote models of those ids, else the operator's default LLM and the built-in embedding model."""

    def __init__(self, embedder: AsyncEmbedder, llm: ChatModel | None, registered: RegisteredModels | None) -> None:
        self.embedder = embedder
        self.llm = llm
        self.registered = registered

    async def chat(self, owner: Principal, llm_id: Any) -> ChatModel | None:
        """The owner's registered model ``llm_id``, called with their connector and key; else the operator's
        default LLM (``[agentic.llm] url``), or None without one."""
        if self.registered is not None and isinstance(llm_id, str) and llm_id:
            registered = await self.registered.chat_model(owner, llm_id)
            if registered is not None:
                return RegisteredChat(registered)
        return self.llm

    async def embedding(self, owner: Principal, choice: EmbeddingChoice) -> TextEmbedding:
        """The owner's registered remote model the ``embedding_model_id`` names, else the built-in model
        (which needs nothing registered)."""
        if self.registered is not None and choice.model_id is not None:
            remote = await self.registered.embedding_model(owner, choice.model_id)
            if remote is not None:
                return remote
        return self.embedder

    async def dimension(self, owner: Principal, model_id: str | None) -> int | None:
        """The dimension a container's ``embedding_dimension`` must have: the built-in model's, or None (any)
        when ``model_id`` names the owner's registered remote model."""
        choice = EmbeddingChoice(model_id or None, None)
        return None if await self.embedding(owner, choice) is not self.embedder else self.embedder.dimension

    async def passages(self, owner: Principal, choice: EmbeddingChoice, texts: list[str]) -> np.ndarray:
        embedding = await self.embedding(owner, choice)
        # Background work for every organisation: one fairness key, one share of the built-in embedder.
        return checked(await embedding.passages(texts, tenant="agentic-background"), choice)

    async def query_vector(self, embedding: TextEmbedding, choice: EmbeddingChoice, text: str) -> np.ndarray:
        vector = np.asarray(await embedding.query(text)).reshape(1, -1)
        return checked(vector, choice).reshape(-1)

    async def close(self) -> None:
        if self.llm is not None:
            await self.llm.close()


def checked(vectors: np.ndarray, choice: EmbeddingChoice) -> np.ndarray:
    """A model's vectors, if they have the container's ``embedding_dimension`` and a direction (a cosine
    needs one): a remote model may answer anything, and a container outlives a change of built-in model."""
    vectors = np.asarray(vectors, dtype=np.float32)
    dimension, model_id = choice.dimension, choice.model_id
    if vectors.ndim != 2 or vectors.shape[1] != dimension:
        raise UpstreamFailed(
            f"The embedding model {model_id} answered {vectors.shape[-1]}-dimensional vectors; "
            f"the memory container's embedding_dimension is {dimension}"
        )
    if not np.isfinite(vectors).all() or not np.linalg.norm(vectors.astype(np.float64), axis=1).all():
        raise UpstreamFailed(f"The embedding model {model_id} answered a zero or non-finite vector")
    return vectors
