"""Agentic memory: the ML Commons 3.3+ memory containers API (``/_plugins/_ml/memory_containers``).

``models`` validates requests and shapes documents, ``service`` owns the rules
(scoping, sessions, infer, search) and knows no HTTP, ``store`` is where the
documents live (SQLite + faiss + FTS5), ``llm`` speaks to an OpenAI-compatible
chat-completions endpoint, and ``routes`` maps HTTP onto the service.
"""
