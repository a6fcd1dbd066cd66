"""What the ml service is given: its settings and the embedder it shares with the server."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np


class Embeddings(Protocol):
    """The server's batched embedder (``embedder.AsyncEmbedder``)."""

    @property
    def dimension(self) -> int: ...

    async def passages(self, texts: Sequence[str], *, tenant: Any = None) -> np.ndarray: ...


@dataclass(frozen=True)
class MLSettings:
    trusted_endpoints: tuple[str, ...]
    allow_private_addresses: bool
    timeout: float
    #: Per organisation (in every process, with the stores on OpenSearch): remote calls a minute, and at once
    #: (0: no limit).
    calls_per_minute: int
    concurrent_calls: int
    #: The names the built-in model registers under (its own, and ``BUILT_IN``).
    built_in_names: tuple[str, ...]
    node_name: str


def now_millis() -> int:
    return int(time.time() * 1000)
