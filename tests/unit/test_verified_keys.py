"""The memory of verified credentials: fast for the next request, never wrong about a revoked or wrong key."""

from __future__ import annotations

import base64
import time
from pathlib import Path

import pytest

from memory_plugin import auth
from memory_plugin.auth import KeyStore, Principal
from memory_plugin.errors import Unauthorized


@pytest.fixture
def keys(tmp_path: Path) -> KeyStore:
    return KeyStore(tmp_path / "keys.json")


async def test_a_remembered_key_fails_once_another_process_revokes_it(keys: KeyStore, tmp_path: Path) -> None:
    entry, token = keys.create("org-1", "alice")
    assert await keys.authenticate(f"Bearer {token}") == Principal("org-1", "alice")
    assert await keys.authenticate(f"Bearer {token}") == Principal("org-1", "alice")  # remembered
    assert KeyStore(tmp_path / "keys.json").revoke(entry.key_id)  # as `memory-plugin keys revoke` does
    time.sleep(auth.MAX_AGE + 0.05)  # a snapshot of the keys answers for at most MAX_AGE
    with pytest.raises(Unauthorized, match="revoked"):
        await keys.authenticate(f"Bearer {token}")


async def test_a_wrong_secret_is_never_remembered(keys: KeyStore) -> None:
    entry, token = keys.create("org-1", "alice")
    wrong = f"Bearer {entry.key_id}.{'x' * 43}"
    for _ in range(2):
        with pytest.raises(Unauthorized, match="invalid credentials"):
            await keys.authenticate(wrong)
    assert await keys.authenticate(f"Bearer {token}") == Principal("org-1", "alice")
    with pytest.raises(Unauthorized, match="invalid credentials"):
        await keys.authenticate(wrong)


async def test_each_spelling_of_a_key_is_checked_and_none_holds_the_secret(keys: KeyStore) -> None:
    entry, token = keys.create("org-1", None)
    key_id, secret = token.split(".", 1)
    basic = base64.b64encode(f"{key_id}:{secret}".encode()).decode()
    spellings = [f"Bearer {token}", f"bearer  {token} ", f"Basic {basic}"]
    for spelling in spellings * 2:
        assert await keys.authenticate(spelling) == Principal("org-1", None)
    remembered = keys._verified
    assert len(remembered) == len(spellings)
    assert all(isinstance(digest, bytes) and secret.encode() not in digest for digest in remembered)


async def test_the_memory_is_bounded(keys: KeyStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auth, "MAX_VERIFIED", 3)
    _, token = keys.create("org-1", "alice")
    for padding in range(10):  # a caller can spell one key many ways
        assert await keys.authenticate(f"Bearer {token}" + " " * padding) == Principal("org-1", "alice")
        assert len(keys._verified) <= 3
