"""Settings: one tree of frozen sections (``tree``), loaded from TOML and the environment (``loading``)."""

from memory_plugin.settings.loading import load_settings
from memory_plugin.settings.tree import (
    ENV_PREFIX,
    LUCENE_VERSIONS,
    REGIONS,
    TRUSTED_ENDPOINTS,
    AgenticSection,
    AuthSection,
    BridgeSection,
    EmbeddedRegion,
    EmbedderSection,
    HTTPSection,
    LLMSection,
    MLSection,
    NodeSection,
    OpenSearchRegion,
    RegionSettings,
    RetentionSection,
    Settings,
)

__all__ = [
    "ENV_PREFIX",
    "LUCENE_VERSIONS",
    "REGIONS",
    "TRUSTED_ENDPOINTS",
    "AgenticSection",
    "AuthSection",
    "BridgeSection",
    "EmbeddedRegion",
    "EmbedderSection",
    "HTTPSection",
    "LLMSection",
    "MLSection",
    "NodeSection",
    "OpenSearchRegion",
    "RegionSettings",
    "RetentionSection",
    "Settings",
    "load_settings",
]
