"""The agentic memory reference (once the README's section, now ``docs/api-agentic.md``) agrees with itself and
with the server (issue 46 item 9: it said keys carry no roles and ``backend_roles`` share nothing, while its own
Sharing paragraph, and the server, share containers with the keys holding a role)."""

from __future__ import annotations

from pathlib import Path

AGENTIC = Path(__file__).resolve().parents[2] / "docs" / "api-agentic.md"


def agentic_text() -> str:
    """The agentic memory reference, with its line breaks folded."""
    text = AGENTIC.read_text(encoding="utf-8")
    assert text.startswith("# Agentic memory (ML Commons 3.3+ memory containers)")
    return " ".join(text.split())


def test_the_agentic_reference_says_keys_carry_roles_and_roles_share_containers():
    text = agentic_text()
    assert "`keys create --backend-role support`" in text  # the Sharing paragraph
    for denial in ("keys carry no roles", "share nothing", "containers are private to their owner"):
        assert denial not in text, denial
    assert "`backend_roles` are the roles the creator's key held" in text
