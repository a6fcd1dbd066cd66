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

from memory_plugin.auth import Principal

DEFAULT_RESULT_PATH = "$.choices[0].message.content"
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
