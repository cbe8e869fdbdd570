"""Blocking plugin code run in daemon threads the event loop never has to join.

``asyncio.to_thread`` uses the loop's default executor, whose threads ``asyncio.run()``
joins at exit: one blocking function that never returns would keep the program from
ending. :func:`in_daemon_thread` runs the function in a daemon thread and hands the
outcome back to the loop; if nobody waits for it any more (the call was aborted or timed
out), the outcome is dropped (a coroutine it returned is closed, never awaited) and the
thread ends with the function, or with the process; a function whose caller stopped
waiting before a thread took it up is not called at all.

The threads are kept in a pool: a thread that finished a call waits for the next one for
:data:`IDLE_S` seconds, then ends. A call never waits for a free thread (a call that
blocks forever holds one thread, never the others): when no thread is idle, a new one
starts.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["IDLE_S", "Owned", "in_daemon_thread"]

_T = TypeVar("_T")

IDLE_S = 10.0
"""Seconds an idle pool thread waits for work before it ends."""


class _DaemonPool:
    """Daemon threads taking work from one queue; never fewer free threads than work."""

    def __init__(self) -> None:
        self._work: queue.SimpleQueue[tuple[Callable[[], None], str]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0  # threads waiting for work that no submitted call has counted on

    def submit(self, work: Callable[[], None], name: str) -> None:
        """Run ``work()`` in a pool thread (an idle one, or a new one) named ``name``."""
        with self._lock:
            claimed = self._idle > 0
            if claimed:
                self._idle -= 1
        self._work.put((work, name))
        if not claimed:
            threading.Thread(target=self._serve, name=name, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                work, name = self._work.get(timeout=IDLE_S)
            except queue.Empty:
                with self._lock:
                    if self._idle > 0:  # nobody counts on this thread: it ends
                        self._idle -= 1
                        return
                continue  # a call counted on an idle thread: its work is on the way
            threading.current_thread().name = name  # what it runs now, in thread listings
            work()
            with self._lock:
                self._idle += 1


_POOL = _DaemonPool()


async def in_daemon_thread(
    function: Callable[..., _T], *args: Any, name: str = "mainspring-worker"
) -> _T:
    """``function(*args)`` in a daemon thread, with the caller's context variables.

    ``KeyboardInterrupt`` and ``SystemExit`` raised by ``function`` reach the caller as a
    ``RuntimeError`` naming them (they concern the thread, not the awaiting task).
    """
    loop = asyncio.get_running_loop()
    outcome: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()
    abandoned = False

    def work() -> None:
        if abandoned:
            return  # the caller stopped waiting before this thread took the call up
        try:
            result = context.run(function, *args)
        except BaseException as error:  # handed to the awaiting task, whatever it is
            _hand_back(loop, outcome, None, error)
        else:
            _hand_back(
                loop, outcome, Owned(result) if inspect.iscoroutine(result) else result, None
            )

    _POOL.submit(work, name)
    try:
        value = await outcome
    except BaseException:
        abandoned = True
        if outcome.done() and not outcome.cancelled() and outcome.exception() is None:
            _discard(outcome.result())  # it arrived as the wait was cut
        raise
    if isinstance(value, Owned):
        return value.take()  # type: ignore[no-any-return]
    return value  # type: ignore[no-any-return]


class Owned:
    """A coroutine on its way from a worker thread to the caller: closed (never awaited,
    so never warned about) if the caller is gone and it is dropped on the way.

    A function run by :func:`in_daemon_thread` that returns a coroutine gets it wrapped
    in one; a function returning a structure with a coroutine inside wraps it itself.
    """

    __slots__ = ("_coroutine",)

    def __init__(self, coroutine: Any) -> None:
        self._coroutine = coroutine

    def take(self) -> Any:
        coroutine, self._coroutine = self._coroutine, None
        return coroutine

    def close(self) -> None:
        """Close the coroutine unless it was taken (at once: finalised in a garbage
        cycle, it could warn before this object's ``__del__`` ran)."""
        coroutine = self.take()
        if coroutine is not None:
            coroutine.close()

    __del__ = close


def _discard(value: Any) -> None:
    """A result nobody will take: a coroutine in it is closed now."""
    if isinstance(value, Owned):
        value.close()


def _hand_back(
    loop: asyncio.AbstractEventLoop,
    outcome: asyncio.Future[Any],
    result: Any,
    error: BaseException | None,
) -> None:
    def settle() -> None:
        if outcome.done():  # the caller stopped waiting (abort, timeout)
            _discard(result)
            return
        if error is None:
            outcome.set_result(result)
        elif isinstance(error, KeyboardInterrupt | SystemExit):
            outcome.set_exception(RuntimeError(f"the function raised {type(error).__name__}"))
        else:
            outcome.set_exception(error)

    try:
        loop.call_soon_threadsafe(settle)
    except RuntimeError:  # a closed loop: nobody is waiting any more
        _discard(result)
