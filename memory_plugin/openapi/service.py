"""The service's own endpoints: node info, health, metrics, the console and this description."""

from __future__ import annotations

from memory_plugin.console import ASSETS as CONSOLE_ASSETS
from memory_plugin.openapi.shapes import ANY_OBJECT, STRING, STRING_OR_NULL, Api, Schema, array, json_object

SERVICE = Api("service", ("401",))


def service_operations() -> Schema:
    return {
        "/": {"get": SERVICE.op("Node info, as an OpenSearch node answers", ANY_OBJECT)},
        "/_health": {
            "get": SERVICE.op(
                "Health check (no credential needed)", json_object({"status": STRING}), errors=(), security=[]
            )
        },
        "/_metrics": {
            "get": SERVICE.op(
                "Prometheus metrics (the operator's metrics_token as a Bearer token; tenant keys get 403)",
                STRING,
                errors=("401", "403"),
                description="Prometheus text format",
                media=("text/plain",),
            )
        },
        "/_console": {
            "get": SERVICE.op(
                "The web console (a page; it calls this API with your key)",
                STRING,
                errors=(),
                description="HTML",
                media=("text/html",),
                security=[],
            )
        },
        "/_console/whoami": {
            "get": SERVICE.op(
                "The key's principal, for the console to mark containers as its own or shared",
                json_object({"organization_id": STRING, "user_id": STRING_OR_NULL, "backend_roles": array(STRING)}),
            )
        },
        "/_console/{asset}": {
            "get": SERVICE.op(
                "The console's script and stylesheet",
                STRING,
                errors=("404",),
                description="JavaScript or CSS",
                media=("text/javascript", "text/css"),
                security=[],
                parameters=[
                    {"name": "asset", "in": "path", "required": True, "schema": {"enum": sorted(CONSOLE_ASSETS)}}
                ],
            )
        },
        "/_openapi.json": {"get": SERVICE.op("This description", ANY_OBJECT)},
    }
