"""Where we answer differently from the real ml-commons 2.19.1 node, on purpose.

The differential suite fails on any difference that no entry here explains.
An entry is allowed only where the real node answers 5xx, or accepts a write
that then breaks its own reads, or where a behaviour follows from every caller
being authenticated.  Each says why we are better there.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from tests.conformance.differ import ABSENT, Difference


@dataclass(frozen=True)
class Deviation:
    name: str
    reason: str
    applies: Callable[[Difference], bool]


def _server_error(d: Difference) -> bool:
    return d.real_reply.status >= 500 and d.our_reply.status == 400


def _broken_reads(d: Difference) -> bool:
    """The real node stores a name or response that is not text, then fails every read of it with a 500."""
    stored_badly = re.search(r'^PUT .*\{"(name|response)": (\d|\[)', d.step) is not None
    return stored_badly and d.real_reply.status == 200 and d.our_reply.status == 400


def _read_after_broken_write(d: Difference) -> bool:
    """What the real node answers after it stored such a value: a 500, where we still read the document."""
    return d.real_reply.status >= 500 and d.our_reply.status == 200


def _mapping_cause_position(d: Difference) -> bool:
    """A mapping error's cause points at a line and column of the node's internal merged document."""
    return bool(re.search(r"(root_cause\[0\]|caused_by)\.(line|col|reason)$", d.where)) and (
        d.real_reply.body.get("error", {}).get("type") == "mapper_parsing_exception"
    )


def _missing_reindex_module(d: Difference) -> bool:
    """Deleting an unknown model: the judge, built without the reindex module, fails its delete-by-query."""
    real = d.real_reply.body
    reason = real.get("error", {}).get("reason", "") if isinstance(real, dict) else ""
    return (
        d.real_reply.status == 500
        and "DeleteByQueryAction" in str(reason)
        and d.our_reply.status == 404
        and d.step.startswith("DELETE /_plugins/_ml/models/")
    )


def _background_writes(d: Difference) -> bool:
    """A model's ``_version``: the real node also counts the writes its own background tasks make of it."""
    model_write = re.match(r"^(DELETE|PUT) /_plugins/_ml/models/|^(POST|GET) /_plugins/_ml/models/_search", d.step)
    return (
        bool(model_write)
        and bool(re.search(r"(^\$|\._source|\.hits\[\d+\])?\._version$", d.where))
        and (isinstance(d.real, int) and isinstance(d.ours, int))
    )


def _delete_tombstone(d: Difference) -> bool:
    """Deleting an id that is not there: the real node's ``_version`` counts its delete tombstones (kept 60 s)."""
    body = d.our_reply.body
    return (
        d.step.startswith("DELETE /_plugins/_ml/")
        and d.where == "$._version"
        and isinstance(body, dict)
        and body.get("result") == "not_found"
    )


def _superseded_statistics(d: Difference) -> bool:
    """Model search scores: the real node's BM25 statistics still count superseded versions of models it rewrote."""
    return (
        re.match(r"^\S+ /_plugins/_ml/models/_search\b", d.step) is not None
        and bool(re.search(r"(\.max_score|\._score)$", d.where))
        and all(isinstance(v, float) and v > 0 for v in (d.real, d.ours))
    )


def _sync_up_race(d: Difference) -> bool:
    """A model just undeployed: the real node's sync-up job, racing the undeploy, may mark it DEPLOY_FAILED."""
    return d.where.endswith("model_state") and d.real == "DEPLOY_FAILED" and d.ours == "UNDEPLOYED"


def _user_field(d: Difference) -> bool:
    return d.real is ABSENT and bool(re.search(r"(^\$|\.memories\[\d+\]|\._source)\.user$", d.where))


def _model_group_access(d: Difference) -> bool:
    """A model group's ``access`` and ``owner``: the judge, without security, makes every group public and ownerless."""
    return (
        d.step.split(" ", 1)[1].startswith("/_plugins/_ml/model_groups")
        and bool(re.search(r"(^\$|\._source)\.(access|owner)$", d.where))
        and (d.real, d.ours) in (("public", "private"), (ABSENT, d.ours))
    )


DEVIATIONS = (
    Deviation(
        "broken-reads",
        "ml-commons accepts a number or a list as a memory name or message response, stores it, and from then on "
        "every read of that document (get, list, delete) is a 500; we refuse the update with a 400 naming the field.",
        _broken_reads,
    ),
    Deviation(
        "reads-after-broken-write",
        "Follows from broken-reads: the real node's reads of the document it corrupted fail, ours still answer.",
        _read_after_broken_write,
    ),
    Deviation(
        "mapping-cause-position",
        "A mapper_parsing_exception's nested cause names a line and column inside the node's own merged update "
        "document, which no client sent; we give the same types and words without that position.",
        _mapping_cause_position,
    ),
    Deviation(
        "server-error",
        "Where the real node answers 5xx to a bad request (null, array or object field values, NullPointer and "
        "ClassCast failures), we answer a 400 in the same error format naming the field.",
        _server_error,
    ),
    Deviation(
        "missing-reindex-module",
        "Deleting a model that does not exist makes ml-commons clean up its chunks with a delete-by-query; the "
        "judge is built without OpenSearch's reindex module, so it answers 500 'failed to find action "
        "[...DeleteByQueryAction@<hash>]'.  A full distribution answers 404 'Failed to find model', as we do.",
        _missing_reindex_module,
    ),
    Deviation(
        "background-writes",
        "A model's `_version`: ml-commons rewrites a model document from its own background tasks (deploy and "
        "undeploy state, worker counts, sync-up), so the real node's `_version` counts writes no client made and "
        "that vary with timing; ours counts the create, each deploy as two writes and each undeploy as one.",
        _background_writes,
    ),
    Deviation(
        "delete-tombstone",
        "Deleting an id that is not there: the real node's `_version` counts the delete tombstones it keeps for "
        "`index.gc_deletes` (60 s), so it depends on the clock; we answer `_version` 1.",
        _delete_tombstone,
    ),
    Deviation(
        "superseded-statistics",
        "Model search scores: Lucene's BM25 statistics count the superseded versions of documents until their "
        "segments merge, and ml-commons rewrites a model on every deploy and undeploy; our statistics count the "
        "models as they are.  Hits, their order and their sources are compared as ever; scores are positive on "
        "both sides.",
        _superseded_statistics,
    ),
    Deviation(
        "sync-up-race",
        "A model read just after its undeploy: ml-commons' sync-up job (every 10 s) reads the model as deployed, "
        "finds it on no node once the undeploy has run, and writes DEPLOY_FAILED over the undeploy's UNDEPLOYED "
        "(MLSyncUpCron.getNewModelState), so the real node's answer depends on when its cron fired; ours is "
        "always UNDEPLOYED, what the client asked for.",
        _sync_up_race,
    ),
    Deviation(
        "user-field",
        "Every caller here is authenticated, so memories carry `user` as they do on a cluster with the security "
        "plugin; the judge runs without security and has no user.",
        _user_field,
    ),
    Deviation(
        "model-group-access",
        "Every caller here is authenticated, so a model group is registered as on a cluster with the security "
        "plugin and model access control: private to its creator unless shared, with its `owner`; the judge runs "
        "without security, where every group is public and has no owner.",
        _model_group_access,
    ),
)


def unexplained(differences: list[Difference]) -> list[Difference]:
    return [d for d in differences if not any(x.applies(d) for x in DEVIATIONS)]
