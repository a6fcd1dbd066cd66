"""The key store interface (``auth.KeyBackend``): the snapshot every check reads, its bound, one read for
many requests, failing closed; the keys file behind it and the CLI over it; choosing the store."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from memory_plugin import auth
from memory_plugin.auth import KeyBackend, KeyEntry, KeyStore, Principal, new_key
from memory_plugin.auth_opensearch import OpenSearchKeyStore, open_key_store
from memory_plugin.cli import main
from memory_plugin.errors import Unauthorized, Unavailable
from memory_plugin.settings import OpenSearchRegion, load_settings


class SlowKeys(KeyBackend):
    """Keys held in memory whose every read takes ``delay`` seconds, and can be made to fail: a double for
    checking the shared logic (the real stores are tested below and on a real OpenSearch node)."""

    def __init__(self, delay: float = 0.05) -> None:
        super().__init__()
        self.keys: dict[str, KeyEntry] = {}
        self.delay = delay
        self.reads = 0
        self.failing = False

    def create(self, organization_id: str, user_id: str | None = None) -> tuple[KeyEntry, str]:
        entry, token = new_key(organization_id, user_id)
        self.keys = {**self.keys, entry.key_id: entry}
        return entry, token

    def revoke(self, key_id: str) -> bool:
        self.keys = {**self.keys, key_id: dataclasses.replace(self.keys[key_id], revoked=True)}
        return True

    def entries(self) -> list[KeyEntry]:
        return list(self.keys.values())

    async def read(self) -> Mapping[str, KeyEntry]:
        self.reads += 1
        await asyncio.sleep(self.delay)
        if self.failing:
            raise ConnectionError("the cluster is away")
        return dict(self.keys)


@pytest.fixture(autouse=True)
def patient_snapshots(monkeypatch: pytest.MonkeyPatch) -> None:
    """The snapshot's ages scaled up, in the same order: a loaded machine's slow requests do not age it
    past one by accident (50 refused keys took longer than the real 0.1 s); the tests age it on purpose."""
    monkeypatch.setattr(auth, "REREAD_REFUSED_AFTER", 10.0)
    monkeypatch.setattr(auth, "REFRESH_AFTER", 50.0)
    monkeypatch.setattr(auth, "MAX_AGE", 100.0)


async def test_a_fresh_snapshot_answers_without_reading_and_a_stale_one_is_read_once_for_everyone() -> None:
    keys = SlowKeys()
    _, token = keys.create("org-1", "alice")
    await keys.open()
    assert keys.reads == 1, "read at start: keys that cannot be read stop the server there"
    for _ in range(20):
        assert await keys.authenticate(f"Bearer {token}") == Principal("org-1", "alice")
    assert keys.reads == 2, "the first request reads again, then none while the snapshot is fresh"
    keys._checked_at -= auth.MAX_AGE  # past the bound: the next requests wait for one read
    answers = await asyncio.gather(*(keys.authenticate(f"Bearer {token}") for _ in range(20)))
    assert set(answers) == {Principal("org-1", "alice")}
    assert keys.reads == 3, "one read for all the requests that found the snapshot stale"
    await keys.close()


async def test_between_the_refresh_age_and_the_bound_requests_do_not_wait_for_the_read() -> None:
    keys = SlowKeys(delay=0)
    _, token = keys.create("org-1", "alice")
    await keys.open()
    keys.delay = 3600.0
    keys._checked_at = time.monotonic() - (auth.REFRESH_AFTER + auth.MAX_AGE) / 2
    assert await keys.authenticate(f"Bearer {token}") == Principal("org-1", "alice")
    reading = keys._reading
    assert reading is not None and not reading.done(), "answered from the snapshot; the read runs behind"
    assert await keys.authenticate(f"Bearer {token}") == Principal("org-1", "alice")
    assert keys._reading is reading, "and a second request joins it rather than starting another"
    await keys.close()
    assert reading.cancelled()


async def test_a_revocation_is_refused_once_the_snapshot_is_past_the_bound() -> None:
    keys = SlowKeys(delay=0)
    entry, token = keys.create("org-1", "alice")
    await keys.open()
    assert await keys.authenticate(f"Bearer {token}") == Principal("org-1", "alice")
    keys.revoke(entry.key_id)
    keys._checked_at -= auth.MAX_AGE
    with pytest.raises(Unauthorized, match="revoked"):
        await keys.authenticate(f"Bearer {token}")


async def test_a_key_made_after_the_snapshot_works_at_once_and_bad_keys_cost_a_read_at_most_so_often() -> None:
    keys = SlowKeys(delay=0)
    _, token = keys.create("org-1", "alice")
    await keys.open()
    assert await keys.authenticate(f"Bearer {token}") == Principal("org-1", "alice")
    _, new = keys.create("org-1", "bob")  # beside the server, while its snapshot is fresh
    keys._checked_at -= auth.REREAD_REFUSED_AFTER
    reads = keys.reads
    assert await keys.authenticate(f"Bearer {new}") == Principal("org-1", "bob")
    assert keys.reads == reads + 1, "the refused key made one fresh read, which knew it"
    unknown, _ = new_key("org-1", "mallory")  # never stored
    for _ in range(50):  # a caller sending bad keys: the snapshot was just read, so no read more
        with pytest.raises(Unauthorized, match="invalid credentials"):
            await keys.authenticate(f"Bearer {unknown.key_id}.not-the-secret")
    assert keys.reads == reads + 1
    keys._checked_at -= auth.REREAD_REFUSED_AFTER
    with pytest.raises(Unauthorized, match="invalid credentials"):
        await keys.authenticate(f"Bearer {unknown.key_id}.not-the-secret")
    assert keys.reads == reads + 2, "and one once the snapshot is older than the interval"
    await keys.close()


async def test_keys_that_cannot_be_read_fail_closed_past_the_bound() -> None:
    keys = SlowKeys(delay=0)
    _, token = keys.create("org-1", "alice")
    await keys.open()
    assert await keys.authenticate(f"Bearer {token}") == Principal("org-1", "alice")
    keys.failing = True
    assert await keys.authenticate(f"Bearer {token}") == Principal("org-1", "alice"), "within the bound"
    keys._checked_at -= auth.MAX_AGE
    with pytest.raises(Unavailable, match="cannot be read"):
        await keys.authenticate(f"Bearer {token}")
    keys.failing = False
    assert await keys.authenticate(f"Bearer {token}") == Principal("org-1", "alice"), "and recovers"


async def test_the_keys_file_read_is_one_mapping_while_unchanged_and_a_new_one_after_a_change(tmp_path: Path) -> None:
    keys = KeyStore(tmp_path / "keys.json")
    assert await keys.read() == {} and not keys.exists()
    entry, _ = keys.create("org-1", None)
    first = await keys.read()
    assert list(first) == [entry.key_id] and await keys.read() is first
    KeyStore(tmp_path / "keys.json").revoke(entry.key_id)
    assert (await keys.read())[entry.key_id].revoked


def test_the_cli_creates_lists_and_revokes_keys_in_the_configured_file(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    config = tmp_path / "memory-plugin.toml"
    config.write_text(f'[auth]\nkeys_file = "{tmp_path / "elsewhere" / "keys.json"}"\n')
    assert main(["keys", "create", "--config", str(config), "--org", "org-1", "--user", "alice"]) == 0
    token = capsys.readouterr().out.strip().splitlines()[-1].split()[-1]
    key_id, secret = token.split(".", 1)
    stored = (tmp_path / "elsewhere" / "keys.json").read_text()
    assert key_id in stored and secret not in stored, "hashed, never the secret"
    assert main(["keys", "list", "--config", str(config)]) == 0
    assert f"{key_id}\torg-1\talice" in capsys.readouterr().out
    assert main(["keys", "revoke", "--config", str(config), key_id]) == 0
    assert main(["keys", "list", "--config", str(config)]) == 0
    assert capsys.readouterr().out.rstrip().endswith("revoked")
    assert main(["keys", "revoke", "--config", str(config), "key_missing"]) == 1


def test_the_store_follows_the_keys_backend_setting(tmp_path: Path) -> None:
    assert isinstance(open_key_store(load_settings(environ={}, data_dir=tmp_path)), KeyStore)
    config = tmp_path / "opensearch.toml"
    config.write_text(
        'home_region = "USA"\n[auth]\nkeys_backend = "opensearch"\n'
        '[regions.USA]\nstore = "opensearch"\nhosts = ["http://127.0.0.1:1"]\nindex_prefix = "Acme"\n'
    )
    store = open_key_store(load_settings(config, environ={}))
    assert isinstance(store, OpenSearchKeyStore) and store.index == "acme-api-keys"
    assert isinstance(store.region, OpenSearchRegion)


def test_opensearch_keys_need_the_home_region_on_opensearch(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="home region USA is embedded"):
        load_settings(environ={"MEMORY_PLUGIN_AUTH_KEYS_BACKEND": "opensearch"}, data_dir=tmp_path)
    with pytest.raises(ValueError, match="'file' or 'opensearch'"):
        load_settings(environ={"MEMORY_PLUGIN_AUTH_KEYS_BACKEND": "ldap"}, data_dir=tmp_path)
