"""Erasing a user (issue 12, part B) with memory on SQLite: records, memories, messages and traces all go."""

from __future__ import annotations

from tests.conftest import make_caller
from tests.support.erasure import erasure_scenario


async def test_erasing_a_user_takes_their_memory_too(client, keys, admin, alice, bob):
    await erasure_scenario(client, admin, alice, bob, make_caller(keys, "org-2", "alice"))
