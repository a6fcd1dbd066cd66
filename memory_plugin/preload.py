"""Fill a file's memory maps in the background, as OpenSearch's ``index.store.preload`` and PostgreSQL's
``pg_prewarm`` do, so that a search's first reads after a restart cost no page faults.

The embedded stores read SQLite through memory maps, each read-only connection its own.  A page is
mapped at its first read: 5-14 µs a page on the 2-core AMD EPYC VM when the file is in the page cache,
about 0.2 ms when it must come from the disk.  At 1M chunks a search's ten hits touched 10-20 pages
not yet mapped (``scripts/bench_search.py``), so a fresh process, or one that serves few searches,
spent 0.1-0.3 ms a search on faults for hours.  ``MADV_POPULATE_READ`` (Linux 5.14) maps every page of a
mapping in one call: 2.1 GB in 0.14-0.2 s from the page cache, and in sequence from the disk otherwise.

Nothing depends on it: where the call is missing (another system, an older kernel) or a map went away
meanwhile, pages are mapped at first read as before.  A file larger than half the machine's memory is
left alone, so that filling it cannot push the rest out of memory; one under :data:`MIN_BYTES` too, whose
few pages fault in within a few milliseconds at most, less than reading this process's maps to find them.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: ``madvise`` advice that faults every page of a range in, readable (linux/mman.h).
MADV_POPULATE_READ = 22
_MAPS = Path("/proc/self/maps")
#: Files smaller are not preloaded: 256 pages (4 KB ones) fault in within 1.3-3.6 ms in all, once.
MIN_BYTES = 1 << 20


def preload_in_background(path: Path) -> None:
    """Fill every memory map of ``path`` in this process, on a thread of its own."""
    try:
        small = path.stat().st_size < MIN_BYTES
    except OSError:
        return
    if _MAPS.exists() and not small:
        threading.Thread(target=preload, args=(path,), name="preload", daemon=True).start()


def preload(path: Path) -> int:
    """Fill every memory map of ``path`` in this process now; the bytes filled."""
    try:
        if path.stat().st_size > os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2:
            return 0
        ranges = mapped_ranges(path)
    except (OSError, ValueError):
        return 0
    started, filled = time.perf_counter(), 0
    for start, end in ranges:
        if _madvise(start, end - start, MADV_POPULATE_READ) == 0:
            filled += end - start
    log.debug("preloaded %d MB of %s in %.2f s", filled >> 20, path, time.perf_counter() - started)
    return filled


def mapped_ranges(path: Path) -> list[tuple[int, int]]:
    """``(start, end)`` of each memory map of ``path`` in this process."""
    target = os.path.realpath(path)
    ranges = []
    for line in _MAPS.read_text().splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5] == target:
            start, end = fields[0].split("-")
            ranges.append((int(start, 16), int(end, 16)))
    return ranges


def _madvise(start: int, length: int, advice: int) -> int:
    madvise = _libc_madvise()
    return -1 if madvise is None else int(madvise(start, length, advice))


@functools.cache
def _libc_madvise() -> Any:
    """The C library's ``madvise``, or None where there is none to call."""
    try:
        madvise = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    madvise.restype = ctypes.c_int
    return madvise
