"""memory_plugin: OpenSearch ML Commons conversational memory and semantic search over conversation histories.

The names below are the public API; every other module is private by
convention and may change without notice.
"""

from memory_plugin._version import __version__
from memory_plugin.api import FilterSpec, MemoryPlugin
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
from memory_plugin.memory.models import Conversation, Interaction, InteractionFields, Page
from memory_plugin.settings import EmbeddedRegion, OpenSearchRegion, Settings, load_settings

__all__ = [
    "Conversation",
    "DeleteCounts",
    "EmbeddedRegion",
    "Erasure",
    "FilterSpec",
    "Hit",
    "IngestedRecord",
    "InsufficientStorage",
    "Interaction",
    "InteractionFields",
    "InvalidArgument",
    "MemoryPlugin",
    "NotFound",
    "OpenSearchRegion",
    "Page",
    "ParseFailure",
    "PayloadTooLarge",
    "Principal",
    "Record",
    "SearchResult",
    "ServiceError",
    "Settings",
    "Unauthorized",
    "Unavailable",
    "ValidationFailed",
    "__version__",
    "create_app",
    "load_settings",
]
