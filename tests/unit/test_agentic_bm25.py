"""The in-memory BM25 mirror of ``lt_fts`` against FTS5 itself: the same scores (within 1e-6) and the same top k,
ties included, over random unicode corpora with deletes, updates and reopening; and early termination skips."""

from __future__ import annotations

import asyncio
import random
import sqlite3

import numpy as np
import pytest

from memory_plugin import lexical_index
from memory_plugin.agentic.models import LONG_TERM
from memory_plugin.agentic.stores.base import LongTermScope, owner_key
from memory_plugin.agentic.stores.bm25 import SEGMENT, LexicalIndex
from memory_plugin.agentic.stores.fts import TOKENIZE, MirrorBuild, Tokenizer, query_words, totals
from memory_plugin.agentic.stores.sqlite import SqliteAgenticStore
from memory_plugin.auth import Principal

ALICE, BOB, EVE = Principal("org-1", "alice"), Principal("org-1", "bob"), Principal("org-2", "eve")
#: Letters FTS5 folds (case, diacritics, ligatures, other scripts), marks, digits, symbols and separators.
ALPHABET = list("abcdeinorstuABCDE0123456789") + list("éÉèüÜßıİøØæœﬁÅåñçĞğ") + list("αβγΑΒΓσςЖжЯящ日本語中文한국")
ALPHABET += ["\u0301", "\u0308", "\u200d", "\U0001f600", "\uff21", "\u00b2", "\u2160", "_", "-", "'", "."]


def word(rng: random.Random) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 4)))


def text(rng: random.Random, vocabulary: list[str]) -> str:
    return " ".join(rng.choice(vocabulary) for _ in range(rng.randint(0, 12)))


async def add(store: SqliteAgenticStore, owner: Principal, container_id: str, texts: list[str], tag: str) -> None:
    if await store.get_container(owner, container_id) is None:
        await store.insert_container(owner, container_id, {"name": container_id})

    def insert(c: sqlite3.Connection) -> None:
        for n, memory in enumerate(texts):
            doc = {"memory": memory, "namespace": {"user_id": f"u{n % 3}"}, "namespace_size": 1}
            store._insert(c, owner, container_id, LONG_TERM, f"{tag}-{n}", doc)

    await store.db.write(insert)


async def fts5_top(store: SqliteAgenticStore, scope: LongTermScope, query: str, k: int) -> list[tuple[str, float]]:
    """Today's ranking: FTS5's own, through the store with the mirror out of the way."""
    mirror = store._lexical
    store._lexical = LexicalIndex()  # its totals are not FTS5's: the store lets FTS5 rank
    try:
        return [(doc.id, score) for doc, score in await store.bm25(scope, query, k)]
    finally:
        store._lexical = mirror


async def assert_same_as_fts5(store: SqliteAgenticStore, rng: random.Random, queries: list[str]) -> int:
    """Every query, in several scopes and sizes, ranks as FTS5 does; returns how many the mirror answered."""
    answered = 0
    for query in queries:
        for scope in (
            LongTermScope(ALICE, "c1"),
            LongTermScope(BOB, "c1"),
            LongTermScope(EVE, "c2"),
            LongTermScope(ALICE, "c1", terms=[("namespace.user_id", "u1")]),
            LongTermScope(ALICE, "c1", only_ids={f"a-{n}" for n in range(0, 300, 2)}),
        ):
            k = rng.choice([1, 3, 10, 1000])
            expected = await fts5_top(store, scope, query, k)
            store._lexical.scored = -1
            got = [(doc.id, score) for doc, score in await store.bm25(scope, query, k)]
            answered += store._lexical.scored >= 0
            assert [doc_id for doc_id, _ in got] == [doc_id for doc_id, _ in expected], (query, scope)
            assert np.allclose([s for _, s in got], [s for _, s in expected], rtol=0, atol=1e-6), query
    return answered


def fts5_document_frequencies(c: sqlite3.Connection) -> dict[str, int]:
    c.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.check_vocab USING fts5vocab(main, lt_fts, row)")
    return dict(c.execute("SELECT term, doc FROM temp.check_vocab").fetchall())


async def test_scores_and_top_k_equal_fts5_over_unicode_with_deletes_updates_and_reopening(tmp_path):
    rng = random.Random(26)
    vocabulary = [word(rng) for _ in range(60)] + ["same", "Same", "SAME", "sáme"]
    store = SqliteAgenticStore(tmp_path / "a.sqlite3")
    await store.open(8)
    assert await store.lexical_ready()
    await add(store, ALICE, "c1", [text(rng, vocabulary) for _ in range(300)], "a")
    await add(store, BOB, "c1", [text(rng, vocabulary) for _ in range(60)], "b")  # another owner, same container
    await add(store, EVE, "c2", [text(rng, vocabulary) for _ in range(200)], "e")  # another organisation
    await add(store, ALICE, "c1", ["same words here"] * 12, "tie")  # equal scores: ties by seq, as FTS5
    queries = [" ".join(rng.sample(vocabulary, rng.randint(1, 4))) for _ in range(12)]
    queries += ["same", "SAME here", "here here same", word(rng) + " " + word(rng), "Ünïcödé ΑΒΓ 日本語"]
    answered = await assert_same_as_fts5(store, rng, queries)
    assert answered > len(queries) * 3  # the mirror answered (a word of several FTS5 tokens goes to FTS5)

    # deletes and updates through every path that writes lt_fts, then the same comparison
    await store.delete_ids(ALICE, "c1", LONG_TERM, [f"a-{n}" for n in range(0, 300, 3)])
    await store.delete(EVE, "c2", LONG_TERM, "e-5")
    for n in range(1, 60, 7):
        doc = {"memory": text(rng, vocabulary), "namespace": {"user_id": "u1"}, "namespace_size": 1}
        await store.replace(ALICE, "c1", LONG_TERM, f"a-{n}", doc)
    await add(store, EVE, "c3", [text(rng, vocabulary) for _ in range(50)], "x")
    await store.delete_container(EVE, "c3")
    await assert_same_as_fts5(store, rng, queries)
    mirror = store._lexical
    frequencies = await store.db.run(fts5_document_frequencies)
    assert {w: int(mirror.df[i]) for w, i in mirror.vocabulary.items() if mirror.df[i]} == frequencies
    assert await store.db.read(totals) == (mirror.rows, mirror.tokens)
    await store.close()

    reopened = SqliteAgenticStore(tmp_path / "a.sqlite3")
    await reopened.open(8)  # the mirror builds from a snapshot while these writes commit: they are replayed
    await add(reopened, ALICE, "c1", [text(rng, vocabulary) for _ in range(40)], "late")
    await reopened.delete_ids(ALICE, "c1", LONG_TERM, [f"a-{n}" for n in range(1, 300, 5)])
    assert await reopened.lexical_ready()
    assert await reopened.db.read(totals) == (reopened._lexical.rows, reopened._lexical.tokens)
    assert await assert_same_as_fts5(reopened, rng, queries) > len(queries) * 3
    await reopened.close()


def test_tokenizer_is_fts5s_own_on_unicode():
    """The tokens the mirror indexes are the ones FTS5 indexes in a table with lt_fts's tokenize option."""
    rng = random.Random(7)
    texts = [" ".join(word(rng) for _ in range(rng.randint(0, 8))) for _ in range(300)]
    c = sqlite3.connect(":memory:")
    c.execute(f"CREATE VIRTUAL TABLE t USING fts5 (memory, tokenize = '{TOKENIZE}')")
    c.executemany("INSERT INTO t (rowid, memory) VALUES (?, ?)", enumerate(texts))
    c.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
    expected: list[list[str]] = [[] for _ in texts]
    for doc, _, term in sorted(c.execute("SELECT doc, offset, term FROM v")):
        expected[doc].append(term)
    tokenizer = Tokenizer()
    assert tokenizer.tokens(texts) == expected
    assert tokenizer.tokens(["Ünïcödé ÉCOLE ﬁne"]) == [
        ["unicode", "ecole", "ﬁne"]
    ]  # FTS5 folds case and accents, not ligatures
    assert query_words("a-b c_d é") == ["a", "b", "c", "d", "é"]
    words = query_words(" ".join(texts + ["ABC Zeta42 x9Y Ünï"]))
    assert tokenizer.query_tokens(words) == tokenizer.tokens(words)  # the ASCII shortcut is FTS5's answer
    tokenizer.close()


@pytest.mark.slow
async def test_early_termination_skips_segments_that_cannot_reach_the_top(tmp_path, monkeypatch):
    monkeypatch.setattr(lexical_index, "EVERY_POSTINGS", 0)  # the planner would score these few postings at once
    store = SqliteAgenticStore(tmp_path / "a.sqlite3")
    await store.open(8)
    assert await store.lexical_ready()
    filler = " ".join(f"w{n}" for n in range(12))
    texts = [f"router {filler}" for _ in range(SEGMENT * 8)]
    for n in (5, 3000, 7000):
        texts[n] = "router router router"  # short and dense: these set the bar the rest cannot reach
    await add(store, ALICE, "c1", texts, "a")
    scope = LongTermScope(ALICE, "c1")
    hits = await store.bm25(scope, "router", 3)
    mirror = store._lexical
    assert [doc.id for doc, _ in hits] == ["a-5", "a-3000", "a-7000"]
    assert 0 < mirror.scored <= 6 * SEGMENT < len(texts)  # the three segments holding them, and a few more
    assert [(doc.id, round(s, 9)) for doc, s in hits] == [
        (i, round(s, 9)) for i, s in await fts5_top(store, scope, "router", 3)
    ]
    # brute force over every posting gives the same top k
    everything = mirror.search("c1", owner_key(ALICE), ["router"], len(texts))
    assert mirror.scored == len(texts) and [seq for seq, _ in everything[:3]] == [doc.seq for doc, _ in hits]
    await store.close()


async def test_stopping_a_build_whose_connection_was_just_closed_is_quiet() -> None:
    """The build's thread closes its connection before its task resumes: a close in between must not raise
    (it did: ``Cannot operate on a closed database`` at an app's cleanup)."""
    build = MirrorBuild()
    closed = sqlite3.connect(":memory:")
    closed.close()
    build._connection = closed
    build._task = asyncio.get_running_loop().create_task(asyncio.sleep(0.01, result=True))
    await build.stop()
    assert build._task is None


async def test_a_failed_build_keeps_no_backlog_and_the_store_still_ranks_as_fts5(tmp_path, monkeypatch) -> None:
    """A build that fails (a disk error) left every later write's changes in a backlog nothing would replay:
    memory grew with each write until the process ended.  FTS5 ranks, and the mirror follows new writes."""
    store = SqliteAgenticStore(tmp_path / "a.sqlite3")
    await store.open(8)
    await add(store, ALICE, "c1", ["router table", "switch port", "router port"], "old")
    await store.close()

    def failing(*_args: object) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr("memory_plugin.agentic.stores.fts.load", failing)
    reopened = SqliteAgenticStore(tmp_path / "a.sqlite3")
    await reopened.open(8)
    assert not await reopened.lexical_ready()
    await add(reopened, ALICE, "c1", [f"router cable {n}" for n in range(50)], "new")
    assert reopened._lexical_build.backlog is None
    scope = LongTermScope(ALICE, "c1")
    ranked = [(doc.id, score) for doc, score in await reopened.bm25(scope, "router", 5)]
    assert len(ranked) == 5 and ranked == await fts5_top(reopened, scope, "router", 5)
    # the mirror holds what was written since open, not the rows it never read: FTS5 goes on ranking
    assert reopened._lexical.rows == 50 and await reopened.db.read(totals) != (
        reopened._lexical.rows,
        reopened._lexical.tokens,
    )
    await reopened.close()
