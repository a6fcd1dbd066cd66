"""The current time and new ids (dates are formatted and parsed in ``dates.py``)."""

from __future__ import annotations

import base64
import hashlib
import itertools
import os
import threading
from datetime import UTC, datetime, timedelta

_lock = threading.Lock()
_last = datetime.min.replace(tzinfo=UTC)


def now() -> datetime:
    """The current UTC instant, strictly later than the previous call's.

    Strictly increasing times keep "newest first" well defined for writes that
    land within the same microsecond.
    """
    global _last
    with _lock:
        current = datetime.now(UTC)
        if current <= _last:
            current = _last + timedelta(microseconds=1)
        _last = current
        return current


#: Random bytes drawn ahead from the system's CSPRNG: one system call per 256 ids, not per id.
_ID_BYTES = 15
_random = b""
_offset = 0


def _forget_drawn_bytes() -> None:
    """In a forked child: the bytes drawn ahead are the parent's, and every worker of ``serve --workers``
    would hand out the same ids from them (their creates then collide), so a child draws its own."""
    global _random, _offset, _lock
    _random, _offset, _lock = b"", 0, threading.Lock()


os.register_at_fork(after_in_child=_forget_drawn_bytes)


def _random_bytes() -> bytes:
    global _random, _offset
    with _lock:
        if _offset + _ID_BYTES > len(_random):
            _random, _offset = os.urandom(_ID_BYTES * 256), 0
        _offset += _ID_BYTES
        return _random[_offset - _ID_BYTES : _offset]


def new_id() -> str:
    """A random URL-safe id of 20 characters, like OpenSearch's auto ids."""
    while True:
        candidate = base64.urlsafe_b64encode(_random_bytes()).decode()
        if candidate[0].isalnum():
            return candidate


def derived_id(*parts: object) -> str:
    """An id of the same shape as ``new_id``'s, the same every time for the same ``parts``: what a piece of
    redelivered work writes, so that doing it twice writes the same documents (and a create-only write
    finds the first)."""
    seed = "\x1f".join(str(part) for part in parts)
    for attempt in itertools.count():
        digest = hashlib.sha256(f"{seed}\x1e{attempt}".encode("utf-8", "surrogatepass")).digest()
        candidate = base64.urlsafe_b64encode(digest[:_ID_BYTES]).decode()
        if candidate[0].isalnum():
            return candidate
    raise AssertionError("unreachable")
