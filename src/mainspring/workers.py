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
import contextlib
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
    function: Callable[..., _T],
    *args: Any,
    name: str = "mainspring-worker",
    wait_s: float = 0.0,
) -> _T:
    """``function(*args)`` in a daemon thread, with the caller's context variables.

    ``KeyboardInterrupt`` and ``SystemExit`` raised by ``function`` reach the caller as a
    ``RuntimeError`` naming them (they concern the thread, not the awaiting task).

    ``wait_s`` (for work that is usually quick, such as a hook that only computes): the
    loop's thread first waits that long for the outcome, blocked with the GIL released,
    and takes it directly if it came; only then does it go back to the loop and await
    it. A quick call so costs two thread wake-ups instead of a trip through the loop's
    self-pipe, and a slow one at most ``wait_s`` of the loop's time.
    """
    handoff = _Handoff(asyncio.get_running_loop())
    context = contextvars.copy_context()
    _POOL.submit(lambda: handoff.run(context, function, args), name)
    if not handoff.wait(wait_s):
        try:
            await handoff.parked()
        except BaseException:
            handoff.abandon()
            raise
    value = handoff.outcome()
    if isinstance(value, Owned):
        return value.take()  # type: ignore[no-any-return]
    return value  # type: ignore[no-any-return]


_WAITING, _PARKED, _FINISHED, _ABANDONED = range(4)


class _Handoff:
    """One call's outcome on its way from a worker thread to the caller (see
    :func:`in_daemon_thread`): waited for briefly by the loop's thread, then awaited.

    ``_gate`` orders the two sides: the worker finishes (``_FINISHED``) or finds the caller
    gone (``_ABANDONED``); the caller parks (``_PARKED``: the worker then wakes the loop)
    or takes the outcome.
    """

    __slots__ = ("_done", "_error", "_future", "_gate", "_loop", "_result", "_state")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._gate = threading.Lock()
        self._done = threading.Lock()
        self._done.acquire()  # released by the worker once the outcome is in
        self._state = _WAITING
        self._result: Any = None
        self._error: BaseException | None = None
        self._future: asyncio.Future[None] | None = None

    def run(self, context: contextvars.Context, function: Callable[..., Any], args: Any) -> None:
        """In the worker: call ``function`` and hand the outcome over."""
        if self._state == _ABANDONED:
            return  # the caller stopped waiting before this thread took the call up
        result: Any = None
        error: BaseException | None = None
        try:
            result = context.run(function, *args)
        except BaseException as raised:  # handed to the caller, whatever it is
            error = raised
        if inspect.iscoroutine(result):
            result = Owned(result)
        with self._gate:
            state = self._state
            if state != _ABANDONED:
                self._result, self._error, self._state = result, error, _FINISHED
        if state == _ABANDONED:
            _discard(result)
            return
        self._done.release()
        if state == _PARKED:
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                self._loop.call_soon_threadsafe(self._wake)

    def wait(self, wait_s: float) -> bool:
        """On the loop's thread: whether the outcome came within ``wait_s``; if not, the
        caller is parked (it must await :meth:`parked`)."""
        try:
            if wait_s > 0 and self._done.acquire(timeout=wait_s):
                return True
        except BaseException:  # interrupted while blocked (KeyboardInterrupt)
            self.abandon()
            raise
        with self._gate:
            if self._state == _FINISHED:
                return True
            self._state = _PARKED
            self._future = self._loop.create_future()
        return False

    def parked(self) -> asyncio.Future[None]:
        """What a parked caller awaits (done once the outcome is in)."""
        assert self._future is not None
        return self._future

    def _wake(self) -> None:
        future = self._future
        if future is not None and not future.done():
            future.set_result(None)

    def abandon(self) -> None:
        """The caller stopped waiting: an outcome already in is dropped (a coroutine in it
        closed), a later one will be."""
        with self._gate:
            finished = self._state == _FINISHED
            self._state = _ABANDONED
        if finished:
            _discard(self._result)

    def outcome(self) -> Any:
        """The function's result, or its exception raised (see :func:`in_daemon_thread`)."""
        error = self._error
        if error is None:
            return self._result
        self._error = None
        if isinstance(error, KeyboardInterrupt | SystemExit):
            raise RuntimeError(f"the function raised {type(error).__name__}")
        raise error


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
