"""ml-commons' tasks: a register or deploy writes one, already ``COMPLETED``; get, search and delete read them."""

from __future__ import annotations

from memory_plugin.auth import Principal
from memory_plugin.clock import new_id
from memory_plugin.dsl import SearchBody
from memory_plugin.errors import StatusNotFound
from memory_plugin.ml.config import now_millis
from memory_plugin.ml.documents import search_kind
from memory_plugin.ml.results import Found, TaskDoc, WriteResult
from memory_plugin.ml.stores.base import MLStore
from memory_plugin.ml.views import TASK_INDEX, api_version, task_view


class Tasks:
    def __init__(self, store: MLStore, node_id: str) -> None:
        self.store = store
        self.node_id = node_id

    async def record(
        self, owner: Principal, model_id: str, task_type: str, function_name: str, *, is_async: bool = False
    ) -> str:
        """A completed task of ``task_type`` on ``model_id``: its id."""
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

    async def get(self, owner: Principal, task_id: str) -> TaskDoc:
        stored = await self.store.get("task", owner, task_id)
        if stored is None:
            raise StatusNotFound("Failed to find task")
        return TaskDoc.of(stored.source)

    async def search(self, owner: Principal, query: SearchBody) -> Found:
        return await search_kind(self.store, owner, "task", query, TASK_INDEX, task_view)

    async def delete(self, owner: Principal, task_id: str) -> WriteResult:
        stored = await self.store.get("task", owner, task_id)
        if stored is None or not await self.store.delete("task", owner, task_id):
            raise StatusNotFound("Failed to find task")
        return WriteResult(TASK_INDEX, task_id, api_version(stored), "deleted", refresh=True)
