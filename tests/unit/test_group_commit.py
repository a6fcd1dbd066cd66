"""Group commit in the SQLite driver: queued writes share one transaction, and each fails alone."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from memory_plugin.auth import Principal
from memory_plugin.clock import now
from memory_plugin.errors import Unavailable
from memory_plugin.memory.models import Conversation, Interaction
from memory_plugin.memory.stores.sqlite import SqliteMemoryStore
from memory_plugin.sqlite import Database, run_script
from tests.support.polling import PATIENCE


def _schema(connection: sqlite3.Connection) -> None:
    run_script(
        connection,
        """
        CREATE TABLE parents (id INTEGER PRIMARY KEY);
        CREATE TABLE items (
            id INTEGER PRIMARY KEY,
            parent INTEGER REFERENCES parents (id) DEFERRABLE INITIALLY DEFERRED
        );
        """,
    )


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = Database(tmp_path / "group.sqlite3", [_schema])
    await database.open()
    yield database
    await database.close()


async def _held(db: Database) -> tuple[threading.Event, asyncio.Task[None]]:
    """Occupy the database thread until the event is set, so that what is queued meanwhile forms one group."""
    release, started = threading.Event(), threading.Event()

    def hold(_: sqlite3.Connection) -> None:
        started.set()
        release.wait(2 * PATIENCE)

    task = asyncio.create_task(db.run(hold))
    await asyncio.to_thread(started.wait, PATIENCE)
    return release, task


def _insert(item: int, parent: int | None = None) -> Callable[[sqlite3.Connection], int]:
    return lambda c: c.execute("INSERT INTO items VALUES (?, ?)", (item, parent)).rowcount


def _stored(db: Database) -> asyncio.Future[list[int]]:
    return asyncio.ensure_future(db.run(lambda c: [row[0] for row in c.execute("SELECT id FROM items ORDER BY id")]))


async def test_queued_writes_share_one_commit_and_a_failing_one_fails_alone(db: Database) -> None:
    await db.write(_insert(7))  # so that a later insert of 7 breaks the primary key
    statements: list[str] = []
    await db.run(lambda c: c.set_trace_callback(statements.append))
    release, hold = await _held(db)

    def invalid(connection: sqlite3.Connection) -> int:
        connection.execute("INSERT INTO items VALUES (100, NULL)")  # undone with its savepoint
        raise ValueError("refused after writing")

    writes = [db.write(_insert(n)) for n in range(1, 6)]
    writes.insert(2, db.write(_insert(7)))
    writes.insert(4, db.write(invalid))
    tasks = [asyncio.ensure_future(write) for write in writes]
    await asyncio.sleep(0.05)  # let every write reach the queue
    release.set()
    await hold
    results = await asyncio.gather(*tasks, return_exceptions=True)

    assert [type(r).__name__ for r in results] == ["int", "int", "IntegrityError", "int", "ValueError", "int", "int"]
    assert await _stored(db) == [1, 2, 3, 4, 5, 7]
    assert sum(s.startswith("BEGIN") for s in statements) == 1
    assert sum(s == "COMMIT" for s in statements) == 1
    await db.run(lambda c: c.set_trace_callback(None))


async def test_a_failing_commit_fails_every_write_of_its_group(db: Database) -> None:
    """A deferred foreign key is checked at COMMIT: the group is refused whole, and nothing of it is stored."""
    await db.write(_insert(1))
    release, hold = await _held(db)
    tasks = [asyncio.ensure_future(db.write(_insert(n))) for n in (2, 3)]
    tasks.append(asyncio.ensure_future(db.write(_insert(4, parent=999))))
    await asyncio.sleep(0.05)
    release.set()
    await hold
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert all(isinstance(r, sqlite3.IntegrityError) for r in results), results
    assert await _stored(db) == [1]
    assert await db.write(_insert(5)) == 1  # the next group commits as usual
    assert await _stored(db) == [1, 5]


async def test_work_queued_after_close_is_refused(tmp_path: Path) -> None:
    db = Database(tmp_path / "closed.sqlite3", [_schema])
    await db.open()
    await db.close()
    with pytest.raises(RuntimeError, match="not open"):
        await db.write(_insert(1))


async def test_memory_writes_in_one_group_fail_alone(tmp_path: Path) -> None:
    """The SQLite memory store through group commit: a duplicate id and a missing conversation fail
    only their own write; the rest of the group is stored."""
    store = SqliteMemoryStore(tmp_path / "memory.sqlite3")
    await store.open()
    try:
        alice = Principal("org-1", "alice")
        conversation = Conversation("c1", alice, "billing", now(), now())
        await store.add_conversation(conversation)

        def interaction(interaction_id: str, conversation_id: str = "c1") -> Interaction:
            return Interaction(interaction_id, conversation_id, alice, now(), input="q", response="a")

        await store.add_interaction(interaction("taken"))
        release, hold = await _held(store.db)
        ids = ["i1", "taken", "i2", "i3"]
        tasks = [asyncio.ensure_future(store.add_interaction(interaction(i))) for i in ids]
        tasks.insert(3, asyncio.ensure_future(store.add_interaction(interaction("i4", "missing"))))
        await asyncio.sleep(0.05)
        release.set()
        await hold
        results = await asyncio.gather(*tasks, return_exceptions=True)
        assert [r if isinstance(r, bool) else type(r).__name__ for r in results] == [
            True,
            "IntegrityError",
            True,
            False,
            True,
        ]
        listed = await store.list_interactions(alice, "c1", 0, 100, newest_first=False)
        assert listed is not None
        assert [i.interaction_id for i in listed] == ["taken", "i1", "i2", "i3"]
        stored = await store.get_conversation(alice, "c1")
        assert stored is not None and stored.version == 1 + 4  # one bump per stored interaction, none for the failed
    finally:
        await store.close()


async def test_reads_go_on_while_a_group_commits_and_see_only_what_is_committed(db: Database) -> None:
    """The read connection sits beside the writer: a read never waits for a group, and never sees half of one."""
    await db.write(_insert(1))
    inside, release = threading.Event(), threading.Event()

    def slow_write(connection: sqlite3.Connection) -> int:
        connection.execute("INSERT INTO items VALUES (2, NULL)")
        inside.set()
        release.wait(2 * PATIENCE)
        return 2

    writing = asyncio.ensure_future(db.write(slow_write))
    await asyncio.to_thread(inside.wait, PATIENCE)
    # Bounded below the writer's hold: a read that waited for the group would time out here.
    ids = await asyncio.wait_for(db.read(lambda c: [row[0] for row in c.execute("SELECT id FROM items")]), PATIENCE)
    assert ids == [1]  # the writer's thread is busy and its transaction open: the read went on beside it
    release.set()
    assert await writing == 2
    assert await db.read(lambda c: [row[0] for row in c.execute("SELECT id FROM items ORDER BY id")]) == [1, 2]


async def test_a_read_after_an_acknowledged_write_sees_it(db: Database) -> None:
    """Under group commit, with many writers at once: whatever a write's caller reads next includes it."""

    async def write_then_read(item: int) -> bool:
        await db.write(_insert(item))
        found = await db.read(lambda c: c.execute("SELECT count(*) FROM items WHERE id = ?", (item,)).fetchone()[0])
        return bool(found == 1)

    assert all(await asyncio.gather(*(write_then_read(item) for item in range(1, 401))))


async def test_the_read_connection_changes_nothing(db: Database) -> None:
    with pytest.raises(Unavailable) as refused:
        await db.read(_insert(1))
    assert "readonly" in str(refused.value.__cause__)
    assert await _stored(db) == []


async def test_a_worker_threads_own_read_sees_acknowledged_writes_and_changes_nothing(db: Database) -> None:
    """``read_here``: one read-only connection per worker thread, as current as ``read``, closed with the database."""
    ids = lambda c: [row[0] for row in c.execute("SELECT id FROM items ORDER BY id")]  # noqa: E731
    with ThreadPoolExecutor(max_workers=2) as workers:
        for item in range(1, 6):
            await db.write(_insert(item))
            assert await asyncio.wrap_future(workers.submit(db.read_here, ids)) == list(range(1, item + 1))
        with pytest.raises(Unavailable) as refused:
            await asyncio.wrap_future(workers.submit(db.read_here, _insert(9)))
        assert "readonly" in str(refused.value.__cause__)
        assert 1 <= len(db._worker_connections) <= 2  # one per thread that read, kept for the next read
        connections = list(db._worker_connections)
        await db.close()
        for connection in connections:
            with pytest.raises(sqlite3.ProgrammingError):
                connection.execute("SELECT 1")
        with pytest.raises(RuntimeError, match="not open"):
            await asyncio.wrap_future(workers.submit(db.read_here, ids))


async def test_settled_runs_after_the_commit_before_the_caller_hears_and_also_for_a_caller_gone(db: Database) -> None:
    """What caches reads forgets in ``settled``: it must run once the transaction has ended, whatever
    the caller did meanwhile; a cancelled request's write still commits, and must still be forgotten."""
    seen: list[tuple[str, list[int]]] = []

    def settled(name: str) -> Callable[[], None]:
        # The writer's connection is busy on its thread; look through a fresh one, as a reader would.
        def look() -> None:
            with sqlite3.connect(db.path) as connection:
                seen.append((name, [row[0] for row in connection.execute("SELECT id FROM items ORDER BY id")]))

        return look

    async def caller() -> list[str]:
        await db.write(_insert(1), settled=settled("heard"))
        return [name for name, _ in seen]  # what had settled when the caller woke

    release, hold = await _held(db)
    heard = asyncio.ensure_future(caller())
    gone = asyncio.ensure_future(db.write(_insert(2), settled=settled("gone")))
    failed = asyncio.ensure_future(db.write(_insert(1), settled=settled("failed")))  # a duplicate: fails alone
    await asyncio.sleep(0.05)
    gone.cancel()
    release.set()
    await hold
    assert "heard" in await heard, "settled ran before the caller woke"
    assert seen[0] == ("heard", [1, 2]), "and after the COMMIT"
    with pytest.raises(sqlite3.IntegrityError):
        await failed
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert [name for name, _ in seen] == ["heard", "gone", "failed"]
    assert await _stored(db) == [1, 2]


async def test_committed_runs_with_the_result_only_for_writes_that_are_stored(db: Database) -> None:
    """What mirrors the file in memory (the agentic vector matrix) follows it in ``committed``: never for
    a write that failed alone, nor for a group whose COMMIT failed, and also for a caller gone."""
    stored: list[int] = []
    release, hold = await _held(db)
    kept = asyncio.ensure_future(db.write(lambda c: _insert(1)(c) and 1, committed=stored.append))
    gone = asyncio.ensure_future(db.write(lambda c: _insert(2)(c) and 2, committed=stored.append))
    alone = asyncio.ensure_future(db.write(lambda c: _insert(1)(c) and 3, committed=stored.append))  # a duplicate
    await asyncio.sleep(0.05)
    gone.cancel()
    release.set()
    await hold
    assert await kept == 1
    with pytest.raises(sqlite3.IntegrityError):
        await alone
    assert stored == [1, 2]
    release, hold = await _held(db)
    group = [asyncio.ensure_future(db.write(lambda c: _insert(5)(c) and 5, committed=stored.append))]
    group.append(asyncio.ensure_future(db.write(lambda c: _insert(6, parent=999)(c) and 6, committed=stored.append)))
    await asyncio.sleep(0.05)
    release.set()
    await hold
    results = await asyncio.gather(*group, return_exceptions=True)
    assert all(isinstance(r, sqlite3.IntegrityError) for r in results), results
    assert stored == [1, 2] and await _stored(db) == [1, 2]
