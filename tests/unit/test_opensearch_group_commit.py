"""Group commit for the OpenSearch stores: writes that arrive together are flushed together, each answered alone."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from memory_plugin.memory.stores.group_commit import GroupCommit


class Recorder:
    """A flush that records its groups, fails the odd items, and can be held open."""

    def __init__(self) -> None:
        self.groups: list[list[int]] = []
        self.gate = asyncio.Event()
        self.gate.set()

    async def flush(self, items: Sequence[int]) -> list[str | Exception]:
        self.groups.append(list(items))
        await self.gate.wait()
        return [ValueError(f"odd {item}") if item % 2 else f"ok {item}" for item in items]


async def test_writes_that_arrive_together_share_one_flush_and_fail_alone() -> None:
    recorder = Recorder()
    commit = GroupCommit(recorder.flush)
    results = await asyncio.gather(*(commit.submit(n) for n in range(6)), return_exceptions=True)
    assert recorder.groups == [[0, 1, 2, 3, 4, 5]]
    assert results[0::2] == ["ok 0", "ok 2", "ok 4"]
    assert [str(error) for error in results[1::2]] == ["odd 1", "odd 3", "odd 5"]


async def test_writes_queued_behind_a_flush_go_in_the_next_one() -> None:
    recorder = Recorder()
    recorder.gate.clear()
    commit = GroupCommit(recorder.flush)
    first = asyncio.ensure_future(commit.submit(0))
    while not recorder.groups:
        await asyncio.sleep(0)
    later = [asyncio.ensure_future(commit.submit(n)) for n in (2, 4, 6)]
    recorder.gate.set()
    assert await first == "ok 0"
    assert await asyncio.gather(*later) == ["ok 2", "ok 4", "ok 6"]
    assert recorder.groups == [[0], [2, 4, 6]]


async def test_a_failed_flush_fails_its_whole_group_and_a_cancelled_caller_still_writes() -> None:
    calls: list[list[int]] = []

    async def flush(items: Sequence[int]) -> list[int | Exception]:
        calls.append(list(items))
        if len(calls) == 1:
            raise ConnectionError("node gone")
        return list(items)

    commit = GroupCommit(flush)
    with pytest.raises(ConnectionError):
        await asyncio.gather(commit.submit(1), commit.submit(2))
    waiting = asyncio.ensure_future(commit.submit(3))
    await asyncio.sleep(0)
    waiting.cancel()
    await commit.idle()
    assert calls == [[1, 2], [3]]
