"""memory_plugin: OpenSearch ML Commons conversational memory and semantic search over conversation histories."""

__version__ = "0.1.0"
