"""Steps that run side by side, none left half-done."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any


async def run_all(*steps: Awaitable[Any]) -> list[Any]:
    """Each step's result, the steps run concurrently and each to its end; then the first error, if any.

    Unlike ``asyncio.gather`` (whose other steps run on unattended after one fails) or a ``TaskGroup`` (which
    cancels them midway), every step has finished when this returns or raises: what opened is there to close.
    """
    outcomes = await asyncio.gather(*steps, return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    return outcomes
