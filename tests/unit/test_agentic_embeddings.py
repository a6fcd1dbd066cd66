"""The background embedder: each container's long-term memories by its own model (the built-in one, or a
registered remote one of another dimension), and a failing model holds up no other container."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from memory_plugin.agentic.models import LONG_TERM
from memory_plugin.agentic.service import AgenticService
from memory_plugin.agentic.stores.base import LongTermScope
from memory_plugin.agentic.stores.sqlite import SqliteAgenticStore
from memory_plugin.auth import Principal
from memory_plugin.errors import StatusError

ALICE = Principal("org-1", "alice")


class Model:
    """An embedding model of ``dimension``: a vector from the text's length, or a failure (a remote model down)."""

    def __init__(self, dimension: int, *, down: bool = False) -> None:
        self.dimension, self.down, self.calls = dimension, down, 0

    async def passages(self, texts: Sequence[str], *, tenant: Any = None) -> np.ndarray:
        self.calls += 1
        if self.down:
            raise StatusError("Error from remote service: down", 502)
        return np.asarray([[1.0 + len(text)] + [1.0] * (self.dimension - 1) for text in texts], dtype=np.float32)

    async def query(self, text: str) -> np.ndarray:
        return (await self.passages([text]))[0]


class Registered:
    def __init__(self, models: dict[str, Model]) -> None:
        self.models = models

    async def chat_model(self, owner: Principal, model_id: str) -> None:
        return None

    async def embedding_model(self, owner: Principal, model_id: str) -> Model | None:
        return self.models.get(model_id)


async def test_each_container_is_embedded_by_its_model_and_a_failing_one_waits_alone(tmp_path):
    store = SqliteAgenticStore(tmp_path / "a.sqlite3")
    await store.open(8)
    built_in, remote, down = Model(8), Model(3), Model(3, down=True)
    service = AgenticService(store, built_in, models=Registered({"remote": remote, "down": down}))  # type: ignore[arg-type]
    containers = {"c-built-in": ("built-in", 8), "c-remote": ("remote", 3), "c-down": ("down", 3)}
    for cid, (model_id, dimension) in containers.items():
        config = {"embedding_model_type": "TEXT_EMBEDDING", "embedding_model_id": model_id}
        await store.insert_container(ALICE, cid, {"configuration": {**config, "embedding_dimension": dimension}})

    def insert(c):  # type: ignore[no-untyped-def]
        # the failing container's memories first: the oldest pending, they must not hold up the rest
        for cid in ("c-down", "c-remote", "c-built-in"):
            for n in range(3):
                store._insert(c, ALICE, cid, LONG_TERM, f"{cid}-{n}", {"memory": "x" * (n + 1)})

    await store.db.write(insert)
    await service.drain_embeddings()
    assert await store.pending_count() == 3  # c-down's, kept for a retry
    assert down.calls == 1 and service.metrics.embed_failures._value.get() == 1
    for cid, dimension in (("c-remote", 3), ("c-built-in", 8)):
        query = np.asarray([4.0] + [1.0] * (dimension - 1), dtype=np.float32)  # nearest to "xxx"
        hits = await store.knn(LongTermScope(ALICE, cid), query / np.linalg.norm(query), 3)
        assert [doc.id for doc, _ in hits] == [f"{cid}-2", f"{cid}-1", f"{cid}-0"]
    down.down = False
    await service.drain_embeddings()
    assert await store.pending_count() == 0
    await store.close()


class SkipsNothing(SqliteAgenticStore):
    """A store that cannot skip the containers asked (as beyond the number one query can name)."""

    async def pending_embeddings(self, limit: int, skip: Any = ()) -> Any:
        return await super().pending_embeddings(limit)


async def test_a_drain_ends_when_only_failing_containers_are_left_even_if_the_store_cannot_skip_them(tmp_path):
    store = SkipsNothing(tmp_path / "a.sqlite3")
    await store.open(8)
    down = Model(3, down=True)
    service = AgenticService(store, Model(8), models=Registered({"down": down}))  # type: ignore[arg-type]
    config = {"embedding_model_type": "TEXT_EMBEDDING", "embedding_model_id": "down", "embedding_dimension": 3}
    await store.insert_container(ALICE, "c-down", {"configuration": config})
    await store.db.write(lambda c: store._insert(c, ALICE, "c-down", LONG_TERM, "m", {"memory": "x"}))
    await service.drain_embeddings()
    assert down.calls == 1 and await store.pending_count() == 1  # tried once, kept for the retry
    await store.close()


def test_a_huge_but_finite_vector_still_has_a_direction():
    """A remote model may answer float32's largest values; their norm overflows float32, not float64."""
    from memory_plugin.agentic.stores.base import normalised

    unit = normalised(np.asarray([1.8e38, 2.4e38], dtype=np.float32))
    assert unit.dtype == np.float32 and np.allclose(unit, [0.6, 0.8], atol=1e-6)
