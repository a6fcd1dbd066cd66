"""Forgetting working memories with what was inferred from them (the rule of ``sources``): the capability the
cascading deletes (``agentic.forgetting``) and the infer worker use."""

from __future__ import annotations

import abc
from collections.abc import Sequence

from memory_plugin.agentic.stores.sources import Forgotten
from memory_plugin.auth import Principal


class ForgettingStore(abc.ABC):
    @abc.abstractmethod
    async def forget(self, owner: Principal, container_id: str, working_ids: Sequence[str]) -> Forgotten:
        """Forget these working memories by the rule of ``sources``: their queued infer jobs, the long-term
        memories inferred from them and the history quoting them, then the working docs themselves.
        Idempotent: forgetting ids already forgotten (or never there) finds the rest of the work, or none."""
