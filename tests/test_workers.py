"""Daemon worker threads (``mainspring.workers.in_daemon_thread``): the outcome comes back
whether it arrives within the loop's short wait or long after it; what nobody waits for
any more is dropped, a coroutine in it closed."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from typing import Any

import pytest

from mainspring.workers import in_daemon_thread

REQUEST = contextvars.ContextVar("REQUEST", default="none")


def _in_thread() -> tuple[str, bool]:
    return REQUEST.get(), threading.current_thread() is threading.main_thread()


@pytest.mark.parametrize("wait_s", [0.0, 0.5])
async def test_the_result_comes_back_with_the_callers_context(wait_s: float) -> None:
    REQUEST.set("r-1")
    assert await in_daemon_thread(_in_thread, wait_s=wait_s) == ("r-1", False)


@pytest.mark.parametrize("wait_s", [0.0, 0.0001])
async def test_a_slow_call_is_awaited_past_the_wait(wait_s: float) -> None:
    started, go_on = threading.Event(), threading.Event()

    def slow() -> str:
        started.set()
        go_on.wait(10)
        return "late"

    call = asyncio.ensure_future(in_daemon_thread(slow, wait_s=wait_s))
    await asyncio.to_thread(started.wait, 10)
    assert not call.done()  # the loop is free while it waits
    go_on.set()
    assert await call == "late"


@pytest.mark.parametrize("wait_s", [0.0, 0.5])
async def test_what_the_function_raises_reaches_the_caller(wait_s: float) -> None:
    def fails() -> None:
        raise ValueError("bad input")

    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(ValueError, match="bad input"):
        await in_daemon_thread(fails, wait_s=wait_s)
    with pytest.raises(RuntimeError, match="KeyboardInterrupt"):
        await in_daemon_thread(interrupted, wait_s=wait_s)


async def test_a_coroutine_returned_after_the_caller_left_is_closed() -> None:
    started, go_on, closed = threading.Event(), threading.Event(), threading.Event()

    async def never_awaited() -> None:
        try:
            await asyncio.sleep(0)
        finally:
            closed.set()

    def returns_late() -> Any:
        started.set()
        go_on.wait(10)
        coroutine = never_awaited()
        coroutine.send(None)  # started, so closing it runs its ``finally``
        return coroutine

    call = asyncio.ensure_future(in_daemon_thread(returns_late, wait_s=0.0001))
    await asyncio.to_thread(started.wait, 10)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    go_on.set()
    assert await asyncio.to_thread(closed.wait, 10)
