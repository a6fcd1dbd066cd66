"""What the ml service is given: its settings and the embedder it shares with the server."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from memory_plugin.settings import MLSection


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

    @classmethod
    def of(cls, section: MLSection, *, built_in_names: tuple[str, ...], node_name: str) -> MLSettings:
        """``[ml]``, with what the process adds: the built-in model's names and the node's."""
        return cls(
            trusted_endpoints=section.trusted_endpoints_regex,
            allow_private_addresses=section.allow_private_addresses,
            timeout=section.connector_timeout,
            calls_per_minute=section.org_calls_per_minute,
            concurrent_calls=section.org_concurrent_calls,
            built_in_names=built_in_names,
            node_name=node_name,
        )


def now_millis() -> int:
    return int(time.time() * 1000)
