"""Send one request to the real ml-commons node and to our server, and say how the answers differ.

Each side generates its own ids, so the differ keeps one alias table per side:
the n-th id a side hands out becomes ``<id:n>`` in everything that side says
afterwards, and an alias in a request path or body is written back as that
side's own id.  Timestamps become ``<time>``: ISO strings anywhere, and the
epoch milliseconds ml-commons keeps under its ``*_time`` keys (:data:`TIME_KEYS`).
Node ids (each side has its own node) become ``<node>``.  Nothing else is normalised,
except the few fields that count work done by *other* callers of a shared
index (``took``, ``_seq_no``, ``_primary_term``), which are compared by type.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from opensearchpy import AsyncOpenSearch, TransportError

TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
ALIAS = re.compile(r"<id:(\d+)>")
#: Keys whose values hold ids a side generated.
ID_KEYS = frozenset(
    {
        "memory_id",
        "message_id",
        "conversation_id",
        "interaction_id",
        "_id",
        "parent_message_id",
        "connector_id",
        "model_id",
        "task_id",
        "model_group_id",
    }
)
#: Keys under which ml-commons keeps a time as epoch milliseconds (connectors, models, model groups, tasks).
TIME_KEYS = frozenset(
    {
        "created_time",
        "last_updated_time",
        "create_time",
        "last_update_time",
        "updated_time",
        "last_registered_time",
        "last_deployed_time",
        "last_undeployed_time",
        "last_loaded_time",
        "last_unloaded_time",
        "last_uploaded_time",
    }
)
#: Keys whose values are node ids (a string or a list of them): each side's own node, so ``<node>``.
NODE_KEYS = frozenset({"worker_node", "planning_worker_nodes", "node_id"})
NODE = "<node>"
#: Counters of a shared index (their value depends on everyone's writes, their type does not), and an index's
#: random uuid.
TYPE_ONLY_KEYS = frozenset({"took", "_seq_no", "_primary_term", "node", "index_uuid"})
#: The real node lists a 405's allowed methods from a hash set, in no fixed order.
ALLOWED_METHODS = re.compile(r"allowed: \[([A-Z, ]*)\]")
SCORE_KEYS = frozenset({"_score", "max_score"})
#: Lucene's BM25 and k-NN scores are float32s computed in Lucene's order; ours are doubles in
#: ours.  1e-3 leaves room for that and for the formulas' float32 constants, far above
#: float32's 1e-7 steps and far below what a wrong formula or term statistic moves.
SCORE_TOLERANCE = 1e-3
#: A sort value that is a timestamp in epoch milliseconds (2001 to 2100): each side's own clock, like ``<time>``.
EPOCH_MILLIS = range(978_307_200_000, 4_102_444_800_000)


ABSENT = "<absent>"


@dataclass
class Reply:
    status: int
    content_type: str
    body: Any  # parsed JSON, or the raw text when it is not JSON


@dataclass
class Side:
    """One server, with the ids it has handed out."""

    base_url: str
    headers: Mapping[str, str]
    ids: list[str] = field(default_factory=list)
    #: Node ids this side has named (in a task's ``worker_node``, or as the key of an undeploy answer).
    nodes: set[str] = field(default_factory=set)
    _client: AsyncOpenSearch | None = field(default=None, repr=False)

    def client(self) -> AsyncOpenSearch:
        """An opensearch-py client of this side, made on first use; no retries, so each call is one request."""
        if self._client is None:
            self._client = AsyncOpenSearch(hosts=[self.base_url], headers=dict(self.headers), max_retries=0)
        return self._client

    def alias_of(self, value: str) -> str:
        if value not in self.ids:
            self.ids.append(value)
        return f"<id:{self.ids.index(value)}>"

    def resolve(self, text: str) -> str:
        """Write aliases back as this side's ids."""

        def own(match: re.Match[str]) -> str:
            n = int(match.group(1))
            return self.ids[n] if n < len(self.ids) else f"unknown-id-{n}"

        return ALIAS.sub(own, text)


@dataclass(frozen=True)
class Difference:
    step: str
    where: str
    real: Any
    ours: Any
    real_reply: Reply = field(repr=False, compare=False)
    our_reply: Reply = field(repr=False, compare=False)

    def __str__(self) -> str:
        return f"{self.step}: {self.where}: real={self.real!r} ours={self.ours!r}"


class Differ:
    """Drives a scenario against both servers and collects every difference."""

    def __init__(
        self, session: aiohttp.ClientSession, real: Side, ours: Side, *, observe: Callable[[], Any] | None = None
    ) -> None:
        """``observe``, if given, is called after each side's reply, and what it returns is compared as well.

        It says what a side did besides answering: the remote-model scenarios pass the scripted
        LLM's :meth:`take`, so that the requests each side's connector sent are compared too.
        """
        self.session = session
        self.real = real
        self.ours = ours
        self.observe = observe
        self.differences: list[Difference] = []

    async def send(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        raw: bytes | str | None = None,
        content_type: str = "application/json",
        step: str | None = None,
    ) -> tuple[Reply, Reply]:
        """Send to both sides, record the differences, return both normalised replies."""
        label = step or f"{method} {path}" + (f" {json.dumps(body)[:120]}" if body is not None else "")
        real = await self._call(self.real, method, path, body, raw, content_type)
        real_did = self._observed(self.real)
        ours = await self._call(self.ours, method, path, body, raw, content_type)
        ours_did = self._observed(self.ours)
        for where, a, b in compare(real, ours):
            self.differences.append(Difference(label, where, a, b, real, ours))
        if self.observe is not None:
            for where, a, b in _compare_values("outgoing", real_did, ours_did):
                self.differences.append(Difference(label, where, a, b, real, ours))
        return real, ours

    def _observed(self, side: Side) -> Any:
        return None if self.observe is None else normalise(side, self.observe())

    async def call(self, method: str, /, *, step: str | None = None, **arguments: Any) -> tuple[Reply, Reply]:
        """Call the same opensearch-py ``plugins.ml`` method on both sides, as a client program would.

        A returned body is compared as a 200 of content type ``returned``; a raised
        error by its class (as the content type), its status and its error body.
        """
        label = step or f"plugins.ml.{method}({json.dumps(arguments)[:120]})"
        real = await self._call_client(self.real, method, arguments)
        ours = await self._call_client(self.ours, method, arguments)
        for where, a, b in compare(real, ours):
            self.differences.append(Difference(label, where, a, b, real, ours))
        return real, ours

    async def close(self) -> None:
        for side in (self.real, self.ours):
            if side._client is not None:
                await side._client.close()

    async def _call_client(self, side: Side, method: str, arguments: dict[str, Any]) -> Reply:
        resolved = json.loads(side.resolve(json.dumps(arguments)))
        try:
            returned = await getattr(side.client().plugins.ml, method)(**resolved)
        except TransportError as error:
            status = error.status_code if isinstance(error.status_code, int) else 0
            return Reply(status, type(error).__name__, normalise(side, error.info))
        return Reply(200, "returned", normalise(side, returned))

    async def _call(
        self, side: Side, method: str, path: str, body: Any, raw: bytes | str | None, content_type: str
    ) -> Reply:
        data: bytes | None = None
        if raw is not None:
            data = side.resolve(raw if isinstance(raw, str) else raw.decode("utf-8", "surrogateescape")).encode(
                "utf-8", "surrogateescape"
            )
        elif body is not None:
            data = side.resolve(json.dumps(body)).encode()
        headers = dict(side.headers)
        if data is not None:
            headers["Content-Type"] = content_type
        async with self.session.request(method, side.base_url + side.resolve(path), data=data, headers=headers) as r:
            text = await r.text()
            try:
                parsed: Any = json.loads(text)
            except ValueError:
                parsed = text
            return Reply(r.status, r.headers.get("Content-Type", "").split(";")[0].strip(), normalise(side, parsed))


def _normalise_key(side: Side, key: str, value: Any) -> str:
    """A key that is a node id (an undeploy answer: ``{node: {"stats": {model: state}}}``) or a known id."""
    if key in side.nodes or (isinstance(value, dict) and set(value) == {"stats"}):
        side.nodes.add(key)
        return NODE
    if key in side.ids:
        return f"<id:{side.ids.index(key)}>"
    return key


def normalise(side: Side, value: Any, key: str | None = None) -> Any:
    if isinstance(value, dict):
        return {_normalise_key(side, k, v): normalise(side, v, k) for k, v in value.items()}
    if isinstance(value, list):
        if key == "sort":
            return ["<time>" if type(v) is int and v in EPOCH_MILLIS else normalise(side, v) for v in value]
        return [normalise(side, v, key) for v in value]
    if key in TIME_KEYS and type(value) is int:
        return "<time>"
    if isinstance(value, str):
        if key in NODE_KEYS:
            side.nodes.add(value)
            return NODE
        if key in ID_KEYS:
            return side.alias_of(value)
        if TIMESTAMP.match(value):
            return "<time>"
        value = ALLOWED_METHODS.sub(lambda m: "allowed: [" + ", ".join(sorted(m.group(1).split(", "))) + "]", value)
        for i, known in enumerate(side.ids):
            value = value.replace(known, f"<id:{i}>")
        for node in side.nodes:
            value = value.replace(node, NODE)
        return value
    return value


def compare(real: Reply, ours: Reply) -> Iterator[tuple[str, Any, Any]]:
    if real.status != ours.status:
        yield "status", real.status, ours.status
    if real.content_type != ours.content_type:
        yield "content-type", real.content_type, ours.content_type
    yield from _compare_values("$", real.body, ours.body)


def _compare_values(path: str, a: Any, b: Any, key: str | None = None) -> Iterator[tuple[str, Any, Any]]:
    if key in TYPE_ONLY_KEYS:
        if type(a) is not type(b):
            yield path + " (type)", type(a).__name__, type(b).__name__
        return
    if ".dataAsMap" in path and isinstance(a, (int, float)) and isinstance(b, (int, float)) and type(a) is not type(b):
        # A remote model's answer passes through Gson there, which makes every JSON number a double:
        # a client sees 12.0 where the remote service said 12, so int against float is a difference.
        yield path + " (type)", type(a).__name__, type(b).__name__
        return
    if (key in SCORE_KEYS or isinstance(a, float)) and isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if not math.isclose(a, b, abs_tol=SCORE_TOLERANCE):
            yield path, a, b
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in a:
            if k in b:
                yield from _compare_values(f"{path}.{k}", a[k], b[k], k)
            else:
                yield f"{path}.{k}", a[k], ABSENT
        for k in b:
            if k not in a:
                yield f"{path}.{k}", ABSENT, b[k]
        return
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            yield path + " (length)", len(a), len(b)
        for i, (x, y) in enumerate(zip(a, b)):
            yield from _compare_values(f"{path}[{i}]", x, y, key)
        return
    if type(a) is not type(b) or a != b:
        yield path, a, b
