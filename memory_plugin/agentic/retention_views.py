"""The retention endpoints' answers in ml-commons' shapes, rendered from the service's typed results."""

from __future__ import annotations

from typing import Any

from memory_plugin.agentic.models import WORKING
from memory_plugin.agentic.retention import REPORT_KEYS, Plan, TypePlan
from memory_plugin.agentic.retention_service import MAX_CONTAINERS_PER_DRY_RUN, DryRuns, RetentionTriggered

_MESSAGES = {
    "triggered": "Memory retention job triggered. Deletions run asynchronously per configured retention policy.",
    "already_running": "Memory retention job is already in progress; this invocation was skipped to avoid "
    "double-running.",
    "retention_disabled": "Memory retention is disabled (plugins.ml_commons.memory.retention_enabled=false); "
    "nothing was triggered.",
}


def triggered_view(triggered: RetentionTriggered) -> dict[str, Any]:
    """``MLExecuteMemoryRetentionResponse``."""
    status = triggered.status
    done = status == "triggered"
    return {"acknowledged": done, "triggered": done, "status": status, "message": _MESSAGES[status]}


def dry_runs_view(runs: DryRuns) -> dict[str, Any]:
    response: dict[str, Any] = {"skipped_count": runs.skipped_count, "truncated": runs.truncated}
    if runs.truncated:
        response["warning"] = (
            f"Cluster-wide retention dry-run evaluated the first {MAX_CONTAINERS_PER_DRY_RUN} memory containers; "
            "additional containers were not evaluated. Narrow the scope or run per-container dry-runs."
        )
    response["results"] = [plan_view(plan) for plan in runs.plans]
    return response


def plan_view(plan: Plan) -> dict[str, Any]:
    """``MemoryRetentionDryRunResult.toXContent``."""
    effective: dict[str, Any] = {}
    for memory_type, key in REPORT_KEYS.items():
        if plan.policy and memory_type in plan.policy:
            effective[key] = dict(plan.policy[memory_type])
    if plan.ttl_days > 0:
        effective["working_memory_ttl_days"] = plan.ttl_days
    would_delete = {key: _type_view(plan.types.get(memory_type)) for memory_type, key in REPORT_KEYS.items()}
    would_delete["working_memory"] = _type_view(plan.types.get(WORKING), always=("cascade", "ttl", "orphan"))
    return {
        "container_id": plan.container_id,
        "evaluated_at": plan.evaluated_at,
        "policy_source": plan.policy_source,
        "effective_policy": effective,
        "would_delete": would_delete,
        "total_would_delete": sum(part["total"] for part in would_delete.values()),
        "pinned_would_skip": plan.pinned_would_skip,
        "warnings": plan.warnings,
    }


def _type_view(plan: TypePlan | None, always: tuple[str, ...] = ()) -> dict[str, Any]:
    """A type's deletes by reason, in the plan's order, then each of ``always`` it lacks (at 0)."""
    counts = {reason: len(docs) for reason, docs in (plan.by_reason.items() if plan is not None else ())}
    counts.update({reason: 0 for reason in always if reason not in counts})
    return {"total": sum(counts.values()), "by_reason": counts}
