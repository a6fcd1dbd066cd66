"""The shapes operations share: JSON Schema builders, parameters, and each API's operation factory."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memory_plugin.opensearch_client import MAX_RESULT_WINDOW

Schema = dict[str, Any]

JSON = "application/json"
STRING: Schema = {"type": "string"}
INTEGER: Schema = {"type": "integer"}
NUMBER: Schema = {"type": "number"}
BOOLEAN: Schema = {"type": "boolean"}
ANY_OBJECT: Schema = {"type": "object"}
STRING_MAP: Schema = {"type": "object", "additionalProperties": STRING}
DATE_TIME: Schema = {"type": "string", "format": "date-time"}
STRING_OR_NULL: Schema = {"type": ["string", "null"]}
WEIGHT: Schema = {"type": "number", "minimum": 0, "maximum": 1}

ERROR_WORDS = {
    "400": "Bad input",
    "401": "No valid credential",
    "403": "The credential does not grant this",
    "404": "Not found",
    "405": "Wrong method",
    "408": "The body did not arrive in time",
    "409": "Conflict",
    "413": "Body too large",
    "503": "Unavailable",
    "507": "Storage full",
}


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def json_object(properties: Schema | None = None, *, required: tuple[str, ...] = (), **keywords: Any) -> Schema:
    """A JSON object; ``keywords`` are further JSON Schema keywords (``additionalProperties``, ...)."""
    schema: Schema = {"type": "object"}
    if required:
        schema["required"] = list(required)
    if properties is not None:
        schema["properties"] = properties
    return {**schema, **keywords}


def array(items: Schema, **keywords: Any) -> Schema:
    return {"type": "array", "items": items, **keywords}


def each(schema: Schema, *names: str) -> Schema:
    """The same schema for several properties."""
    return dict.fromkeys(names, schema)


def listing(key: str, item: str) -> Schema:
    """A page of a 2.11-style list: the items under ``key``, and where the next page starts."""
    return json_object({key: array(ref(item)), "next_token": INTEGER})


def path_param(name: str) -> Schema:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string", "minLength": 1}}


def query_param(name: str, schema: Schema, required: bool = False, description: str = "") -> Schema:
    param = {"name": name, "in": "query", "required": required, "schema": schema}
    if description:
        param["description"] = description
    return param


@dataclass(frozen=True)
class Api:
    """One API's tag, its error format, and the errors its operations usually answer."""

    tag: str
    errors: tuple[str, ...]
    error_schema: str = "OpenSearchError"

    def op(
        self,
        summary: str,
        response: Schema,
        body: Schema | None = None,
        *,
        body_required: bool = True,
        errors: tuple[str, ...] | None = None,
        status: str = "200",
        description: str = "Success",
        media: tuple[str, ...] = (JSON,),
        **extra: Any,
    ) -> Schema:
        """An operation answering ``response`` (in each of ``media``) or one of ``errors``."""
        operation: Schema = {"tags": [self.tag], "summary": summary, **extra}
        if body is not None:
            operation["requestBody"] = {"required": body_required, "content": {JSON: {"schema": body}}}
        error = {"content": {JSON: {"schema": ref(self.error_schema)}}}
        operation["responses"] = {
            status: {"description": description, "content": {kind: {"schema": response} for kind in media}},
            **{
                code: {"description": ERROR_WORDS[code], **error}
                for code in (self.errors if errors is None else errors)
            },
        }
        return operation


#: What answers on a collection (no id in the path: nothing to be not found).
UNSCOPED = ("400", "401")
PAGING = [
    query_param("max_results", {"type": "integer", "minimum": 1, "maximum": MAX_RESULT_WINDOW, "default": 10}),
    query_param("next_token", {"type": "integer", "minimum": 0, "default": 0}),
]
