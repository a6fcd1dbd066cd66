"""The OpenAPI 3.1 description of every endpoint, served at ``GET /_openapi.json``.

A test checks it against the router both ways, and schemathesis fuzzes the
live server from it, so it cannot drift from what the server does.  Each
operation is one line of a table, one module per API; ``shapes`` spells out
the shapes (objects, lists, error answers) that the operations share, and
``schemas`` the components they refer to.
"""

from __future__ import annotations

from memory_plugin._version import __version__
from memory_plugin.openapi.agentic import agentic_operations
from memory_plugin.openapi.histories import history_operations
from memory_plugin.openapi.memory import memory_operations
from memory_plugin.openapi.ml import ml_operations
from memory_plugin.openapi.schemas import component_schemas
from memory_plugin.openapi.service import service_operations
from memory_plugin.openapi.shapes import Schema

__all__ = ["openapi_document"]


def openapi_document() -> Schema:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "memory_plugin",
            "version": __version__,
            "description": "OpenSearch ML Commons conversational memory (2.11 and 2.12+), agentic memory (3.3+) "
            "and semantic search over conversation histories.",
        },
        "paths": {
            **service_operations(),
            **memory_operations(),
            **history_operations(),
            **agentic_operations(),
            **ml_operations(),
        },
        "components": {
            "schemas": component_schemas(),
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "basic": {"type": "http", "scheme": "basic"},
            },
        },
        "security": [{"bearer": []}, {"basic": []}],
    }
