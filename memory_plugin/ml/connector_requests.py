"""Connector bodies (``MLCreateConnectorInput``, ``ConnectorAction``, ``ConnectorClientConfig``), read as
ml-commons reads them: the first error a body hits is the one the real node reports."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from memory_plugin.errors import ContentParseError, InvalidArgument, ParsingError
from memory_plugin.ml.requests import java_text, parameter_map, string_map, token_of, value_position

PROTOCOLS = ("http", "aws_sigv4")
ACTION_TYPES = ("PREDICT", "EXECUTE", "BATCH_PREDICT", "CANCEL_BATCH_PREDICT", "BATCH_PREDICT_STATUS")
MAX_ACTIONS = 32


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
