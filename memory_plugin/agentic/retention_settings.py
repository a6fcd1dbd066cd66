"""The server's retention settings: ml-commons' cluster-level defaults (``plugins.ml_commons.memory.*``).

Each default is off at -1 (ml-commons' unset sentinel) and contributes a rule only when positive; the
defaults become a container's policy at create (persisted, as ml-commons does) and are the effective
policy of an older container that has none, unless it opted out with ``"retention_policy": null``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memory_plugin.agentic.models import HISTORY, LONG_TERM, SESSIONS
from memory_plugin.settings import RetentionSection

#: Where a container's effective policy comes from, as the dry-run reports it.
STORED, DEFAULT, NONE = "stored", "default", "none"


@dataclass(frozen=True)
class RetentionDefaults:
    session_retention_days: int = -1
    session_max_count: int = -1
    long_term_max_count: int = -1
    history_max_count: int = -1
    #: Working memory of session-less containers (``disable_session``) older than this is deleted; -1: kept.
    working_memory_ttl_days: int = -1

    @classmethod
    def of(cls, section: RetentionSection) -> RetentionDefaults:
        """The defaults ``[agentic.retention]`` configures, field by field."""
        return cls(
            session_retention_days=section.default_session_retention_days,
            session_max_count=section.default_session_max_count,
            long_term_max_count=section.default_long_term_max_count,
            history_max_count=section.default_history_max_count,
            working_memory_ttl_days=section.working_memory_ttl_days,
        )

    def policy(self) -> dict[str, dict[str, int]] | None:
        """``computeDefaultRetentionPolicy``: None when no default is configured."""
        policy: dict[str, dict[str, int]] = {}
        sessions = {
            name: value
            for name, value in (("retention_days", self.session_retention_days), ("max_count", self.session_max_count))
            if value > 0
        }
        if sessions:
            policy[SESSIONS] = sessions
        if self.long_term_max_count > 0:
            policy[LONG_TERM] = {"max_count": self.long_term_max_count}
        if self.history_max_count > 0:
            policy[HISTORY] = {"max_count": self.history_max_count}
        return policy or None

    def apply_on_create(self, config: dict[str, Any]) -> None:
        """A new container without a policy (and no explicit null) gets the defaults, stored with it."""
        if "retention_policy" not in config:
            policy = self.policy()
            if policy is not None:
                config["retention_policy"] = policy

    def effective(self, config: Mapping[str, Any]) -> tuple[str, dict[str, dict[str, int]] | None]:
        """``resolveEffectivePolicyForDryRun``: the stored policy, else (unless opted out) the defaults."""
        stored = config.get("retention_policy")
        if stored:
            return STORED, stored
        if "retention_policy" in config and stored is None:
            return NONE, None
        defaults = self.policy()
        return (DEFAULT, defaults) if defaults is not None else (NONE, None)
