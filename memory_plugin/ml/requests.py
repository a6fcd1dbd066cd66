"""Request bodies of the model and connector APIs, read as ml-commons' parsers read them.

ml-commons reads most fields with ``parser.text()``: a number or boolean is
taken as its text (``"version": 1`` is ``"1"``), unknown fields are skipped,
and an object, array or null where text is expected is a 500 on the real node;
here it is a 400 naming the field.  The checks run in ml-commons' order, so the
first error a body hits is the one the real node reports.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import re2

from memory_plugin.errors import ContentParseError, InvalidArgument, OpenSearchBadRequest, ParseFailure, ParsingError
from memory_plugin.http.json import check_sound
from memory_plugin.jackson import JsonSyntaxError, Lexer, Token, syntax_error, unique_fields

PROTOCOLS = ("http", "aws_sigv4")
ACTION_TYPES = ("PREDICT", "EXECUTE", "BATCH_PREDICT", "CANCEL_BATCH_PREDICT", "BATCH_PREDICT_STATUS")
#: Bounds for what one connector keeps: generous for real connectors, small enough that none weighs on a store.
MAX_ACTIONS = 32
MAX_MAP_ENTRIES = 256
MAX_TEXT_CHARS = 64 * 1024


def token_of(value: Any) -> str:
    if value is None:
        return "VALUE_NULL"
    if isinstance(value, bool):
        return "VALUE_BOOLEAN"
    if isinstance(value, int | float):
        return "VALUE_NUMBER"
    if isinstance(value, str):
        return "VALUE_STRING"
    return "START_OBJECT" if isinstance(value, dict) else "START_ARRAY"


def java_text(value: Any, name: str) -> str:
    """``parser.text()``: a scalar's text; anything else names the field."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, int | float):
        text = json.dumps(value)
    else:
        raise ContentParseError(f"[{name}] must be a string, found [{token_of(value)}]", parameter=name)
    if len(text) > MAX_TEXT_CHARS:
        raise InvalidArgument(f"[{name}] is longer than {MAX_TEXT_CHARS} characters", parameter=name)
    return text


def string_map(value: Any, name: str) -> dict[str, str]:
    """``parser.mapStrings()``: an object of scalars, each as its text."""
    if not isinstance(value, dict):
        raise ContentParseError(f"[{name}] must be an object, found [{token_of(value)}]", parameter=name)
    if len(value) > MAX_MAP_ENTRIES:
        raise InvalidArgument(f"[{name}] has more than {MAX_MAP_ENTRIES} entries", parameter=name)
    return {key: java_text(item, f"{name}.{key}") for key, item in value.items()}


def parameter_map(value: Any, name: str = "parameters") -> dict[str, str]:
    """``StringUtils.getParameterMap``: text stays text, anything else becomes compact JSON."""
    if not isinstance(value, dict):
        raise ContentParseError(f"[{name}] must be an object, found [{token_of(value)}]", parameter=name)
    if len(value) > MAX_MAP_ENTRIES:
        raise InvalidArgument(f"[{name}] has more than {MAX_MAP_ENTRIES} entries", parameter=name)
    out: dict[str, str] = {}
    for key, item in value.items():
        if item is None:
            continue
        out[key] = item if isinstance(item, str) else json.dumps(item, separators=(",", ":"), ensure_ascii=False)
    return out


@dataclass(frozen=True)
class Action:
    action_type: str
    method: str
    url: str
    headers: dict[str, str] | None = None
    request_body: str | None = None
    pre_process_function: str | None = None
    post_process_function: str | None = None

    def view(self) -> dict[str, Any]:
        out: dict[str, Any] = {"action_type": self.action_type, "method": self.method, "url": self.url}
        for key in ("headers", "request_body", "pre_process_function", "post_process_function"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


def parse_action(raw: Any, where: str) -> Action:
    if not isinstance(raw, dict):
        raise ParsingError(
            f"Failed to parse object: expecting token of type [START_OBJECT] but found [{token_of(raw)}]"
        )
    fields: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "action_type":
            kind = java_text(value, f"{where}.action_type").upper()
            if kind not in ACTION_TYPES:
                raise InvalidArgument(
                    f"No enum constant org.opensearch.ml.common.connector.ConnectorAction.ActionType.{kind}",
                    parameter=f"{where}.action_type",
                )
            fields[key] = kind
        elif key == "headers":
            fields[key] = string_map(value, f"{where}.headers")
        elif key in ("method", "url", "request_body", "pre_process_function", "post_process_function"):
            fields[key] = java_text(value, f"{where}.{key}")
    for required, label in (("action_type", "action type"), ("url", "url"), ("method", "method")):
        if required not in fields:
            raise InvalidArgument(f"{label} can't be null", parameter=f"{where}.{required}")
    return Action(**fields)


RETRY_BACKOFF_POLICIES = ("constant", "exponential_equal_jitter", "exponential_full_jitter")


@dataclass(frozen=True)
class ClientConfig:
    """``ConnectorClientConfig``: how calls through a connector are made.  Timeouts are in seconds, as
    ml-commons reads them (its 2.19 defaults, 30000 s, are in effect none; 0 is none too): the call's
    deadline, ``ml.connector_timeout``, bounds every call and its retries anyway."""

    max_connection: int = 30
    connection_timeout: int = 30000
    read_timeout: int = 30000
    retry_backoff_millis: int = 200
    retry_timeout_seconds: int = 30
    #: 0: no retry; -1: retry until ``retry_timeout_seconds`` (or the call's deadline) has passed.
    max_retry_times: int = 0
    retry_backoff_policy: str = "constant"

    def view(self) -> dict[str, Any]:
        """As ``toXContent`` writes it: every field, the defaults filled in."""
        return {key: getattr(self, key) for key in _CLIENT_INTS} | {"retry_backoff_policy": self.retry_backoff_policy}


#: ``ConnectorClientConfig``'s integer fields, in its order, each with the least value that means something.
_CLIENT_INTS = {
    "max_connection": 1,
    "connection_timeout": 0,
    "read_timeout": 0,
    "retry_backoff_millis": 0,
    "retry_timeout_seconds": 0,
    "max_retry_times": -1,
}
#: Newer ml-commons' TLS options: refused when set, since no call here could honour them.
_CLIENT_TLS = ("skip_ssl_verification", "mutual_tls_enabled")


def parse_client_config(value: Any) -> ClientConfig:
    """``ConnectorClientConfig.parse``: unknown fields skipped, missing ones at their defaults.  Stricter than
    ml-commons on purpose: a value no call could use (a negative timeout, 0 connections) is a 400 here, where the
    real node takes it and fails each call."""
    if not isinstance(value, dict):
        raise ContentParseError(
            f"[client_config] must be an object, found [{token_of(value)}]", parameter="client_config"
        )
    found: dict[str, Any] = {}
    for key, least in _CLIENT_INTS.items():
        if key in value:
            found[key] = _java_int(value[key], f"client_config.{key}")
            if found[key] < least:
                raise InvalidArgument(
                    f"[client_config.{key}] must be at least {least}, found [{found[key]}]",
                    parameter=f"client_config.{key}",
                )
    if "retry_backoff_policy" in value:
        policy = java_text(value["retry_backoff_policy"], "client_config.retry_backoff_policy").lower()
        if policy not in RETRY_BACKOFF_POLICIES:
            raise InvalidArgument("Unsupported retry backoff policy", parameter="client_config.retry_backoff_policy")
        found["retry_backoff_policy"] = policy
    for key in _CLIENT_TLS:
        if value.get(key) not in (None, False, "false"):
            raise InvalidArgument(
                f"[client_config.{key}] is not supported here: calls always verify the remote's certificate "
                "and present none",
                parameter=f"client_config.{key}",
            )
    return ClientConfig(**found)


def _java_int(value: Any, name: str) -> int:
    """``parser.intValue()``: a number (a fraction cut off) or a string holding one, within an int's range."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ContentParseError(f"[{name}] must be a number, found [{token_of(value)}]", parameter=name)
    try:
        number = float(value.strip()) if isinstance(value, str) else value
        if not math.isfinite(number) or not -(2**31) <= number < 2**31:
            raise ValueError
    except ValueError:
        raise InvalidArgument(f"[{name}] must be an integer, found [{value}]", parameter=name) from None
    return int(number)


@dataclass
class ConnectorInput:
    """``MLCreateConnectorInput``: what create and update send."""

    name: str | None = None
    description: str | None = None
    version: str | None = None
    protocol: str | None = None
    parameters: dict[str, str] = field(default_factory=dict)
    credential: dict[str, str] = field(default_factory=dict)
    actions: list[Action] | None = None
    client_config: ClientConfig | None = None


def parse_connector_input(body: Any, *, update: bool = False) -> ConnectorInput:
    if not isinstance(body, dict):
        raise ParsingError(
            f"Failed to parse object: expecting token of type [START_OBJECT] but found [{token_of(body)}]"
        )
    found = ConnectorInput()
    for key, value in body.items():
        if key in ("name", "description", "version", "protocol"):
            setattr(found, key, java_text(value, key))
        elif key == "parameters":
            found.parameters = parameter_map(value)
        elif key == "credential":
            found.credential = string_map(value, "credential")
        elif key == "actions":
            if not isinstance(value, list):
                raise ParsingError(
                    f"Failed to parse object: expecting token of type [START_ARRAY] but found [{token_of(value)}]",
                    at=value_position(body, key),
                    parameter=key,
                )
            if len(value) > MAX_ACTIONS:
                raise InvalidArgument(f"[actions] has more than {MAX_ACTIONS} entries", parameter="actions")
            found.actions = [parse_action(item, f"actions[{i}]") for i, item in enumerate(value)]
        elif key == "client_config":
            found.client_config = parse_client_config(value)
    if not update:
        for name, label in (("name", "name"), ("version", "version"), ("protocol", "protocol")):
            if getattr(found, name) is None:
                raise InvalidArgument(f"Connector {label} is null", parameter=name)
        if not found.credential:
            raise InvalidArgument("Connector credential is null or empty list", parameter="credential")
    return found


def check_protocol(found: ConnectorInput) -> None:
    """What building the connector of a protocol checks (``Connector.createConnector``)."""
    if found.protocol not in PROTOCOLS:
        raise InvalidArgument(f"Can't find class for type {found.protocol}", parameter="protocol")
    if found.actions is None:
        raise InvalidArgument("No actions configured for this connector", parameter="actions")
    if found.protocol == "aws_sigv4":
        if "access_key" not in found.credential or "secret_key" not in found.credential:
            raise InvalidArgument("Missing credential", parameter="credential")
        for needed, label in (("service_name", "service name"), ("region", "region")):
            if needed not in found.credential and needed not in found.parameters:
                raise InvalidArgument(f"Missing {label}", parameter=f"parameters.{needed}")


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
    connector: dict[str, Any] | None
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
    if not isinstance(body, dict):
        raise ParsingError(
            f"Failed to parse object: expecting token of type [START_OBJECT] but found [{token_of(body)}]"
        )
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
    return RegisterInput(
        name=text["name"],
        function_name=function_name,
        model_group_id=text.get("model_group_id"),
        version=text.get("version"),
        description=text.get("description"),
        model_format=text.get("model_format"),
        connector_id=text.get("connector_id"),
        connector=connector,
        url=text.get("url"),
        deploy=deploy,
        rate_limiter=parse_rate_limiter(body["rate_limiter"]) if body.get("rate_limiter") is not None else None,
        guardrails=parse_guardrails(body["guardrails"]) if body.get("guardrails") is not None else None,
    )


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
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise ParsingError(
            f"Failed to parse object: expecting token of type [START_OBJECT] but found [{token_of(body)}]"
        )
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


def merged(base: Mapping[str, str], extra: Mapping[str, str] | None) -> dict[str, str]:
    return {**base, **(extra or {})}


#: Bodies up to this size get a line and column in a ``parsing_exception``; larger ones get the words alone.
POSITION_SCAN_BYTES = 64 * 1024


class JsonObject(dict[str, Any]):
    """A parsed request body that remembers its bytes, for errors that name a line and column."""

    raw: bytes = b""


def value_position(body: Any, key: str) -> tuple[int, int] | None:
    """Where the value of the top-level ``key`` starts in the body (line, column), as OpenSearch reports it."""
    raw = getattr(body, "raw", b"")
    if not raw or len(raw) > POSITION_SCAN_BYTES:  # the scan is Python on the event loop: small bodies only
        return None
    lexer = Lexer(raw)
    try:
        if lexer.next_token() is not Token.START_OBJECT:
            return None
        while lexer.next_token() is Token.FIELD_NAME:
            name = lexer.name
            lexer.next_token()
            if name == key:
                return lexer.token_start
            lexer.skip_children()
            if lexer.token is Token.VALUE_STRING:
                lexer.string_value()
    except JsonSyntaxError:
        return None
    return None


def parse_body(raw: bytes) -> Any:
    """A request body as JSON (None when empty); one that does not parse gets Jackson's error, as the real node's.

    Stricter than the node on purpose, as every API here (``check_sound``): a lone surrogate
    (``"\\ud800"``, which Jackson reads), a number out of a double's range or nesting deeper than 64
    levels is a 400 naming its place, never stored to break reads.
    """
    if not raw.strip():
        return None
    try:
        value = json.loads(raw, parse_constant=_no_constant, object_pairs_hook=unique_fields)
    except (ValueError, RecursionError):  # a duplicate key too: the lexer says where, as Jackson does
        error = syntax_error(raw)
        if error is not None:
            raise OpenSearchBadRequest(error.message, exception=error.kind) from None
        raise ParseFailure("request body is not valid JSON") from None
    check_sound(value)
    if isinstance(value, dict):
        value = JsonObject(value)
        value.raw = raw
    return value


def _no_constant(text: str) -> Any:
    raise ValueError(f"{text} is not JSON")
