"""A forked worker (``serve --workers``) makes ids and lease tokens of its own, never its parent's."""

from __future__ import annotations

import os

from memory_plugin import clock, leases


def in_child(make: object) -> str:
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what it makes, and leave without running pytest's teardown
        os.close(reader)
        os.write(writer, str(make()).encode())  # type: ignore[operator]
        os._exit(0)
    os.close(writer)
    with os.fdopen(reader) as answer:
        made = answer.read()
    os.waitpid(pid, 0)
    return made


def test_a_forked_child_does_not_repeat_the_ids_its_parent_drew_ahead() -> None:
    clock.new_id()  # the parent has bytes drawn ahead now
    children = {in_child(clock.new_id) for _ in range(3)}
    assert len(children) == 3
    assert clock.new_id() not in children


def test_a_forked_child_holds_leases_under_a_token_of_its_own() -> None:
    children = {in_child(lambda: leases.HOLDER) for _ in range(2)}
    assert len(children) == 2 and leases.HOLDER not in children
