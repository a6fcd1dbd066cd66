"""The embedded store's postings and the query-DSL pushdown over them: which bodies push down, that a pushed-down
search answers exactly as a scan of every doc, that postings follow every write, and that a database of the
schema before them gains them on open."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest

from memory_plugin.agentic.container_requests import parse_container
from memory_plugin.agentic.containers import Containers
from memory_plugin.agentic.llm import ContainerModels
from memory_plugin.agentic.memories import Memories
from memory_plugin.agentic.memory_requests import parse_memory_search
from memory_plugin.agentic.models import HISTORY, SESSIONS, WORKING
from memory_plugin.agentic.stores import sqlite_posting_reads, sqlite_postings
from memory_plugin.agentic.stores.base import MemoryAdd, SessionWrite
from memory_plugin.agentic.stores.sqlite import SqliteAgenticStore
from memory_plugin.agentic.stores.sqlite_postings import RECENT_DOCS, indexed_path, postings
from memory_plugin.agentic.stores.sqlite_tables import MIGRATIONS
from memory_plugin.agentic.views import hit_extras, hits_view
from memory_plugin.auth import Principal
from memory_plugin.background import Worker
from memory_plugin.dsl import execute, parse_search, search_response
from memory_plugin.dsl.pushdown import RequiredTerms, SortedPage, required_terms, sorted_page

ALICE, BOB = Principal("org-1", "alice"), Principal("org-1", "bob")
SESSION = {"term": {"namespace.session_id": "s3"}}


@pytest.fixture(autouse=True, params=[1, 13, RECENT_DOCS], ids=["moved", "moved-and-recent", "recent"])
def recent_postings(request, monkeypatch):
    """Every test with each new doc's postings moved at once to the term-ordered table, with some moved and
    some recent, and (up to 512 docs) all of them recent."""
    monkeypatch.setattr(sqlite_postings, "RECENT_DOCS", request.param)


def planned(body: dict[str, Any]) -> list[RequiredTerms]:
    return required_terms(parse_search(body), indexed_path)


def working(n: int, owner: str = "alice") -> dict[str, Any]:
    doc: dict[str, Any] = {
        "owner_id": owner,
        "memory_container_id": "c1",
        "payload_type": "conversational" if n % 3 else "data",
        "messages": [{"role": "user", "content": [{"type": "text", "text": f"message {n} about topic {n % 4}"}]}],
        "namespace": {"session_id": f"s{n % 8}", "agent_id": f"a{n % 5}"},
        "namespace_size": 2,
        "tags": {"topic": f"t{n % 4}"},
        "session_id": f"s{n % 8}",
        "created_time": 1_700_000_000_000 + (n * 7919) % 1000,  # ties too: sorts must break them alike
        "last_updated_time": 1_700_000_000_000 + n,
    }
    if n % 10 == 0:
        doc["metadata"] = {"kind": "important", "note.deep": "x"}
    return doc


async def filled(tmp_path, count: int = 400, *, posted_first: bool = False) -> SqliteAgenticStore:
    """A store with ``count`` working memories in c1; ``posted_first``: its types' postings asked for by a
    search before the first of them (every write then keeps its own), else built at the first search."""
    store = SqliteAgenticStore(tmp_path / "a.sqlite3")
    await store.open(8)
    await store.insert_container(ALICE, "c1", parse_container({"name": "c1"}, False).document(8, "alice"))
    for memory_type in (WORKING, SESSIONS, HISTORY) if posted_first else ():
        assert await store.docs_matching(ALICE, "c1", memory_type, [(("session_id",), ("none",))]) == []
    for n in range(count):
        owner = BOB if n % 7 == 0 else ALICE  # a shared container: others' docs are never candidates
        await store.add_memory(owner, "c1", MemoryAdd(f"w{n:04d}", working(n, owner.user_id or "")))
    return store


async def answer(store: SqliteAgenticStore, body: dict[str, Any], *, pushdown: bool) -> tuple[dict[str, Any], int]:
    """The search response over the pushed-down candidates or over every doc, and how many docs it read."""
    query = parse_search(body)
    if pushdown:
        required = required_terms(query, store.indexed_field)
        assert required, body
        terms = [(term.paths, term.values) for term in required]
        docs = await store.docs_matching(ALICE, "c1", WORKING, terms)
    else:
        docs = await store.docs(ALICE, "c1", WORKING)
    result = execute(query, [(doc.id, doc.source) for doc in docs])
    return search_response(result, 0, index="working", hit_extras=hit_extras(docs).__getitem__), len(docs)


# -- the planner ------------------------------------------------------------------------------


def test_required_terms_at_top_and_under_required_bools_push_down():
    assert planned({"query": SESSION, "sort": [{"created_time": "desc"}]}) == [
        RequiredTerms(("namespace.session_id",), ("s3",))
    ]
    body = {
        "query": {
            "bool": {
                "filter": [SESSION, {"range": {"created_time": {"gte": 0}}}],
                "must": [{"bool": {"filter": {"terms": {"tags.topic": ["t1", "t2"]}}}}],
                "must_not": [{"term": {"payload_type": "data"}}],
                "should": [{"term": {"session_id": "s1"}}],
            }
        },
        "sort": [{"created_time": {"order": "desc"}}],
        "size": 10,
    }
    assert set(planned(body)) == {
        RequiredTerms(("namespace.session_id",), ("s3",)),
        RequiredTerms(("tags.topic",), ("t1", "t2")),
    }
    # scores shown, but constant whatever the other docs are
    assert planned({"query": {"constant_score": {"filter": SESSION}}}) == [
        RequiredTerms(("namespace.session_id",), ("s3",))
    ]
    assert planned({"query": {"bool": {"must": [SESSION, {"range": {"created_time": {"gt": 1}}}]}}})
    # BM25 in filter context is not scored
    assert planned({"query": {"bool": {"filter": [SESSION, {"match": {"messages.content.text": "topic"}}]}}})
    # ``x.keyword`` reads ``x`` when the doc has no ``x.keyword``: both are looked up
    assert planned({"query": {"term": {"namespace.session_id.keyword": "s3"}}}) == [
        RequiredTerms(("namespace.session_id.keyword", "namespace.session_id"), ("s3",))
    ]


@pytest.mark.parametrize(
    "body",
    [
        {"query": {"match_all": {}}},
        {"query": {"bool": {"should": [SESSION]}}},
        {"query": {"bool": {"must_not": [SESSION]}}},
        {"query": {"bool": {"filter": [{"bool": {"should": [SESSION, {"term": {"session_id": "s1"}}]}}]}}},
        # scores shown and computed from the corpus: the candidates' statistics would differ
        {"query": {"bool": {"filter": [SESSION], "must": [{"match": {"messages.content.text": "topic"}}]}}},
        # ... or a min_score over them
        {"query": {"bool": {"filter": [SESSION], "must": [{"match": {"x": "y"}}]}}, "min_score": 0.1},
        # fuzzy expands to the searched docs' terms: which docs match depends on the corpus
        {"query": {"bool": {"filter": [SESSION, {"fuzzy": {"messages.content.text": "topik"}}]}}, "sort": ["_id"]},
        # unindexed fields, and a flat_object root (every leaf at once)
        {"query": {"term": {"owner_id": "alice"}}},
        {"query": {"term": {"messages.role": "user"}}},
        {"query": {"term": {"namespace": "s3"}}},
        {"query": {"term": {"_id": "w0001"}}},
        # values a term compares as numbers, booleans or dates, and case-insensitive ones
        {"query": {"term": {"namespace.session_id": 3}}},
        {"query": {"term": {"namespace.session_id": "3"}}},
        {"query": {"term": {"namespace.session_id": "True"}}},
        {"query": {"term": {"namespace.session_id": "2024-01-01"}}},
        {"query": {"terms": {"namespace.session_id": ["s3", "7"]}}},
        {"query": {"term": {"namespace.session_id": {"value": "S3", "case_insensitive": True}}}},
    ],
)
def test_bodies_that_scan(body):
    assert planned(body) == []


def test_bm25_sorted_by_fields_only_pushes_down_as_scores_are_not_shown():
    body = {"query": {"bool": {"must": [SESSION, {"match": {"messages.content.text": "topic"}}]}}}
    assert planned(body) == []
    assert planned({**body, "sort": [{"created_time": "desc"}]})
    assert required_terms(parse_search(body), indexed_path, scores_shown=False)  # delete by query


def test_postings_hold_what_a_term_reads_at_every_indexed_path():
    doc = {
        "namespace": {"session_id": "s1", "a.b": "dotted"},
        "tags": {"t": ["x", "y"], "n": 5},
        "metadata": {"deep": {"er": "z"}},
        "session_id": "s1",
        "owner_id": "alice",
        "messages": [{"role": "user"}],
    }
    assert postings(doc) == {
        ("namespace.session_id", "s1"),
        ("namespace.a.b", "dotted"),
        ("tags.t", "x"),
        ("tags.t", "y"),
        ("metadata.deep", "z"),
        ("metadata.deep.er", "z"),
        ("session_id", "s1"),
    }


# -- the store ----------------------------------------------------------------------------------

EQUIVALENT = [
    {"query": SESSION, "sort": [{"created_time": {"order": "desc"}}], "size": 10},
    {"query": {"bool": {"filter": [SESSION]}}, "sort": [{"created_time": "asc"}], "size": 10},
    {"query": {"bool": {"must": [SESSION]}}, "sort": [{"created_time": "desc"}], "from": 3, "size": 4},
    {"query": {"terms": {"tags.topic": ["t1", "t3"]}}, "size": 50},
    {"query": {"term": {"namespace.session_id.keyword": "s5"}}, "track_total_hits": True},
    {
        "query": {
            "bool": {
                "filter": [{"terms": {"namespace.agent_id": ["a1", "a2"]}}],
                "must": [{"term": {"tags.topic": "t1"}}, {"range": {"last_updated_time": {"gte": 1_700_000_000_100}}}],
                "must_not": [{"term": {"payload_type": "data"}}],
                "should": [{"match": {"messages.content.text": "message"}}],
            }
        },
        "sort": [{"created_time": "desc"}, {"_id": "asc"}],
        "size": 7,
        "track_total_hits": 3,
    },
    {
        "query": {"bool": {"filter": [{"term": {"session_id": "s2"}}]}},
        "size": 0,
        "aggs": {"agents": {"terms": {"field": "namespace.agent_id"}}, "newest": {"max": {"field": "created_time"}}},
    },
    {"query": {"term": {"metadata.kind": "important"}}, "sort": [{"created_time": "desc"}], "_source": ["tags"]},
    {"query": {"term": {"namespace.session_id": "nobody"}}},
    {
        "query": {"bool": {"filter": [SESSION, {"term": {"tags.topic": "t3"}}]}},
        "sort": [{"created_time": "desc"}],
        "search_after": [1_700_000_000_500],
    },
]


@pytest.mark.parametrize("posted_first", [False, True], ids=["posted-at-search", "posted-first"])
async def test_a_pushed_down_search_answers_as_a_scan_of_every_doc(tmp_path, subtests, posted_first):
    store = await filled(tmp_path, posted_first=posted_first)  # once: the searches only read it
    try:
        for body in EQUIVALENT:
            with subtests.test(body=body):
                pushed, read = await answer(store, body, pushdown=True)
                scanned, every = await answer(store, body, pushdown=False)
                assert pushed == scanned
                assert read <= every / 2  # the candidates only
    finally:
        await store.close()


@pytest.mark.parametrize("posted_first", [False, True], ids=["posted-at-search", "posted-first"])
async def test_postings_follow_updates_deletes_and_session_touches(tmp_path, posted_first):
    store = await filled(tmp_path, count=16, posted_first=posted_first)
    try:

        async def ids(field: str, value: str, memory_type: str = WORKING) -> list[str]:
            docs = await store.docs_matching(ALICE, "c1", memory_type, [((field,), (value,))])
            return [doc.id for doc in docs]

        assert await ids("tags.topic", "t1") == ["w0001", "w0005", "w0009", "w0013"]
        await store.update(ALICE, "c1", WORKING, "w0005", lambda doc: {**doc, "tags": {"topic": "moved"}})
        assert await ids("tags.topic", "t1") == ["w0001", "w0009", "w0013"]
        assert await ids("tags.topic", "moved") == ["w0005"]
        await store.delete(ALICE, "c1", WORKING, "w0009")
        assert await store.delete_ids(ALICE, "c1", WORKING, ["w0013"]) == 1
        assert await ids("tags.topic", "t1") == ["w0001"]
        # an add touching its session rewrites the session with its postings
        session = SessionWrite("s-new", {"namespace": {"session_id": "s-new"}, "summary": "x"})
        await store.add_memory(ALICE, "c1", MemoryAdd("w-new", working(1), session))
        touch = SessionWrite("s-new", None, touched_time=5)
        await store.add_memory(ALICE, "c1", MemoryAdd("w-newer", working(1), touch))
        assert await ids("namespace.session_id", "s-new", SESSIONS) == ["s-new"]
        every = (
            "SELECT t.field, t.value, p.created_time, p.seq FROM postings AS p JOIN posting_terms AS t USING (term_id) "
            "UNION ALL SELECT field, value, created_time, seq FROM recent_postings ORDER BY 4, 1, 2"
        )
        held = await store.db.read(lambda c: c.execute(every).fetchall())
        await store.add_memory(ALICE, "c1", MemoryAdd("w-newest", working(2), touch))  # the touch keeps them
        after = await store.db.read(lambda c: c.execute(every).fetchall())
        assert after[: len(held)] == held and len(after) == len(held) + len(postings(working(2)))
        named = "SELECT count(*) FROM posting_terms WHERE value = 'moved'"
        assert await store.db.read(lambda c: c.execute(named).fetchone()[0]) == 1
        await store.delete(ALICE, "c1", WORKING, "w0005")  # the term's last posting: the term goes with it
        assert await store.db.read(lambda c: c.execute(named).fetchone()[0]) == 0
        assert await store.delete_container(ALICE, "c1") is not None
        counts = (
            "SELECT (SELECT count(*) FROM postings), (SELECT count(*) FROM recent_postings), "
            "(SELECT count(*) FROM posting_terms), (SELECT count(*) FROM posted_scopes)"
        )
        assert await store.db.read(lambda c: tuple(c.execute(counts).fetchone())) == (0, 0, 0, 0)
    finally:
        await store.close()


async def test_a_doc_with_more_values_than_a_statement_holds_has_all_its_postings(tmp_path):
    store = await filled(tmp_path, count=1)
    try:
        wide = {**working(1), "tags": {f"k{n}": f"v{n}" for n in range(1000)}}  # 2,000 parameters and more

        async def ids(n: int) -> list[str]:
            return [doc.id for doc in await store.docs_matching(ALICE, "c1", WORKING, [((f"tags.k{n}",), (f"v{n}",))])]

        await store.add_memory(ALICE, "c1", MemoryAdd("wide", wide))
        assert [await ids(n) for n in (0, 399, 400, 999)] == [["wide"]] * 4
        waiting = "SELECT count(*) FROM recent_postings JOIN memories USING (seq) WHERE memory_id = 'wide'"
        assert await store.db.read(lambda c: c.execute(waiting).fetchone()[0]) == 0  # no read scans them
        await store.update(ALICE, "c1", WORKING, "wide", lambda doc: {**doc, "tags": {"k999": "v999"}})
        assert [await ids(n) for n in (0, 399, 400, 999)] == [[], [], [], ["wide"]]
    finally:
        await store.close()


HELD = (
    "SELECT p.seq, t.field, t.value FROM postings AS p JOIN posting_terms AS t USING (term_id) "
    "UNION ALL SELECT seq, field, value FROM recent_postings"
)


async def held_and_due(store: SqliteAgenticStore, memory_type: str = WORKING) -> tuple[dict, dict]:
    """Each doc's postings as stored, and as its doc now says they should be."""
    held: dict[int, set] = {}
    for seq, field, value in await store.db.read(lambda c: c.execute(HELD).fetchall()):
        held.setdefault(seq, set()).add((field, value))
    rows = await store.db.read(
        lambda c: c.execute("SELECT seq, doc FROM memories WHERE memory_type = ?", (memory_type,)).fetchall()
    )
    due = {seq: postings(json.loads(doc)) for seq, doc in rows}
    return held, {seq: pairs for seq, pairs in due.items() if pairs}


async def test_a_type_has_postings_from_its_first_search_built_in_parts_between_writes(tmp_path, monkeypatch):
    monkeypatch.setattr(sqlite_posting_reads, "POST_BATCH", 3)
    store = await filled(tmp_path, count=16)
    try:
        assert await store.db.read(lambda c: c.execute(HELD).fetchall()) == []  # nobody searched: none written
        # a first search that stopped waiting after one batch of three, then writes of every kind
        await store.db.write(lambda c: sqlite_postings.start_posting(c, "c1", WORKING))
        seqs = await store.db.read(lambda c: sqlite_postings.unposted_seqs(c, "c1", WORKING))
        assert len(seqs) == 16
        await store.db.write(lambda c: sqlite_postings.post_docs(c, "c1", WORKING, seqs[:3], False))
        held, due = await held_and_due(store)
        assert held == {seq: due[seq] for seq in seqs[:3]}
        retopic = lambda doc: {**doc, "tags": {"topic": "moved"}}  # noqa: E731
        await store.update(ALICE, "c1", WORKING, "w0001", retopic)  # posted: its postings follow
        await store.update(ALICE, "c1", WORKING, "w0008", retopic)  # not yet: its batch reads it as it is now
        await store.delete(ALICE, "c1", WORKING, "w0009")
        await store.add_memory(ALICE, "c1", MemoryAdd("w-new", working(99)))  # new: posted at once
        held, due = await held_and_due(store)
        assert set(held) == {*seqs[:3], max(due)}
        found = await store.docs_matching(ALICE, "c1", WORKING, [(("tags.topic",), ("moved",))])  # the rest
        assert [doc.id for doc in found] == ["w0001", "w0008"]
        held, due = await held_and_due(store)
        assert held == due and len(due) == 16
        ready = "SELECT started = through FROM posted_scopes WHERE container_id = 'c1' AND memory_type = ?"
        assert await store.db.read(lambda c: c.execute(ready, (WORKING,)).fetchone()[0]) == 1
        assert await store.db.read(lambda c: c.execute(ready, (SESSIONS,)).fetchone()) is None
    finally:
        await store.close()


#: Schema v5's postings, as that release left them: every string again in each of four B-trees.
WIDE_POSTINGS = """
    CREATE TABLE postings (
        container_id TEXT NOT NULL, memory_type TEXT NOT NULL, field TEXT NOT NULL, value TEXT NOT NULL,
        seq INTEGER NOT NULL REFERENCES memories (seq) ON DELETE CASCADE, organization_id TEXT NOT NULL,
        user_id TEXT NOT NULL, created_time, last_updated_time,
        PRIMARY KEY (container_id, memory_type, field, value, seq)
    ) WITHOUT ROWID;
    CREATE INDEX postings_seq ON postings (seq);
    CREATE INDEX postings_by_created_time ON postings
        (container_id, memory_type, field, value, organization_id, user_id, created_time, seq);
"""


async def test_a_database_of_schema_v5_trades_its_wide_postings_for_narrow_ones_on_open(tmp_path):
    path = tmp_path / "v5.sqlite3"
    connection = sqlite3.connect(path, isolation_level=None)
    for migration in MIGRATIONS[:3]:
        migration(connection)
    connection.executescript(WIDE_POSTINGS)
    connection.execute("PRAGMA user_version=5")
    connection.execute("INSERT INTO containers VALUES ('c1', 'org-1', 'alice', '{}', 1, 1)")
    connection.execute(
        "INSERT INTO memories (seq, container_id, memory_type, memory_id, organization_id, user_id, doc, version, "
        "seq_no) VALUES (3, 'c1', ?, 'm3', 'org-1', 'alice', ?, 1, 3)",
        (WORKING, json.dumps(working(3))),
    )
    connection.execute(  # a posting v5 wrote: gone with its table
        "INSERT INTO postings VALUES ('c1', ?, 'namespace.session_id', 's3', 3, 'org-1', 'alice', 1, 1)", (WORKING,)
    )
    connection.close()
    store = SqliteAgenticStore(path)
    await store.open(8)
    try:
        tables = await store.db.read(
            lambda c: {row[0]: row[1] for row in c.execute("SELECT name, tbl_name FROM sqlite_master")}
        )
        assert tables["postings_seq"] == "postings" and "postings_by_created_time" not in tables
        columns = await store.db.read(lambda c: [row[1] for row in c.execute("PRAGMA table_info(postings)")])
        assert columns == ["term_id", "created_time", "seq"]
        found = await store.docs_matching(ALICE, "c1", WORKING, [(("namespace.session_id",), ("s3",))])
        assert [doc.id for doc in found] == ["m3"]
    finally:
        await store.close()


async def test_a_database_of_the_schema_before_postings_gains_them_on_open(tmp_path):
    path = tmp_path / "old.sqlite3"
    connection = sqlite3.connect(path, isolation_level=None)
    for migration in MIGRATIONS[:3]:  # the schema as the previous release left it
        migration(connection)
    connection.execute("PRAGMA user_version=3")
    connection.execute("INSERT INTO containers VALUES ('c1', 'org-1', 'alice', '{}', 1, 1)")
    rows = [
        (n, "c1", WORKING if n < 30 else HISTORY, f"m{n}", "org-1", "alice", json.dumps(working(n)), 1, n)
        for n in range(1, 41)
    ]
    connection.executemany(
        "INSERT INTO memories (seq, container_id, memory_type, memory_id, organization_id, user_id, doc, version, "
        "seq_no) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    connection.close()
    store = SqliteAgenticStore(path)
    await store.open(8)
    try:
        found = await store.docs_matching(ALICE, "c1", WORKING, [(("namespace.session_id",), ("s3",))])
        assert [doc.id for doc in found] == ["m3", "m11", "m19", "m27"]
        history = await store.docs_matching(ALICE, "c1", HISTORY, [(("tags.topic",), ("t2",))])
        assert [doc.id for doc in history] == ["m30", "m34", "m38"]
        body = {"query": SESSION, "sort": [{"created_time": "desc"}]}
        pushed, read = await answer(store, body, pushdown=True)
        assert pushed == (await answer(store, body, pushdown=False))[0]
        assert read == 4 and pushed["hits"]["total"]["value"] == 4
        assert len(await store.docs(ALICE, "c1", WORKING)) == 29  # nothing lost
        scopes = "SELECT memory_type, started, through FROM posted_scopes ORDER BY 1"
        assert await store.db.read(lambda c: [tuple(row) for row in c.execute(scopes)]) == [
            (HISTORY, 0, 0),
            (WORKING, 0, 0),
        ]
    finally:
        await store.close()


# -- through the service: candidates, and a sorted page picked by the store -------------------------


class Idle(Worker):
    async def drain(self) -> None:
        return None


def service(store: SqliteAgenticStore) -> Memories:
    models = ContainerModels(None, None, None)  # type: ignore[arg-type]
    containers = Containers(store, models, retention_enabled=False)
    return Memories(store, containers, models, embeddings=Idle("e"), infer=Idle("i"), retention_enabled=False)


async def searched(memories: Memories, body: dict[str, Any]) -> dict[str, Any]:
    """Alice's ``_search`` of c1's working memories, as the route parses and answers it."""
    return hits_view(await memories.search(ALICE, "c1", "working", parse_memory_search("working", body)))


def test_a_session_load_is_a_page_the_store_can_pick():
    body = {"query": {"bool": {"filter": [SESSION]}}, "sort": [{"created_time": "desc"}], "from": 2, "size": 10}
    assert sorted_page(parse_search(body), indexed_path) == SortedPage(
        (RequiredTerms(("namespace.session_id",), ("s3",)),), "created_time", True, 12, 10_001
    )
    counted = [sorted_page(parse_search({**body, "track_total_hits": t}), indexed_path) for t in (True, False, -1, 7)]
    assert [page.count_up_to if page else "none" for page in counted] == [None, 0, 0, 8]
    assert sorted_page(parse_search({**body, "query": SESSION, "sort": ["created_time"]}), indexed_path)
    for other in (
        {"sort": [{"created_time": "desc"}, "_id"]},
        {"sort": [{"namespace.agent_id": "desc"}]},
        {"sort": [{"created_time": {"order": "desc", "missing": "_first"}}]},
        {"aggs": {"n": {"max": {"field": "created_time"}}}},
        {"search_after": [5]},
        {"query": {"bool": {"filter": [SESSION, {"range": {"created_time": {"gte": 0}}}]}}},
        {"query": {"bool": {"filter": [SESSION], "must_not": [{"term": {"tags.topic": "t1"}}]}}},
        {"query": {"term": {"namespace.session_id.keyword": "s3"}}},
    ):
        assert sorted_page(parse_search({**body, **other}), indexed_path) is None, other


SERVICE_BODIES = [
    *EQUIVALENT,
    {"query": SESSION, "sort": [{"created_time": "asc"}], "from": 5, "size": 3, "track_total_hits": True},
    {"query": {"bool": {"filter": [SESSION]}}, "sort": [{"created_time": "desc"}], "track_total_hits": 2},
    # s3 holds 43 of alice's docs: counted past, up to and below the bound, exactly, or not at all
    *(
        {"query": SESSION, "sort": [{"created_time": "desc"}], "size": 5, "track_total_hits": track}
        for track in (0, 42, 43, 44, True, False, -1)
    ),
    {
        "query": {"bool": {"filter": [SESSION, {"term": {"tags.topic": "t3"}}]}},
        "sort": ["created_time"],
        "track_total_hits": 3,
    },
    {"query": {"bool": {"must": [SESSION, {"term": {"tags.topic": "t3"}}]}}, "sort": ["created_time"], "size": 0},
    {"query": {"bool": {"filter": [SESSION]}}, "sort": [{"last_updated_time": "desc"}], "from": 40, "size": 10},
    # a number the postings do not carry (read from the docs in SQL), every doc tied: oldest first
    {"query": {"terms": {"tags.topic": ["t0", "t2"]}}, "sort": [{"namespace_size": "desc"}], "from": 7, "size": 5},
    # more required terms than SQLite compounds SELECTs (500), within Lucene's 1024 clauses; sorted and not
    {"query": {"bool": {"filter": [SESSION] * 600}}, "sort": ["created_time"]},
    {"query": {"bool": {"filter": [SESSION] * 600}}},
]


async def assert_searches_answer_as_scans(store: Any, subtests: Any) -> None:
    """Each of ``SERVICE_BODIES`` answers the same through the store's candidates as when every doc is evaluated
    (``indexed_field`` false, as before postings): one store for all, which the searches only read."""
    memories = service(store)
    try:
        for body in SERVICE_BODIES:
            with subtests.test(body=body):
                pushed = await searched(memories, body)
                store.indexed_field = lambda path: False
                scanned = await searched(memories, body)
                del store.indexed_field  # the store's own again
                for answer in (pushed, scanned):
                    answer.pop("took")
                assert pushed == scanned
    finally:
        vars(store).pop("indexed_field", None)


async def test_a_search_through_the_service_answers_as_a_scan(tmp_path, subtests):
    store = await filled(tmp_path)
    try:
        await assert_searches_answer_as_scans(store, subtests)
    finally:
        await store.close()


async def test_a_session_load_reads_only_its_page_unless_a_sort_value_is_not_a_number(tmp_path, monkeypatch):
    store = await filled(tmp_path, count=80)
    memories = service(store)
    picked: list[tuple[int, int] | None] = []
    original = store.sorted_page

    async def spy(*args: Any) -> Any:
        found = await original(*args)
        picked.append(None if found is None else (found[0], len(found[1])))
        return found

    monkeypatch.setattr(store, "sorted_page", spy)
    body = {"query": {"bool": {"filter": [SESSION]}}, "sort": [{"created_time": "desc"}], "size": 3}
    before = await searched(memories, body)
    assert picked == [(9, 3)]  # s3: n = 3, 11, ..., 75 of 80, less bob's 35
    assert before["hits"]["total"] == {"value": 9, "relation": "eq"}
    # a date string where the others hold numbers: the DSL sorts them, as before
    await store.update(ALICE, "c1", WORKING, "w0011", lambda doc: {**doc, "created_time": "2030-01-01T00:00:00Z"})
    after = await searched(memories, body)
    assert picked[-1] is None
    assert after["hits"]["hits"][0]["_id"] == "w0011" and after["hits"]["total"]["value"] == 9
    await store.update(ALICE, "c1", WORKING, "w0011", lambda doc: {**doc, "created_time": 11})
    bounded = await searched(memories, {**body, "track_total_hits": 4})
    assert picked[-1] == (5, 3)  # counting stopped one past the bound
    assert bounded["hits"]["total"] == {"value": 4, "relation": "gte"}
    assert [hit["_id"] for hit in bounded["hits"]["hits"]] == [hit["_id"] for hit in before["hits"]["hits"]]
    await store.close()
