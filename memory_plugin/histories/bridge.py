"""The bridge: interactions written through the memory API become searchable records."""

from __future__ import annotations

from memory_plugin.auth import Principal
from memory_plugin.dates import isoformat
from memory_plugin.histories.service import HistoryService
from memory_plugin.memory.models import Interaction
from memory_plugin.stores.filters import Condition, Filter


def interaction_text(interaction: Interaction) -> str:
    return "\n".join(part for part in (interaction.input, interaction.response) if part)


class HistoryBridge:
    """Ingests each interaction as an ``ai_pipeline_storage`` record in the home region."""

    def __init__(self, histories: HistoryService) -> None:
        self.histories = histories

    async def interaction_written(self, interaction: Interaction) -> None:
        text = interaction_text(interaction)
        if not text.strip():
            return
        metadata: dict[str, str] = {"conversation_id": interaction.conversation_id}
        if interaction.origin is not None:
            metadata["origin"] = interaction.origin
        record = {
            "record_id": interaction.interaction_id,
            "record_type": "ai_pipeline_storage",
            "text": text,
            "user_id": interaction.owner.user_id,
            "record_created_at": isoformat(interaction.create_time),
            "metadata": metadata,
        }
        await self.histories.ingest(interaction.owner, [record])

    async def conversation_deleted(self, owner: Principal, conversation_id: str) -> None:
        where = Filter((Condition("metadata.conversation_id", "eq", (conversation_id,)),))
        await self.histories.delete_matching(owner, where)
