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


def _user_field(d: Difference) -> bool:
    return d.real is ABSENT and bool(re.search(r"(^\$|\.memories\[\d+\]|\._source)\.user$", d.where))


DEVIATIONS = (
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
