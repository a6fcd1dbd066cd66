"""``lt_fts``, the FTS5 table of long-term memory text, and what the in-memory BM25 mirror (``bm25``) needs of it.

* Every write of ``lt_fts`` goes through ``fts_put`` / ``fts_delete``, which also log the row's seq in a temp
  table of the writer's connection.  ``drain`` reads that log at the end of each write, inside its transaction,
  so a rolled-back write leaves no trace and a committed one hands the mirror exactly what it changed.
* ``Tokenizer`` asks FTS5 itself (a private in-memory FTS5 table with the same ``tokenize`` option) for
  tokens, so the mirror never depends on a second tokenizer agreeing with unicode61.
* ``load`` reads the mirror at open in one snapshot: the one saved at the last clean close (``bm25_files``)
  when ``drain``'s mark of the last change says it is SQLite's now, else built from the table's own postings
  (``fts5vocab``).
* ``totals`` reads FTS5's row and token counts: a search uses the mirror only when they are the mirror's, and
  otherwise lets FTS5 rank (``fts_ranked``), so a write that bypassed the log costs speed, never correctness.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Callable, Generator, Iterable, Sequence
from pathlib import Path
from typing import TypeVar

from memory_plugin.agentic.models import LONG_TERM, valid_unicode
from memory_plugin.agentic.stores.bm25 import Change, LexicalIndex
from memory_plugin.agentic.stores.bm25_files import load_mirror, mirror_file
from memory_plugin.lexical_index import Fts5Tokenizer, bulk
from memory_plugin.sqlite import Database, Migration, fts5_totals

T = TypeVar("T")
log = logging.getLogger(__name__)

#: ``lt_fts``'s tokenize option (schema v1); the tokenizer and the mirror use the same.
TOKENIZE = "unicode61 remove_diacritics 2"
CHANGED_LOG = "CREATE TEMP TABLE IF NOT EXISTS lt_changed (seq INTEGER PRIMARY KEY)"
_LOG = "INSERT OR IGNORE INTO temp.lt_changed VALUES (?)"
#: The ``counters`` row of ``drain``'s marks (schema v2).
MARK = "lt_fts"
#: Query words beyond this many are ignored (as ``fts_query`` always did).
MAX_WORDS = 256


def fts_put(c: sqlite3.Connection, seq: int, text: str, *, new: bool) -> None:
    """Index a long-term doc's text (``new``) or replace it."""
    if new:
        c.execute("INSERT INTO lt_fts (rowid, memory) VALUES (?, ?)", (seq, valid_unicode(text)))
    else:
        c.execute("UPDATE lt_fts SET memory = ? WHERE rowid = ?", (valid_unicode(text), seq))
    c.execute(_LOG, (seq,))


def fts_delete(c: sqlite3.Connection, seqs: Iterable[int]) -> None:
    rows = [(seq,) for seq in seqs]
    c.executemany("DELETE FROM lt_fts WHERE rowid = ?", rows)
    c.executemany(_LOG, rows)


def query_words(text: str) -> list[str]:
    """Free text's words (no operators), distinct, as FTS5 phrases: any of them may match, as ``match`` does."""
    words = "".join(ch if ch.isalnum() else " " for ch in text).split()
    return [valid_unicode(word) for word in dict.fromkeys(words[:MAX_WORDS])]


def fts_query(text: str) -> str | None:
    """Free text as an FTS5 query: every word quoted, OR-ed."""
    words = query_words(text)
    return " OR ".join(f'"{word}"' for word in words) if words else None


class Tokenizer(Fts5Tokenizer):
    """FTS5's tokens for texts under ``lt_fts``'s option (any thread; one at a time)."""

    def __init__(self) -> None:
        super().__init__(TOKENIZE)

    def tokens(self, texts: Sequence[str]) -> list[list[str]]:
        return super().tokens([valid_unicode(text) for text in texts])

    def query_tokens(self, words: Sequence[str]) -> list[list[str]]:
        """``query_words``' tokens: an ASCII one is letters and digits only, which unicode61 keeps whole and
        only lower-cases; any other asks FTS5."""
        asked = [word for word in words if not word.isascii()]
        answers = iter(self.tokens(asked) if asked else [])
        return [[word.lower()] if word.isascii() else next(answers) for word in words]


def drain(c: sqlite3.Connection, tokenizer: Tokenizer) -> tuple[list[Change], int]:
    """The ``lt_fts`` rows this write changed, as they are now, and the mark of the change (inside the write's
    transaction: a random number drawn anew by every write that changes ``lt_fts``, so that a saved mirror
    matches its moment and no other, whatever happened to the file since)."""
    seqs = [row[0] for row in c.execute("SELECT seq FROM temp.lt_changed")]
    if not seqs:
        return [], 0
    c.execute("DELETE FROM temp.lt_changed")
    (mark,) = c.execute(f"UPDATE counters SET value = random() WHERE name = '{MARK}' RETURNING value").fetchone()
    found: dict[int, tuple[str, str | None, tuple[str, str] | None]] = {}
    for start in range(0, len(seqs), 500):
        part = seqs[start : start + 500]
        rows = c.execute(
            "SELECT f.rowid, f.memory, m.container_id, m.organization_id, m.user_id FROM lt_fts f "
            f"LEFT JOIN memories m ON m.seq = f.rowid AND m.memory_type = ? WHERE f.rowid IN ({','.join('?' * len(part))})",
            (LONG_TERM, *part),
        )
        for seq, text, container_id, organization, user in rows:
            found[seq] = (text, container_id, None if container_id is None else (organization, user))
    present = [seq for seq in seqs if seq in found]
    tokens = dict(zip(present, tokenizer.tokens([found[seq][0] for seq in present])))
    changes = [
        Change(seq, tokens[seq], found[seq][1], found[seq][2]) if seq in found else Change(seq, None) for seq in seqs
    ]
    return changes, int(mark)


def fts_mark(c: sqlite3.Connection) -> int:
    """The mark of the last committed write that changed ``lt_fts`` (``drain``)."""
    return int(c.execute(f"SELECT value FROM counters WHERE name = '{MARK}'").fetchone()[0])


def totals(c: sqlite3.Connection) -> tuple[int, int]:
    """FTS5's own (rows, tokens) of ``lt_fts``: its averages record, which its ``bm25()`` divides."""
    return fts5_totals(c, "lt_fts")


def fts_ranked(
    c: sqlite3.Connection, match: str, allowed: set[int] | None
) -> Generator[list[tuple[int, float]], None, None]:
    """FTS5's ranking of every match, in batches, restricted to ``allowed``: the caller hydrates until it has k."""
    cursor = c.execute("SELECT rowid, -rank FROM lt_fts WHERE lt_fts MATCH ? ORDER BY rank", (match,))
    try:
        while rows := cursor.fetchmany(256):
            yield [(int(seq), float(score)) for seq, score in rows if allowed is None or seq in allowed]
    finally:
        cursor.close()


def start_log(c: sqlite3.Connection) -> None:
    """The writer's change log, empty (a temp table: it lives as long as the connection)."""
    c.execute(CHANGED_LOG)
    c.execute("DELETE FROM temp.lt_changed")


def load(path: Path, opened: Callable[[sqlite3.Connection], None]) -> LexicalIndex:
    """The mirror of ``lt_fts`` as committed now, on a connection of its own (handed to ``opened``, which may
    interrupt it), in one read transaction, so one snapshot: the mirror saved at the last close if it is of
    this very moment (``bm25_files``), else built from FTS5's postings."""
    c = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        opened(c)
        c.execute("BEGIN")
        try:
            mark = fts_mark(c)
            saved = load_mirror(mirror_file(path), mark, *totals(c))
            return saved if saved is not None else _load(c, mark)
        finally:
            c.execute("COMMIT")
    finally:
        c.close()


def _load(c: sqlite3.Connection, mark: int) -> LexicalIndex:
    owners = c.execute(
        "SELECT seq, container_id, organization_id, user_id FROM memories WHERE memory_type = ? ORDER BY seq",
        (LONG_TERM,),
    ).fetchall()
    index = bulk(c, "lt_fts", ((seq, container, (org, user)) for seq, container, org, user in owners))
    index.mark = mark
    return index


class LoggedDatabase(Database):
    """The agentic file: every write also drains the ``lt_fts`` change log, and once it is committed hands the
    changes to ``mirror`` (on the event loop, before the write's own ``committed`` hook)."""

    def __init__(
        self, path: Path, migrations: Sequence[Migration], mirror: Callable[[list[Change], int], None]
    ) -> None:
        super().__init__(path, migrations)
        self.tokenizer = Tokenizer()
        self._mirror = mirror

    async def write(
        self,
        work: Callable[[sqlite3.Connection], T],
        *,
        settled: Callable[[], None] | None = None,
        committed: Callable[[T], None] | None = None,
    ) -> T:
        def logged(c: sqlite3.Connection) -> tuple[T, tuple[list[Change], int]]:
            result = work(c)
            return result, drain(c, self.tokenizer)

        def mirrored(outcome: tuple[T, tuple[list[Change], int]]) -> None:
            result, (changes, mark) = outcome
            if changes:
                self._mirror(changes, mark)
            if committed is not None:
                committed(result)

        result, _ = await super().write(logged, settled=settled, committed=mirrored)
        return result


class MirrorBuild:
    """The BM25 mirror's build at open, beside the store's threads: FTS5 ranks meanwhile.  Writes that commit
    meanwhile are kept and replayed on the built mirror; each change is a row's whole state, so replaying one
    the snapshot already holds changes nothing."""

    def __init__(self) -> None:
        self.backlog: list[Change] | None = None
        self._backlog_mark: int | None = None
        #: The mirror was built (or loaded) and follows every write since: it may be saved at close.
        self.done = False
        self._task: asyncio.Task[bool] | None = None
        self._connection: sqlite3.Connection | None = None

    def keep(self, changes: list[Change], mark: int) -> bool:
        """Keep committed changes for the mirror being built: whether it is still being built."""
        if self.backlog is None:
            return False
        self.backlog.extend(changes)
        self._backlog_mark = mark
        return True

    def start(self, path: Path, built: Callable[[LexicalIndex], None]) -> None:
        self.backlog, self._backlog_mark, self.done = [], None, False
        self._task = asyncio.get_running_loop().create_task(self._build(path, built))

    async def _build(self, path: Path, built: Callable[[LexicalIndex], None]) -> bool:
        try:
            index = await asyncio.to_thread(load, path, self._opened)
        except BaseException as error:
            # No built mirror will replay them: writes stop keeping their changes (they grew without end),
            # and the store's own mirror follows them from now on.
            stopped, self.backlog = self.backlog is None, None
            if not isinstance(error, sqlite3.Error):
                raise
            if not stopped:
                log.error("the BM25 mirror of %s was not built (%s): FTS5 ranks every search", path, error)
            return False
        finally:
            self._connection = None
        backlog, self.backlog = self.backlog or [], None
        index.apply(backlog, self._backlog_mark)
        built(index)
        self.done = True
        return True

    def _opened(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    async def wait(self) -> bool:
        return await asyncio.shield(self._task) if self._task is not None else False

    async def stop(self) -> None:
        if self._task is not None and not self._task.done():
            connection, self.backlog = self._connection, None
            if connection is not None:
                # The build's thread may have just closed it (its task has not resumed yet): nothing to stop.
                with contextlib.suppress(sqlite3.ProgrammingError):
                    connection.interrupt()
            await asyncio.wait([self._task])
        self._task, self.backlog, self.done = None, None, False
