"""What a backend is: every capability of an agentic store, with its lifecycle and its retention side.

The capabilities each have their module (``containers``, ``memories``,
``queues``, ``ranking``, ``forgetting``, ``retention``) and each part of the
service takes only those it uses.  Only the composition root holds a whole
backend: ``open_agentic_store`` chooses and opens it, and ``AgenticService``
hands its capabilities to the parts.
"""

from __future__ import annotations

import abc

from memory_plugin.agentic.stores.containers import ContainerStore
from memory_plugin.agentic.stores.forgetting import ForgettingStore
from memory_plugin.agentic.stores.memories import MemoryDocStore
from memory_plugin.agentic.stores.queues import EmbeddingQueue, InferQueue
from memory_plugin.agentic.stores.ranking import LongTermRanking
from memory_plugin.agentic.stores.retention import RetentionStore


class AgenticStore(ContainerStore, MemoryDocStore, EmbeddingQueue, InferQueue, LongTermRanking, ForgettingStore):
    @abc.abstractmethod
    async def open(self, dimension: int) -> None:
        """``dimension``: the built-in model's; a container with a remote embedding model has its own."""

    @abc.abstractmethod
    async def close(self) -> None: ...

    @abc.abstractmethod
    def retention(self) -> RetentionStore:
        """Retention's reads and conditional deletes over this backend's own tables or indices."""
