"""Agentic memory: the ML Commons 3.3+ memory containers API (``/_plugins/_ml/memory_containers``).

``models`` validates requests and shapes documents, ``service`` owns the rules
(scoping, sessions, infer, search) and knows no HTTP, ``store`` is the store
interface with the rules both stores share and the embedded store (SQLite +
FTS5 + in-memory vectors), ``opensearch_store`` is the same in an OpenSearch
cluster, ``llm`` speaks to an OpenAI-compatible chat-completions endpoint, and
``routes`` maps HTTP onto the service.
"""
