"""A container's ``retention_policy`` as ml-commons 3.8+ parses it (docs/agentic-retention.md section 2).

``RetentionRule.parse`` and ``MemoryConfiguration.parseRetentionPolicy``: keys are
memory types (any case), each an object of ``retention_days`` and ``max_count``,
positive integers or null (null removes the value on update); unknown fields of a
rule are skipped; ``working`` cannot be configured; ``history`` has no
``retention_days``.  Messages and statuses are ml-commons' own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memory_plugin.agentic.models import HISTORY, LONG_TERM, MEMORY_TYPES, SESSIONS, WORKING
from memory_plugin.errors import ContentParseError, InvalidArgument, OpenSearchBadRequest, StatusForbidden
from memory_plugin.ml.requests import token_of

RETENTION_SETTING = "plugins.ml_commons.memory.retention_enabled"
RETENTION_DISABLED = (
    "Cannot set retention_policy: the memory retention feature is not enabled. To enable it, please update the "
    f"cluster setting {RETENTION_SETTING}"
)
PINNED_DISABLED = (
    "Cannot set pinned: the memory retention feature is not enabled. To enable it, please update the cluster "
    f"setting {RETENTION_SETTING}"
)
PINNED_WORKING = (
    "pinned field is not supported for working memory type. To preserve a conversation, pin the session instead."
)
WORKING_RETENTION = (
    "Working memory retention cannot be configured directly. Working memory is deleted when its parent session "
    'expires. To control message lifetime, configure retention on "sessions" instead.'
)
RULE_FIELDS = ("retention_days", "max_count")
#: The policy's types in ml-commons' EnumMap order (sessions, long-term, history).
POLICY_TYPES = (SESSIONS, LONG_TERM, HISTORY)


def _expect_object(value: Any, parameter: str) -> Mapping[str, Any]:
    """XContentParserUtils.ensureExpectedToken(START_OBJECT, ...)."""
    if not isinstance(value, dict):
        raise OpenSearchBadRequest(
            f"Failed to parse object: expecting token of type [START_OBJECT] but found [{token_of(value)}]",
            exception="parsing_exception",
            parameter=parameter,
        )
    return value


def _int_value(value: Any, name: str) -> int:
    """``parser.intValue()``: a number, or a numeric string (coerced), of an int's range."""
    number: Any = value
    if isinstance(value, str):
        try:
            number = float(value) if any(c in value for c in ".eE") else int(value)
        except ValueError:
            raise ContentParseError(f"[{name}] must be an integer, found [{value}]", parameter=name) from None
    if isinstance(number, bool) or not isinstance(number, int | float):
        raise ContentParseError(f"[{name}] must be an integer, found [{token_of(value)}]", parameter=name)
    if not -(2**31) <= number < 2**31:
        raise ContentParseError(f"Numeric value ({value}) out of range of int", parameter=name)
    return int(number)


def parse_rule(raw: Any) -> dict[str, int | None]:
    """One rule: the fields present (a None value is an explicit null), each positive when set."""
    rule: dict[str, int | None] = {}
    for name, value in _expect_object(raw, "retention_policy").items():
        if name in RULE_FIELDS:
            rule[name] = None if value is None else _int_value(value, name)
    for name in RULE_FIELDS:  # the constructor's checks, retention_days first
        value = rule.get(name)
        if value is not None and value <= 0:
            raise InvalidArgument(f"{name} must be a positive integer or null", parameter="retention_policy")
    return rule


def memory_type_of(key: str) -> str:
    """``MemoryType.fromString`` (any case), with the policy's own two refusals."""
    if key == WORKING:
        raise InvalidArgument(WORKING_RETENTION, parameter="retention_policy")
    lowered = key.lower()
    if lowered not in MEMORY_TYPES:
        raise InvalidArgument(f"unknown memory type: {key}", parameter="retention_policy")
    if lowered == WORKING:
        raise InvalidArgument(WORKING_RETENTION, parameter="retention_policy")
    return lowered


def parse_policy(raw: Any) -> dict[str, dict[str, int | None]]:
    """A ``retention_policy`` object: memory type -> rule, explicit nulls kept (an update removes those)."""
    policy: dict[str, dict[str, int | None]] = {}
    for key, value in _expect_object(raw, "retention_policy").items():
        memory_type = memory_type_of(key)
        rule = parse_rule(value)
        if memory_type == HISTORY and rule.get("retention_days") is not None:
            raise InvalidArgument(
                "retention_days is not supported for history memory type", parameter="retention_policy"
            )
        policy[memory_type] = rule
    return policy


def stored(policy: Mapping[str, Mapping[str, int | None]]) -> dict[str, dict[str, int]]:
    """The policy as a new container stores it: explicit nulls dropped, in ml-commons' type order."""
    return {
        memory_type: {name: value for name, value in policy[memory_type].items() if value is not None}
        for memory_type in POLICY_TYPES
        if memory_type in policy
    }


@dataclass(frozen=True)
class RetentionGate:
    """Whether the feature is on (``memory.retention_enabled``): off, a policy or a pin is a 403."""

    enabled: bool

    def check_policy(self, policy: Mapping[str, Any]) -> None:
        if policy and not self.enabled:
            raise StatusForbidden(RETENTION_DISABLED)


def checked_policy(raw: Any, enabled: bool) -> dict[str, dict[str, int | None]] | None:
    """A request's ``retention_policy``: None when absent or null; parsed, then refused when the feature is off."""
    if raw is None:
        return None
    policy = parse_policy(raw)
    RetentionGate(enabled).check_policy(policy)
    return policy


def merged_policy(
    current: Mapping[str, Mapping[str, int]] | None, update: Mapping[str, Mapping[str, int | None]]
) -> dict[str, dict[str, int]]:
    """An update's policy merged into the stored one as OpenSearch merges a partial doc: per type, per field;
    an explicit null removes the field."""
    merged = {memory_type: dict(rule) for memory_type, rule in (current or {}).items()}
    for memory_type, rule in update.items():
        target = merged.setdefault(memory_type, {})
        for name, value in rule.items():
            if value is None:
                target.pop(name, None)
            else:
                target[name] = value
    return {memory_type: merged[memory_type] for memory_type in POLICY_TYPES if memory_type in merged}
