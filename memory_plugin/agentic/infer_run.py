"""One infer job's run, read once: the container it runs in, the add it infers from, and the models it calls."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memory_plugin.agentic.llm import ChatModel, ContainerModels, TextEmbedding
from memory_plugin.agentic.models import Container, Strategy
from memory_plugin.agentic.requests import JsonObject
from memory_plugin.agentic.stores.base import InferJob, StoredDoc
from memory_plugin.agentic.stores.sources import source_entry
from memory_plugin.auth import Principal


def job_source(job: InferJob) -> JsonObject | None:
    """The working memory (and session) a job's run infers from: the source its changes record."""
    working_id = job.request.get("working_memory_id")
    if not working_id:
        return None
    return source_entry(str(working_id), job.request.get("namespace", {}).get("session_id"))


@dataclass
class InferRun:
    """A job with its container and the add it queued, read from the job once; its models are resolved on
    first use and kept for the rest of the run (every strategy of the run calls the same ones)."""

    job: InferJob
    container: Container
    models: ContainerModels
    #: A role holder's job runs on the container owner's models.
    models_owner: Principal
    #: The add's messages, which every strategy extracts facts from (None: a job without them, an error).
    messages: list[JsonObject] | None
    namespace: dict[str, str]
    tags: JsonObject
    parameters: JsonObject
    #: The working memory (and session) the run infers from: the source its changes record.
    source: JsonObject | None
    _chats: dict[str | None, ChatModel | None] = field(default_factory=dict)
    _embedding: TextEmbedding | None = None

    @classmethod
    def of(cls, job: InferJob, stored: StoredDoc, models: ContainerModels) -> InferRun:
        """The run of ``job`` in its container as ``stored`` now."""
        request: dict[str, Any] = job.request
        return cls(
            job,
            Container(job.container_id, stored.source, stored.owner),
            models,
            stored.owner or job.owner,
            request.get("messages"),
            request.get("namespace", {}),
            request.get("tags") or {},
            request.get("parameters") or {},
            job_source(job),
        )

    async def chat(self, strategy: Strategy) -> ChatModel | None:
        """The LLM a strategy runs on: its own ``llm_id``, else the container's (AGENTIC.md 6)."""
        llm_id = strategy.llm_id or self.container.config.get("llm_id")
        if llm_id not in self._chats:
            self._chats[llm_id] = await self.models.chat(self.models_owner, llm_id)
        return self._chats[llm_id]

    async def embedding(self) -> TextEmbedding:
        """The container's embedding model, which finds the memories similar to each fact."""
        if self._embedding is None:
            self._embedding = await self.models.embedding(self.models_owner, self.container.embedding)
        return self._embedding
