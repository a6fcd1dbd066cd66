"""Data files and folders private to the server's user, whatever the umask.

Databases, index snapshots and key files hold tenants' data: folders are
created 0700 and files 0600.  Existing folders and files keep their mode.
"""

from __future__ import annotations

import fcntl
import os
from contextlib import suppress
from pathlib import Path

import numpy as np

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


def make_private_dir(path: Path) -> None:
    """``mkdir -p``, each folder it creates 0700."""
    missing: list[Path] = []
    folder = Path(path)
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=PRIVATE_DIR)
        except FileExistsError:
            continue
        os.chmod(folder, PRIVATE_DIR)  # mkdir's mode is filtered by the umask


def open_private(path: Path, flags: int) -> int:
    """``os.open(path, flags)``, creating the file 0600 if it is missing."""
    try:
        descriptor = os.open(path, flags | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, PRIVATE_FILE)
    except FileExistsError:
        return os.open(path, flags | os.O_CLOEXEC)
    os.fchmod(descriptor, PRIVATE_FILE)  # open's mode is filtered by the umask
    return descriptor


def create_private_file(path: Path) -> None:
    """Create ``path`` empty and 0600 unless it exists (SQLite gives its -wal and -shm files the same mode)."""
    os.close(open_private(path, os.O_RDWR))


def fresh_private_file(path: Path) -> int:
    """A new, empty 0600 file at ``path`` open for writing; a leftover there is removed first."""
    with suppress(FileNotFoundError):
        os.unlink(path)
    return open_private(path, os.O_WRONLY)


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """``arrays`` as a new 0600 ``.npz`` at ``path``, on the disk when this returns (``np.load`` checks each
    member's CRC, so a torn file fails to load rather than loading wrong)."""
    with os.fdopen(fresh_private_file(path), "wb") as file:
        np.savez(file, **arrays)  # type: ignore[arg-type]
        file.flush()
        os.fsync(file.fileno())


def fsync_dir(path: Path) -> None:
    """Make the renames and unlinks in the folder ``path`` durable."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


class InUse(RuntimeError):
    """Another process holds the lock of a data file: one embedded store, one process."""


def lock_exclusively(path: Path) -> int:
    """Hold ``path`` (created 0600) locked for this process until the returned descriptor is closed.

    As Elasticsearch's ``node.lock``: a second server on the same data would keep its own
    index and caches, and never see the first one's writes, so it is refused at once.  The
    lock is the kernel's (``flock``), released however the holder ends, even by SIGKILL; the
    file holds the holder's pid, for the message.
    """
    make_private_dir(path.parent)
    descriptor = open_private(path, os.O_RDWR)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(descriptor, 32, 0).decode("ascii", "replace").strip() or "unknown"
        os.close(descriptor)
        raise InUse(
            f"{path.parent} is in use by another memory-plugin process (pid {holder}): "
            "one process serves an embedded data folder; stop that one, or give this one another --data-dir"
        ) from None
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
    return descriptor
