"""The thread MCP connections live on: one event loop per process, started on demand.

MCP sessions are long-lived and shared by every agent of the process, while an
:class:`~mainspring.Agent` is not bound to an event loop (it may be driven by successive
``asyncio.run()`` calls). So connections run on an event loop of their own, in a daemon
thread, and agents reach them through :func:`call` (awaitable from any loop; cancelling
the caller cancels the work on the runtime loop at once) and :func:`call_blocking` (for
synchronous code such as the agent constructor). At interpreter exit every connection is
stopped and every server process ended (:func:`shutdown`, registered with ``atexit``).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import threading
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Generic, TypeVar

__all__ = ["call", "call_blocking", "in_runtime", "on_shutdown", "shutdown"]

_T = TypeVar("_T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_closers: list[Callable[[], Awaitable[None]]] = []
_SHUTDOWN_S = 5.0


def _runtime_loop() -> asyncio.AbstractEventLoop:
    global _loop, _thread
    with _lock:
        if _loop is not None and _thread is not None and _thread.is_alive():
            return _loop
        loop = asyncio.new_event_loop()
        started = threading.Event()

        def main() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(started.set)
            loop.run_forever()

        thread = threading.Thread(target=main, name="mainspring-mcp", daemon=True)
        thread.start()
        started.wait()
        _loop, _thread = loop, thread
        return loop


def in_runtime() -> bool:
    """Whether the caller runs on the runtime's event loop."""
    try:
        return asyncio.get_running_loop() is _loop
    except RuntimeError:
        return False


def submit(coroutine: Coroutine[Any, Any, _T]) -> Future[_T]:
    """Schedule ``coroutine`` on the runtime loop; cancelling the future cancels it."""
    return asyncio.run_coroutine_threadsafe(coroutine, _runtime_loop())


async def call(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coroutine`` on the runtime loop and await its result from the caller's loop.

    Cancelling the caller cancels the coroutine on the runtime loop (it gets
    ``CancelledError`` there) and returns at once, without waiting for it to unwind.

    One wake-up of each loop per call (an MCP call's cost is mostly these): the runtime
    loop is woken to start the coroutine, and the caller's loop once, from the
    coroutine's own last step, with its outcome.
    """
    if in_runtime():
        return await coroutine
    hop = _Hop(asyncio.get_running_loop(), coroutine)
    runtime_loop = _runtime_loop()
    runtime_loop.call_soon_threadsafe(hop.start)
    try:
        return await hop.outcome
    finally:
        if not hop.outcome.done() or hop.outcome.cancelled():
            with contextlib.suppress(RuntimeError):  # the runtime is gone: nothing runs
                runtime_loop.call_soon_threadsafe(hop.cancel)


class _Hop(Generic[_T]):
    """One :func:`call`: the coroutine's task on the runtime loop, its outcome on the
    caller's."""

    __slots__ = ("coroutine", "loop", "outcome", "task")

    def __init__(self, loop: asyncio.AbstractEventLoop, coroutine: Coroutine[Any, Any, _T]):
        self.loop = loop
        self.coroutine = coroutine
        self.outcome: asyncio.Future[_T] = loop.create_future()
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """On the runtime loop: run the coroutine (unless the caller gave up already)."""
        if self.outcome.cancelled():
            self.coroutine.close()
            return
        self.task = asyncio.ensure_future(self._run())

    def cancel(self) -> None:
        """On the runtime loop: the caller gave up; cancel the coroutine."""
        if self.task is not None:
            self.task.cancel()
        elif not self.outcome.done():
            self.coroutine.close()

    async def _run(self) -> None:
        try:
            result = await self.coroutine
        except BaseException as error:
            self._settle(None, error)
            if not isinstance(error, Exception | asyncio.CancelledError):
                raise
        else:
            self._settle(result, None)

    def _settle(self, result: Any, error: BaseException | None) -> None:
        with contextlib.suppress(RuntimeError):  # the caller's loop closed: nobody waits
            self.loop.call_soon_threadsafe(self._deliver, result, error)

    def _deliver(self, result: Any, error: BaseException | None) -> None:
        """On the caller's loop: the outcome, unless the caller gave up."""
        outcome = self.outcome
        if outcome.done():
            return
        if isinstance(error, asyncio.CancelledError):
            outcome.cancel()
        elif error is not None:
            outcome.set_exception(error)
        else:
            outcome.set_result(result)


def call_blocking(coroutine: Coroutine[Any, Any, _T], timeout_s: float | None) -> _T:
    """Run ``coroutine`` on the runtime loop and wait for it in this thread.

    Raises ``TimeoutError`` (after cancelling the coroutine) past ``timeout_s``. Must not
    be called from the runtime loop itself.
    """
    if in_runtime():
        coroutine.close()
        raise RuntimeError("call_blocking() on the MCP runtime loop would wait for itself")
    future = submit(coroutine)
    try:
        return future.result(timeout_s)
    except FutureTimeout:
        future.cancel()
        raise TimeoutError(f"no answer within {timeout_s} s") from None


def on_shutdown(closer: Callable[[], Awaitable[None]]) -> None:
    """Run ``closer()`` on the runtime loop when the process shuts the runtime down."""
    _closers.append(closer)


def shutdown() -> None:
    """Stop every connection (each ``on_shutdown`` closer) and the runtime thread.

    Idempotent; called at interpreter exit. A closer that does not finish within a few
    seconds is abandoned with the daemon thread.
    """
    global _loop, _thread
    with _lock:
        loop, thread = _loop, _thread
    if loop is None or thread is None or not thread.is_alive():
        return

    async def close_all() -> None:
        for closer in reversed(_closers):
            with contextlib.suppress(Exception):  # shutting down: nothing left to tell
                await closer()

    with contextlib.suppress(FutureTimeout, RuntimeError):
        asyncio.run_coroutine_threadsafe(close_all(), loop).result(_SHUTDOWN_S)
    with _lock:
        _loop = _thread = None
    loop.call_soon_threadsafe(loop.stop)
    thread.join(_SHUTDOWN_S)


atexit.register(shutdown)
