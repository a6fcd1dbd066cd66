"""The lock that keeps an embedded data file to one process (``files.lock_exclusively``)."""

from __future__ import annotations

import os
import stat

import pytest

from memory_plugin.files import InUse, lock_exclusively
from memory_plugin.services import embedded_folders, open_services
from memory_plugin.settings import EmbeddedRegion, OpenSearchRegion, load_settings
from tests.support.fake_embedder import FakeEmbedder


def test_a_held_lock_is_refused_with_the_folder_and_the_holders_pid(tmp_path):
    path = tmp_path / "data" / "memory.sqlite3.lock"
    held = lock_exclusively(path)
    try:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert path.read_text() == f"{os.getpid()}\n"
        with pytest.raises(InUse) as refused:
            lock_exclusively(path)  # another open file: flock refuses it even within one process
        assert str(path.parent) in str(refused.value) and f"pid {os.getpid()}" in str(refused.value)
    finally:
        os.close(held)
    os.close(lock_exclusively(path))  # released with its descriptor


async def test_services_hold_the_data_folder_while_open_and_only_then(tmp_path):
    fake_embedder = FakeEmbedder.with_default_tokenizer()
    settings = load_settings(environ={}, data_dir=tmp_path / "data", bridge={"enabled": False})
    async with open_services(settings, embedder=fake_embedder):
        with pytest.raises(InUse):
            async with open_services(settings, embedder=fake_embedder):
                pass
    async with open_services(settings, embedder=fake_embedder):
        pass


def test_embedded_folders_are_the_data_folder_and_regions_kept_outside_it(tmp_path):
    data_dir = tmp_path / "data"
    inside = load_settings(environ={}, data_dir=data_dir)
    assert embedded_folders(inside) == [data_dir.resolve()]
    outside = inside.replace(regions={**inside.regions, "DEU": EmbeddedRegion(path=tmp_path / "elsewhere" / "deu")})
    assert embedded_folders(outside) == [data_dir.resolve(), (tmp_path / "elsewhere" / "deu").resolve()]
    on_opensearch = inside.replace(regions={name: OpenSearchRegion() for name in inside.regions})
    assert embedded_folders(on_opensearch) == [], "all on OpenSearch: any number of processes"
