"""Values kept with the version of the data they were computed from: OpenSearch's request cache and
Lucene's query cache in miniature.

An entry is served only at the version it was made at, so a write that moves
the version retires it, and correctness never rests on the cache.  The caller
takes the version *before* it computes (a write landing in between then only
retires the entry early).  Least recently used entries go first once their
costs pass ``max_bytes``; a value costing over an ``entry_share`` of that is
never kept.  Safe to call from several threads.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class VersionedCache(Generic[V]):
    def __init__(self, max_bytes: int, *, entry_share: int = 8) -> None:
        #: May be raised or lowered at any time; the next ``put`` keeps within it.
        self.max_bytes = max_bytes
        self.entry_share = entry_share
        self.size = 0
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, tuple[int, V, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable, version: int | None) -> V | None:
        if version is None:
            return None
        with self._lock:
            found = self._entries.get(key)
            if found is None or found[0] != version:
                return None
            self._entries.move_to_end(key)
            return found[1]

    def put(self, key: Hashable, version: int | None, value: V, cost: int) -> None:
        """Keep ``value`` for ``key`` at ``version``, costing ``cost`` bytes (an estimate is enough)."""
        if version is None or cost > self.max_bytes // self.entry_share:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.size -= old[2]
            self._entries[key] = (version, value, cost)
            self.size += cost
            while self.size > self.max_bytes:
                _, (_, _, dropped) = self._entries.popitem(last=False)
                self.size -= dropped
