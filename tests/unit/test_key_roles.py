"""Backend roles on API keys (``keys create --backend-role R``): stored with the key, carried on the principal,
and key files written before roles existed still read."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from memory_plugin.auth import KeyStore, Principal
from memory_plugin.cli import main


async def test_roles_travel_from_the_file_to_the_principal(tmp_path: Path) -> None:
    keys = KeyStore(tmp_path / "keys.json")
    entry, token = keys.create("org-1", "dave", ["support", "ops", "support"])
    assert entry.backend_roles == ("support", "ops")  # once each, in order
    stored = json.loads((tmp_path / "keys.json").read_text())["keys"][0]
    assert stored["backend_roles"] == ["support", "ops"]
    principal = await KeyStore(tmp_path / "keys.json").authenticate(f"Bearer {token}")
    assert principal.backend_roles == ("support", "ops") and principal == Principal("org-1", "dave")
    keys.revoke(entry.key_id)
    assert KeyStore(tmp_path / "keys.json").entries()[0].backend_roles == ("support", "ops")


async def test_a_key_file_from_before_roles_still_reads(tmp_path: Path) -> None:
    keys = KeyStore(tmp_path / "keys.json")
    entry, token = keys.create("org-1", "alice")
    document = json.loads((tmp_path / "keys.json").read_text())
    del document["keys"][0]["backend_roles"]
    (tmp_path / "keys.json").write_text(json.dumps(document))
    principal = await KeyStore(tmp_path / "keys.json").authenticate(f"Bearer {token}")
    assert principal == Principal("org-1", "alice") and principal.backend_roles == ()


@pytest.mark.parametrize(
    "role,reason",
    [
        ("", "Backend role cannot be empty or blank"),
        ("\u2003", "Backend role cannot be empty or blank"),
        (
            "has space",
            "Backend role contains invalid characters. Only alphanumeric characters and :+=,.@-_/ are allowed",
        ),
        ("\u00a0", "Backend role contains invalid characters."),
        ("x" * 129, "Backend role exceeds maximum length of 128 characters: xxx"),
        ("\U0001d400" * 65, "Backend role exceeds maximum length of 128 characters"),  # 130 UTF-16 units
        ("semi;colon", "Backend role contains invalid characters."),
    ],
)
def test_a_role_ml_commons_would_refuse_is_refused(tmp_path: Path, role: str, reason: str) -> None:
    with pytest.raises(ValueError, match=re.escape(reason)):
        KeyStore(tmp_path / "keys.json").create("org-1", "dave", [role])
    assert not (tmp_path / "keys.json").exists()


def test_the_cli_takes_repeated_roles_and_lists_them(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    config = tmp_path / "memory-plugin.toml"
    config.write_text(f'[auth]\nkeys_file = "{tmp_path / "keys.json"}"\n')
    args = ["keys", "create", "--config", str(config), "--org", "org-1", "--user", "dave"]
    assert main([*args, "--backend-role", "support", "--backend-role", "ops"]) == 0
    assert "roles:   support,ops" in capsys.readouterr().out
    assert main(["keys", "list", "--config", str(config)]) == 0
    assert "\torg-1\tdave\tsupport,ops\t" in capsys.readouterr().out
    assert main([*args, "--backend-role", "bad role"]) == 2
    assert "Backend role contains invalid characters" in capsys.readouterr().err
