"""Agentic memory: the ML Commons 3.3+ memory containers API (``/_plugins/_ml/memory_containers``).

``routes`` maps HTTP onto ``service``, a façade over the parts, split as
ml-commons splits them: ``containers``, ``memories``, ``search`` (semantic and
hybrid), ``infer`` (the job runner and its strategies) and ``workers`` (the
background loops); none knows HTTP.  ``requests`` validates what comes in,
``views`` shapes what goes out, ``models`` names types, indices and limits.
``stores`` holds the store interface with the rules both stores share
(``base``), the embedded store (SQLite + FTS5 + in-memory vectors) and the same
in an OpenSearch cluster; ``llm`` chooses a container's models and reads LLM
answers, ``connector`` speaks to an OpenAI-compatible chat-completions endpoint.
"""
