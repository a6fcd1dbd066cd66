"""memory_plugin: OpenSearch ML Commons conversational memory and semantic search over conversation histories.

The names below are the public API; every other module is private by
convention and may change without notice.
"""

from memory_plugin._version import __version__
from memory_plugin.agentic.stores.sources import Forgotten
from memory_plugin.api import FilterSpec, MemoryPlugin
from memory_plugin.api.agentic import (
    AgenticMemory,
    ChatMessage,
    ContainerSettings,
    MemoryChanges,
    MemoryStrategy,
    Messages,
)
from memory_plugin.api.memories import ConversationalMemory
from memory_plugin.api.models import ConnectorAction, ConnectorView, Models, ModelView
from memory_plugin.api.results import (
    Added,
    AgenticDocument,
    Deleted,
    DeletedByQuery,
    MemoryContainer,
    MemoryType,
    Registered,
    ScoredMemory,
    SearchHit,
    SearchHits,
    SessionCreated,
    Written,
)
from memory_plugin.app import create_app
from memory_plugin.auth import Principal
from memory_plugin.erasure.service import Erasure
from memory_plugin.errors import (
    InsufficientStorage,
    InvalidArgument,
    NotFound,
    ParseFailure,
    PayloadTooLarge,
    ServiceError,
    Unauthorized,
    Unavailable,
    ValidationFailed,
)
from memory_plugin.histories.service import IngestedRecord, SearchResult
from memory_plugin.histories.stores.records import DeleteCounts, Hit, Record
from memory_plugin.memory.models import Conversation, Interaction, InteractionFields, Page, Updated
from memory_plugin.ml.results import Inference, Tensor
from memory_plugin.settings import EmbeddedRegion, OpenSearchRegion, Settings, load_settings

__all__ = [
    "Added",
    "AgenticDocument",
    "AgenticMemory",
    "ChatMessage",
    "ConnectorAction",
    "ConnectorView",
    "ContainerSettings",
    "Conversation",
    "ConversationalMemory",
    "DeleteCounts",
    "Deleted",
    "DeletedByQuery",
    "EmbeddedRegion",
    "Erasure",
    "FilterSpec",
    "Forgotten",
    "Hit",
    "Inference",
    "IngestedRecord",
    "InsufficientStorage",
    "Interaction",
    "InteractionFields",
    "InvalidArgument",
    "MemoryChanges",
    "MemoryContainer",
    "MemoryPlugin",
    "MemoryStrategy",
    "MemoryType",
    "Messages",
    "ModelView",
    "Models",
    "NotFound",
    "OpenSearchRegion",
    "Page",
    "ParseFailure",
    "PayloadTooLarge",
    "Principal",
    "Record",
    "Registered",
    "ScoredMemory",
    "SearchHit",
    "SearchHits",
    "SearchResult",
    "ServiceError",
    "SessionCreated",
    "Settings",
    "Tensor",
    "Unauthorized",
    "Unavailable",
    "Updated",
    "ValidationFailed",
    "Written",
    "create_app",
    "load_settings",
    "__version__",
]
