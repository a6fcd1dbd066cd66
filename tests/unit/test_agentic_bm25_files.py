"""The BM25 mirror saved at close (``bm25_files``): loaded at the next open instead of built, and ranking as FTS5
does; never loaded once a write has moved SQLite past it (a crash after writes), nor when its file is torn."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from memory_plugin.agentic.models import LONG_TERM
from memory_plugin.agentic.stores import fts
from memory_plugin.agentic.stores.base import LongTermScope
from memory_plugin.agentic.stores.bm25_files import mirror_file
from memory_plugin.agentic.stores.fts import totals
from memory_plugin.agentic.stores.sqlite import SqliteAgenticStore
from tests.unit.test_agentic_bm25 import (
    ALICE,
    BOB,
    EVE,
    add,
    assert_same_as_fts5,
    fts5_document_frequencies,
    text,
    word,
)


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every build of a mirror from FTS5's postings, counted."""
    counted: list[int] = []
    build = fts._load

    def counting(*args):  # type: ignore[no-untyped-def]
        counted.append(1)
        return build(*args)

    monkeypatch.setattr(fts, "_load", counting)
    return counted


async def opened(path: Path) -> SqliteAgenticStore:
    store = SqliteAgenticStore(path)
    await store.open(8)
    assert await store.lexical_ready()
    return store


async def filled(path: Path, rng: random.Random, vocabulary: list[str]) -> SqliteAgenticStore:
    """A store whose mirror has frozen segments, pending docs, dead ordinals, several owners and containers."""
    store = await opened(path)
    await add(store, ALICE, "c1", [text(rng, vocabulary) for _ in range(1500)], "a")
    await add(store, BOB, "c1", [text(rng, vocabulary) for _ in range(60)], "b")
    await add(store, EVE, "c2", [text(rng, vocabulary) for _ in range(200)], "e")
    await store.delete_ids(ALICE, "c1", LONG_TERM, [f"a-{n}" for n in range(0, 300, 3)])
    for n in range(1, 60, 7):
        doc = {"memory": text(rng, vocabulary), "namespace": {"user_id": "u1"}, "namespace_size": 1}
        await store.replace(ALICE, "c1", LONG_TERM, f"a-{n}", doc)
    return store


async def assert_mirror_is_fts5s(store: SqliteAgenticStore, rng: random.Random, queries: list[str]) -> None:
    assert await assert_same_as_fts5(store, rng, queries) > len(queries) * 3  # the mirror answered
    mirror = store._lexical
    frequencies = await store.db.run(fts5_document_frequencies)
    assert {w: int(mirror.df[i]) for w, i in mirror.vocabulary.items() if mirror.df[i]} == frequencies
    assert await store.db.read(totals) == (mirror.rows, mirror.tokens)


def corpus(seed: int) -> tuple[random.Random, list[str], list[str]]:
    rng = random.Random(seed)
    vocabulary = [word(rng) for _ in range(60)] + ["same", "Same", "sáme"]
    queries = [" ".join(rng.sample(vocabulary, rng.randint(1, 4))) for _ in range(10)] + ["same here"]
    return rng, vocabulary, queries


async def test_a_clean_close_saves_the_mirror_and_the_next_open_loads_it_instead_of_building(tmp_path, builds):
    rng, vocabulary, queries = corpus(31)
    store = await filled(tmp_path / "a.sqlite3", rng, vocabulary)
    built = store._lexical
    await store.close()
    assert mirror_file(tmp_path / "a.sqlite3").exists() and len(builds) == 1

    reopened = await opened(tmp_path / "a.sqlite3")
    assert len(builds) == 1  # loaded, not built
    restored = reopened._lexical
    assert restored.mark == built.mark != 0  # 0: no write yet
    assert restored.where.keys() == built.where.keys()
    assert {c: (s.n, s.dead, len(s.state[0]), len(s.state[1])) for c, s in restored.shards.items()} == {
        c: (s.n, s.dead, len(s.state[0]), len(s.state[1])) for c, s in built.shards.items()
    }
    await assert_mirror_is_fts5s(reopened, rng, queries)
    # it goes on following writes: new words, a segment frozen from its saved pending docs, deletes
    await add(reopened, ALICE, "c1", [text(rng, vocabulary) + " " + word(rng) for _ in range(700)], "late")
    await reopened.delete_ids(ALICE, "c1", LONG_TERM, [f"a-{n}" for n in range(1, 600, 4)])
    await add(reopened, EVE, "c9", ["a container of its own"], "new")
    await assert_mirror_is_fts5s(reopened, rng, queries + ["container own"])
    await reopened.close()
    assert len(builds) == 1


async def test_a_mirror_saved_before_later_writes_is_built_again(tmp_path, builds):
    """A crash after writes: the file holds an older moment than SQLite, so it is not loaded."""
    rng, vocabulary, queries = corpus(32)
    store = await filled(tmp_path / "a.sqlite3", rng, vocabulary)
    await store.close()
    crashed = await opened(tmp_path / "a.sqlite3")
    await add(crashed, ALICE, "c1", ["written after the save"] * 3, "after")
    await crashed.replace(ALICE, "c1", LONG_TERM, "a-2", {"memory": "same length text", "namespace_size": 0})
    await crashed.db.close()  # no clean close: the saved mirror is the one from before these writes
    await crashed._lexical_build.stop()

    reopened = await opened(tmp_path / "a.sqlite3")
    assert len(builds) == 2  # the first open's build and this one
    await assert_mirror_is_fts5s(reopened, rng, queries + ["written after", "length"])
    await reopened.close()


async def test_a_torn_mirror_file_is_built_again(tmp_path, builds, caplog):
    rng, vocabulary, queries = corpus(33)
    store = await filled(tmp_path / "a.sqlite3", rng, vocabulary)
    await store.close()
    file = mirror_file(tmp_path / "a.sqlite3")
    file.write_bytes(file.read_bytes()[: file.stat().st_size // 2])

    reopened = await opened(tmp_path / "a.sqlite3")
    assert len(builds) == 2
    assert "unreadable" in caplog.text
    await assert_mirror_is_fts5s(reopened, rng, queries)
    await reopened.close()
    assert file.stat().st_size > 0  # saved whole again at this close


async def test_a_database_restored_from_a_backup_and_written_again_does_not_load_a_later_mirror(tmp_path, builds):
    """The later mirror and the restored database have had as many writes since the backup, and the same row
    and token counts: only the marks, drawn at random by each write, tell them apart."""
    rng, vocabulary, queries = corpus(34)
    path, backup = tmp_path / "a.sqlite3", tmp_path / "backup.sqlite3"
    store = await filled(path, rng, vocabulary)
    await store.close()
    with sqlite3.connect(path) as source, sqlite3.connect(backup) as copy:
        source.backup(copy)
    later = await opened(path)
    await add(later, ALICE, "c1", ["alpha beta"], "x")
    await later.close()  # saves the mirror holding "alpha beta"
    with sqlite3.connect(backup) as source, sqlite3.connect(path) as restored:
        source.backup(restored)
    other = await opened(path)
    await add(other, ALICE, "c1", ["gamma delta"], "x")  # the same rows and tokens, other words
    await other.db.close()  # a crash: this mirror is not saved
    await other._lexical_build.stop()
    builds.clear()

    reopened = await opened(path)
    assert len(builds) == 1  # "alpha beta"'s mirror was not loaded
    assert [doc.id for doc, _ in await reopened.bm25(LongTermScope(ALICE, "c1"), "gamma", 10)] == ["x-0"]
    await assert_mirror_is_fts5s(reopened, rng, queries + ["alpha", "gamma delta"])
    await reopened.close()
