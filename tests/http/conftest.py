"""In-process HTTP tests: the deterministic embedder double unless a test is about search quality.

A module marked ``pytest.mark.model`` (ranking across languages, scores,
what the bridge makes findable) gets the real default model instead.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from embedder import Embedder
from tests.support.fake_embedder import FakeEmbedder

#: The xdist group of the tests that need the real model.
REAL_MODEL = "real-model"


@pytest.fixture(scope="session")
def fake_embedder() -> FakeEmbedder:
    return FakeEmbedder.with_default_tokenizer()


@pytest.fixture
def embedder(request: pytest.FixtureRequest, fake_embedder: FakeEmbedder) -> Embedder | FakeEmbedder:
    if request.node.get_closest_marker("model") is not None:
        real: Embedder = request.getfixturevalue("real_embedder")
        return real
    return fake_embedder


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Iterator[None]:
    """Under ``-n 2 --dist loadgroup`` (``make check``) the tests that need the real model share one worker,
    which loads it once; the other worker never does.

    xdist (3.8) passes a test's group to the scheduler as a suffix of its id, ``...@real-model``, which it
    writes to ``_nodeid``; pytest 9.2's ids are structured and no longer read that attribute, so the groups
    were silently lost (pytest-xdist#1386).  After xdist's hook the suffix goes where pytest reads it."""
    model = [item for item in items if item.get_closest_marker("model") is not None]
    for item in model:
        item.add_marker(pytest.mark.xdist_group(REAL_MODEL))
    yield
    if getattr(config.option, "loadgroup", False):  # set on xdist's workers only
        for item in model:
            if not item.nodeid.endswith("@" + REAL_MODEL):
                item._id = type(item._id).parse(f"{item.nodeid}@{REAL_MODEL}")  # type: ignore[attr-defined]
