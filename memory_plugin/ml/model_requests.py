"""Model bodies: register (``MLRegisterModelInput``, its rate limiter and guardrails), predict, update and
bulk undeploy, read as ml-commons reads them: the first error a body hits is the one the real node reports."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import re2

from memory_plugin.errors import ContentParseError, InvalidArgument, ParseFailure, StatusBadRequest
from memory_plugin.ml.connector_requests import ConnectorInput, parse_connector_input
from memory_plugin.ml.requests import MAX_MAP_ENTRIES, expect_object, java_text, parameter_map, token_of


@dataclass(frozen=True)
class RegisterInput:
    """``MLRegisterModelInput`` as far as remote and built-in models need it."""

    name: str
    function_name: str
    model_group_id: str | None
    version: str | None
    description: str | None
    model_format: str | None
    connector_id: str | None
    #: A remote model's own connector (``connector`` in the body), read as a connector update reads it.
    connector: ConnectorInput | None
    url: str | None
    deploy: bool
    #: ``{"limit": "1", "unit": "MINUTES"}``, as ``MLRateLimiter`` keeps it.
    rate_limiter: dict[str, str] | None = None
    #: The model's guardrails, as ``guards.parse_guardrails`` keeps them.
    guardrails: dict[str, Any] | None = None


TIME_UNITS = ("NANOSECONDS", "MICROSECONDS", "MILLISECONDS", "SECONDS", "MINUTES", "HOURS", "DAYS")


def parse_rate_limiter(value: Any, name: str = "rate_limiter") -> dict[str, str]:
    """``MLRateLimiter.parse``.  Stricter than ml-commons on purpose: one without both ``limit`` and ``unit``
    (which the real node keeps and never applies) is a 400, as is a limit that is not a finite number."""
    if not isinstance(value, dict):
        raise ContentParseError(f"[{name}] must be an object, found [{token_of(value)}]", parameter=name)
    found: dict[str, str] = {}
    if "limit" in value:
        limit = java_text(value["limit"], f"{name}.limit")
        try:
            number = float(limit.strip())
        except ValueError:
            number = math.nan
        if not math.isfinite(number) or number < 0:
            raise ParseFailure("Limit field must be a positive number.", parameter=f"{name}.limit")
        found["limit"] = limit
    if "unit" in value:
        unit = java_text(value["unit"], f"{name}.unit")
        if unit not in TIME_UNITS:
            raise InvalidArgument(f"No enum constant java.util.concurrent.TimeUnit.{unit}", parameter=f"{name}.unit")
        found["unit"] = unit
    if len(found) != 2:
        raise InvalidArgument(
            f"[{name}] needs both limit and unit (a rate limiter without either would never apply)", parameter=name
        )
    return found


GUARDRAIL_TYPES = ("local_regex", "model")


def parse_guardrails(value: Any) -> dict[str, Any]:
    """``Guardrails.parse`` (type ``local_regex`` unless named), kept as ``toXContent`` writes it.

    Only what runs here is taken: ``regex`` lists, each matched against the whole request payload (input) or
    the whole answer (output) as Java's ``Pattern.matches``, run by RE2.  ``stop_words`` name an index of
    percolator queries on the node and ``model`` guardrails call a guardrail model: neither can run here, so
    either is a 400 when the model is saved, never a guardrail that silently lets everything through."""
    if not isinstance(value, dict):
        raise ContentParseError(f"[guardrails] must be an object, found [{token_of(value)}]", parameter="guardrails")
    kind = java_text(value["type"], "guardrails.type") if value.get("type") is not None else "local_regex"
    if kind not in GUARDRAIL_TYPES:
        raise InvalidArgument("The type of guardrails is required, can not be null.", parameter="guardrails.type")
    found: dict[str, Any] = {"type": kind}
    for side in ("input_guardrail", "output_guardrail"):
        guardrail = value.get(side)
        if guardrail is None:
            continue
        name = f"guardrails.{side}"
        if not isinstance(guardrail, dict):
            raise ContentParseError(f"[{name}] must be an object, found [{token_of(guardrail)}]", parameter=name)
        if not guardrail:
            continue
        if kind == "model":
            raise InvalidArgument(
                "guardrails of type [model] are not run here (they call a guardrail model on the node); "
                "use type [local_regex] with regex",
                parameter=name,
            )
        if guardrail.get("stop_words"):
            raise InvalidArgument(
                f"[{name}.stop_words] are not run here: they name an index of stop-word queries on the node, "
                "which this server does not hold; use regex",
                parameter=f"{name}.stop_words",
            )
        kept: dict[str, Any] = {}
        patterns = guardrail.get("regex")
        if patterns is not None:
            if not isinstance(patterns, list) or len(patterns) > MAX_MAP_ENTRIES:
                raise ContentParseError(f"[{name}.regex] must be an array of strings", parameter=f"{name}.regex")
            kept["regex"] = [java_text(p, f"{name}.regex[{i}]") for i, p in enumerate(patterns)]
            for i, pattern in enumerate(kept["regex"]):
                try:
                    re2.compile(pattern)
                except re2.error as error:
                    raise InvalidArgument(
                        f"[{name}.regex[{i}]] is not a regular expression run here: {error}",
                        parameter=f"{name}.regex[{i}]",
                    ) from None
        found[side] = kept
    return found


FUNCTION_NAMES = ("REMOTE", "TEXT_EMBEDDING", "SPARSE_ENCODING", "SPARSE_TOKENIZE", "TEXT_SIMILARITY")


def parse_register_input(body: Any, *, deploy: bool) -> RegisterInput:
    body = expect_object(body)
    text = {key: java_text(body[key], key) for key in _REGISTER_TEXT if key in body}
    function_name = text.get("function_name", "TEXT_EMBEDDING").upper()
    if function_name not in FUNCTION_NAMES:
        raise InvalidArgument("Wrong function name", parameter="function_name")
    connector = body.get("connector")
    if connector is not None and not isinstance(connector, dict):
        raise ContentParseError(f"[connector] must be an object, found [{token_of(connector)}]", parameter="connector")
    if "name" not in text:
        raise InvalidArgument("model name is null", parameter="name")
    if function_name != "REMOTE" and "model_format" not in text:
        raise InvalidArgument("model format is null", parameter="model_format")
    rate_limiter = parse_rate_limiter(body["rate_limiter"]) if body.get("rate_limiter") is not None else None
    guardrails = parse_guardrails(body["guardrails"]) if body.get("guardrails") is not None else None
    return RegisterInput(
        name=text["name"],
        function_name=function_name,
        model_group_id=text.get("model_group_id"),
        version=text.get("version"),
        description=text.get("description"),
        model_format=text.get("model_format"),
        connector_id=text.get("connector_id"),
        connector=_inline_connector(connector) if function_name == "REMOTE" and connector is not None else None,
        url=text.get("url"),
        deploy=deploy,
        rate_limiter=rate_limiter,
        guardrails=guardrails,
    )


def _inline_connector(connector: dict[str, Any]) -> ConnectorInput:
    """A remote model's own connector, checked as ``Connector.createConnector`` checks it (the protocol first);
    only a remote model reads it."""
    if connector.get("protocol") is None:
        raise InvalidArgument("connector protocol is null", parameter="connector.protocol")
    found = parse_connector_input(connector, update=True)
    if not found.credential:
        raise InvalidArgument("Connector credential is null or empty list", parameter="connector.credential")
    return found


_REGISTER_TEXT = (
    "name",
    "function_name",
    "model_group_id",
    "version",
    "description",
    "model_format",
    "connector_id",
    "url",
)


@dataclass(frozen=True)
class PredictInput:
    """A predict body: ``parameters`` for a remote model, or ``text_docs`` to embed."""

    parameters: dict[str, str] | None
    text_docs: list[str] | None
    return_number: bool = True
    target_response: tuple[str, ...] = ()


#: The most texts one predict call may embed: one call must not hold the batcher for long.
MAX_TEXT_DOCS = 1024


def parse_predict_input(body: Any) -> PredictInput:
    body = expect_object({} if body is None else body)
    parameters = parameter_map(body["parameters"]) if body.get("parameters") is not None else None
    docs = body.get("text_docs")
    if docs is not None:
        if not isinstance(docs, list):
            raise ContentParseError(f"[text_docs] must be an array, found [{token_of(docs)}]", parameter="text_docs")
        if len(docs) > MAX_TEXT_DOCS:
            raise InvalidArgument(f"[text_docs] has more than {MAX_TEXT_DOCS} texts", parameter="text_docs")
        docs = [java_text(doc, f"text_docs[{i}]") for i, doc in enumerate(docs)]
    nested = body.get("result_filter")
    result_filter: dict[str, Any] = nested if isinstance(nested, dict) else body
    return_number = result_filter.get("return_number", True)
    if not isinstance(return_number, bool):
        raise ContentParseError(
            f"[return_number] must be a boolean, found [{token_of(return_number)}]", parameter="return_number"
        )
    targets = result_filter.get("target_response") or []
    if not isinstance(targets, list):
        targets = [targets]
    return PredictInput(parameters, docs, return_number, tuple(java_text(t, "target_response") for t in targets))


#: Fields ml-commons' update reads that this server does not act on: refused, never kept and ignored.
UNSERVED = ("is_enabled", "rate_limiter", "model_config", "deploy_setting", "guardrails", "interface", "connector")
_UPDATE_TEXT = ("name", "description", "model_group_id", "connector_id")


@dataclass(frozen=True)
class ModelUpdateInput:
    """``MLUpdateModelInput`` as far as it is served: the text fields given, and the fields refused (after the
    model is found, as ml-commons checks them)."""

    name: str | None = None
    description: str | None = None
    model_group_id: str | None = None
    connector_id: str | None = None
    #: The body names an internal ``connector``.
    has_connector: bool = False
    #: The fields of :data:`UNSERVED` the body names, in that order.
    unserved: tuple[str, ...] = ()


def parse_model_update(body: Any) -> ModelUpdateInput:
    """``MLUpdateModelInput.parse``, up to what ``RestMLUpdateModelAction`` checks before the model is read."""
    if body is None:
        raise ParseFailure("Update model request has empty body")
    body = expect_object(body)
    text = {key: java_text(body[key], key) for key in _UPDATE_TEXT if key in body}
    if "connector_id" in text and "connector" in body:
        raise StatusBadRequest(
            "Model cannot have both stand-alone connector and internal connector. Please check your update input body."
        )
    return ModelUpdateInput(
        **text, has_connector="connector" in body, unserved=tuple(key for key in UNSERVED if key in body)
    )


@dataclass(frozen=True)
class UndeployInput:
    """``POST /models/_undeploy``: the models named, or None for every deployed one."""

    model_ids: tuple[str, ...] | None = None


def parse_undeploy_input(body: Any) -> UndeployInput:
    ids = body.get("model_ids") if isinstance(body, dict) else None
    if ids is None:
        return UndeployInput()
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise InvalidArgument("[model_ids] must be an array of model ids", parameter="model_ids")
    return UndeployInput(tuple(ids))
