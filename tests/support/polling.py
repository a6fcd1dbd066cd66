"""Waiting for a condition instead of sleeping: a test on a loaded machine takes as long as it needs.

The deadline only bounds a failure (a condition that never holds); success returns as soon as the
condition is seen, so the deadlines are generous.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

#: Seconds a condition may take on a machine busy with other work before the test gives up.
PATIENCE = 60.0


async def eventually(
    check: Callable[[], Awaitable[T] | T], what: str, timeout: float = PATIENCE, interval: float = 0.05
) -> T:
    """Call ``check`` (sync or async) until it returns something truthy, and return that; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g} s: {what} (last: {result!r})")
        await asyncio.sleep(interval)


def eventually_sync(check: Callable[[], T], what: str, timeout: float = PATIENCE, interval: float = 0.05) -> T:
    """:func:`eventually` for code without an event loop (a test driving threads or processes)."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g} s: {what} (last: {result!r})")
        time.sleep(interval)
