"""In-process HTTP tests: the deterministic embedder double unless a test is about search quality.

A module marked ``pytest.mark.model`` (ranking across languages, scores,
what the bridge makes findable) gets the real default model instead.
"""

from __future__ import annotations

import pytest

from embedder import Embedder
from tests.support.fake_embedder import FakeEmbedder


@pytest.fixture(scope="session")
def fake_embedder() -> FakeEmbedder:
    return FakeEmbedder.with_default_tokenizer()


@pytest.fixture
def embedder(request: pytest.FixtureRequest, fake_embedder: FakeEmbedder) -> Embedder | FakeEmbedder:
    if request.node.get_closest_marker("model") is not None:
        real: Embedder = request.getfixturevalue("real_embedder")
        return real
    return fake_embedder
