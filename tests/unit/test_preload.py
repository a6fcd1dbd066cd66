"""Preloading memory maps: every page of a file's maps is resident after it, the database's read-only
connections are filled as they open, and a file too large or a call the kernel lacks changes nothing."""

from __future__ import annotations

import errno
import mmap
import os
import sqlite3
import time
from pathlib import Path

import pytest

from memory_plugin import preload
from memory_plugin.sqlite import Database, run_script

PAGE = mmap.PAGESIZE


def resident(path: Path) -> list[tuple[int, int]]:
    """``(bytes mapped, bytes resident)`` of each memory map of ``path`` in this process (``/proc/self/smaps``)."""
    target, found, size = os.path.realpath(path), [], None
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        if "-" in fields[0] and len(fields) >= 5 and not fields[0].endswith(":"):
            start, end = (int(bound, 16) for bound in fields[0].split("-"))
            size = end - start if len(fields) == 6 and fields[5] == target else None
        elif fields[0] == "Rss:" and size is not None:
            found.append((size, int(fields[1]) * 1024))
    return found


def populate_supported(path: Path) -> bool:
    """Whether this kernel has MADV_POPULATE_READ (Linux 5.14): where it lacks it, preloading is a no-op."""
    with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, prot=mmap.PROT_READ) as probe:
        try:
            probe.madvise(preload.MADV_POPULATE_READ, 0, PAGE)
        except OSError as error:
            assert error.errno == errno.EINVAL
            return False
    return True


#: Pages of the test file: many more than one fault maps at once (16 pages of fault-around, or a whole
#: large folio of up to 2 MB, as a kernel with large page-cache folios maps when it has one to spare).
PAGES = 4096


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "data.bin"
    path.write_bytes(os.urandom(PAGES * PAGE))
    return path


def test_every_page_of_a_files_maps_is_resident_after_a_preload(data_file: Path) -> None:
    with open(data_file, "rb") as file, mmap.mmap(file.fileno(), 0, prot=mmap.PROT_READ) as mapped:
        _ = mapped[PAGE * 7]  # one page read: the map is there, nearly all of it not yet
        (before,) = resident(data_file)
        assert before[1] < before[0]
        filled = preload.preload(data_file)
        if not populate_supported(data_file):
            assert filled == 0 and resident(data_file) == [before]
            return
        assert filled == before[0] == PAGES * PAGE
        assert resident(data_file) == [(PAGES * PAGE, PAGES * PAGE)]


def test_a_file_larger_than_half_the_memory_is_left_alone(data_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with open(data_file, "rb") as file, mmap.mmap(file.fileno(), 0, prot=mmap.PROT_READ) as mapped:
        _ = mapped[0]
        before = resident(data_file)
        real = os.sysconf
        monkeypatch.setattr(os, "sysconf", lambda name: 400 if name == "SC_PHYS_PAGES" else real(name))
        assert preload.preload(data_file) == 0  # PAGES > 400 / 2
        assert resident(data_file) == before


def test_nothing_to_preload_is_no_error(tmp_path: Path, data_file: Path) -> None:
    assert preload.preload(data_file) == 0  # not mapped here
    assert preload.preload(tmp_path / "absent.bin") == 0


def _schema(connection: sqlite3.Connection) -> None:
    run_script(connection, "CREATE TABLE items (id INTEGER PRIMARY KEY, body TEXT NOT NULL);")


async def test_the_databases_read_only_connections_are_filled_as_they_open(tmp_path: Path) -> None:
    path = tmp_path / "items.sqlite3"
    database = Database(path, [_schema])
    await database.open()
    try:
        await database.write(lambda c: c.executemany("INSERT INTO items (body) VALUES (?)", [("x" * 2000,)] * 2000))
        await database.close()
        assert path.stat().st_size > 1000 * PAGE
        await database.open()  # the reader's connection maps the file anew and fills it, in the background
        maps = resident(path)
        assert len(maps) == 1
        supported, deadline = populate_supported(path), time.monotonic() + 30
        while supported and maps[0][1] < maps[0][0] and time.monotonic() < deadline:
            time.sleep(0.01)
            maps = resident(path)
        if supported:
            assert maps[0][1] == maps[0][0] >= path.stat().st_size - PAGE
        assert await database.read(lambda c: c.execute("SELECT count(*) FROM items").fetchone()[0]) == 2000
    finally:
        await database.close()


def test_only_files_of_a_megabyte_or_more_are_preloaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new database's few pages are not worth a thread reading this process's maps: an app opens seven."""
    started: list[Path] = []

    class Recorded:
        def __init__(self, target: object, args: tuple[Path], name: str, daemon: bool) -> None:
            self.path = args[0]

        def start(self) -> None:
            started.append(self.path)

    monkeypatch.setattr(preload.threading, "Thread", Recorded)
    small, large = tmp_path / "small.sqlite3", tmp_path / "large.sqlite3"
    small.write_bytes(b"x" * (preload.MIN_BYTES - 1))
    large.write_bytes(b"x" * preload.MIN_BYTES)
    for path in (small, large, tmp_path / "absent.sqlite3"):
        preload.preload_in_background(path)
    assert started == [large]
