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


def _user_field(d: Difference) -> bool:
    return d.real is ABSENT and bool(re.search(r"(^\$|\.memories\[\d+\]|\._source)\.user$", d.where))


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
        "user-field",
        "Every caller here is authenticated, so memories carry `user` as they do on a cluster with the security "
        "plugin; the judge runs without security and has no user.",
        _user_field,
    ),
)


def unexplained(differences: list[Difference]) -> list[Difference]:
    return [d for d in differences if not any(x.applies(d) for x in DEVIATIONS)]
