"""Waiting for code the kernel does not trust, in a way the kernel can always stop.

Every ``await`` of a run on something a plugin, a provider, a tool or a listener produced
goes through :meth:`Guard.watch`. The watched awaitable runs in the awaiting task, exactly
as a plain ``await`` would (same task, same context variables, no extra task, nothing
scheduled while it does not suspend), but the kernel drives it one step at a time, so the
kernel keeps the last word:

- **abort**: :meth:`Guard.abort` cancels the wait. The awaitable gets a ``CancelledError``
  to clean up; whatever it does then, the wait ends in :class:`~mainspring.RunAborted`.
- **deadline**: with ``timeout_s``, a wait still suspended after that many seconds is
  cancelled the same way and ends in :class:`~mainspring.HookTimeoutError`; its owner is
  recorded in :attr:`Guard.stalled`, and the kernel does not call it again in that run.
- **hold**: :meth:`Guard.hold` stops the active wait's deadline until it is released (the
  time a person takes to answer a tool's question is not the tool's); an abort still cuts
  a held wait.
- **detachment**: an awaitable that ignores the cancellation (catches it and waits on) is
  given ``grace_s`` more, then *detached*: the kernel stops driving it, closes it and never
  resumes it, so nothing is left for ``asyncio.run()`` to wait for at exit. Its owner is
  recorded in :attr:`Guard.stalled` and logged; the kernel does not call it again in
  that run.

Once the guard is aborted, every wait (also one that starts later, such as a listener of
``agent_end``) is cut at the *settle deadline*, ``grace_s`` after the abort (each wait gets
at least :data:`MIN_WAIT_S`, or ``grace_s`` if smaller), so an aborted run settles within
about ``grace_s`` whatever its plugins do.

The cancellations the guard requests are matched by ``Task.uncancel()`` when the wait
ends, so ``asyncio.timeout()`` and task groups around the run keep working.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Awaitable, Callable, Generator, Iterator
from typing import Any, Literal, final

from ..contract.errors import HookTimeoutError
from ..logs import get_logger
from ..signal import RunAborted

__all__ = ["MIN_WAIT_S", "Guard", "Stalled"]

log = get_logger("mainspring.kernel")

MIN_WAIT_S = 0.05
"""The least time a wait that suspends after an abort is given before it is cancelled."""

_Cut = Literal["timeout", "abort"]
_COROUTINE = types.CoroutineType


@final
class Guard:
    """The watched waits of one task: abort, deadlines and detachment (see the module).

    A guard serves one task at a time (a run's task, or one tool call's task): it tracks
    that task's innermost active wait, which :meth:`abort` interrupts.
    """

    __slots__ = ("_active", "_holds", "_settle_by", "grace_s", "stalled")

    def __init__(self, grace_s: float) -> None:
        self.grace_s = grace_s
        self.stalled = Stalled()
        """``id()`` of every owner whose wait timed out or was detached: the kernel does
        not call it again while this guard serves."""
        self._active: _Watch | None = None
        self._settle_by: float | None = None
        self._holds = 0

    @types.coroutine
    def watch(
        self, awaitable: Awaitable[Any], owner: object = None, timeout_s: float | None = None
    ) -> Generator[Any, Any, Any]:
        """Await ``awaitable`` under the guard (``await guard.watch(...)``).

        ``owner`` (the hook implementation, listener, tool or provider behind it) names
        it in logs and is recorded in :attr:`detached` if it has to be detached;
        ``timeout_s`` is its deadline (``None``: none, until an abort). An awaitable that
        finishes without suspending costs one extra ``send``; only one that suspends is
        watched (a timer, the step-by-step drive). :meth:`step` and :meth:`follow` are the
        same in two halves, for a hot path that skips the ``await`` when nothing suspends.
        """
        finished, value = self.step(awaitable)
        if finished:
            return value
        steps, yielded = value  # as follow() does, without one more frame per wait
        return (yield from _Watch(self, steps, owner, timeout_s).drive(yielded))

    @staticmethod
    def step(awaitable: Awaitable[Any]) -> tuple[bool, Any]:
        """Run ``awaitable`` to its first suspension, now: ``(True, value)`` when it finished
        without suspending, else ``(False, pending)``, which the caller must hand to
        ``await guard.follow(pending, ...)`` (or close). What it raises propagates."""
        steps = awaitable if type(awaitable) is _COROUTINE else awaitable.__await__()
        try:
            yielded = steps.send(None)
        except StopIteration as done:
            return True, done.value
        return False, (steps, yielded)

    @types.coroutine
    def follow(
        self, pending: tuple[Any, Any], owner: object = None, timeout_s: float | None = None
    ) -> Generator[Any, Any, Any]:
        """Await the rest of an awaitable :meth:`step` left suspended, watched as
        :meth:`watch` does."""
        steps, yielded = pending
        return (yield from _Watch(self, steps, owner, timeout_s).drive(yielded))

    def hold(self) -> Callable[[], None]:
        """Stop the deadline of the active wait (or of the wait about to start, when the
        awaitable holds before it first suspends); the returned ``release()`` restarts it
        with the time that was left (called once; later calls do nothing).

        Holds nest: the deadline runs again when every hold is released. An abort still
        cuts a held wait.
        """
        self._holds += 1
        if self._holds == 1 and self._active is not None:
            self._active.pause()
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            self._holds -= 1
            if not self._holds and self._active is not None:
                self._active.resume()

        return release

    @property
    def aborted(self) -> bool:
        """Whether :meth:`abort` was called."""
        return self._settle_by is not None

    def abort(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start settling: cut the active wait and bound every later one (idempotent)."""
        if self._settle_by is not None:
            return
        self._settle_by = loop.time() + self.grace_s
        active = self._active
        if active is not None:
            active.interrupt("abort", loop)

    def _limit(self, timeout_s: float | None, now: float) -> tuple[float | None, _Cut]:
        """How long a wait that suspends now may stay suspended, and why it would be cut."""
        settle_by = self._settle_by
        if settle_by is not None:
            return max(settle_by - now, self._floor), "abort"
        return timeout_s, "timeout"

    @property
    def _floor(self) -> float:
        return min(MIN_WAIT_S, self.grace_s)

    def _grace(self, now: float) -> float:
        settle_by = self._settle_by
        if settle_by is None:
            return self.grace_s
        return max(min(self.grace_s, settle_by - now), self._floor)


@final
class Stalled:
    """A set of ``id()`` values, empty and small until the first is added.

    Every run and every tool call has a guard and almost none records a stalled owner,
    so the set itself is made on the first :meth:`add` (an empty ``set`` is 216 bytes).
    """

    __slots__ = ("_ids",)

    def __init__(self) -> None:
        self._ids: set[int] | None = None

    def add(self, owner_id: int) -> None:
        """Record ``owner_id``."""
        ids = self._ids
        if ids is None:
            ids = self._ids = set()
        ids.add(owner_id)

    def discard(self, owner_id: int) -> None:
        """Forget ``owner_id`` if recorded."""
        if self._ids is not None:
            self._ids.discard(owner_id)

    def __contains__(self, owner_id: object) -> bool:
        return self._ids is not None and owner_id in self._ids

    def __bool__(self) -> bool:
        return bool(self._ids)

    def __len__(self) -> int:
        return len(self._ids) if self._ids is not None else 0

    def __iter__(self) -> Iterator[int]:
        return iter(self._ids or ())


@final
class _Watch:
    """One watched wait (see :meth:`Guard.watch`)."""

    __slots__ = (
        "_cancels",
        "_cut",
        "_detaching",
        "_expires",
        "_guard",
        "_left",
        "_owner",
        "_soon",
        "_steps",
        "_task",
        "_timeout_s",
        "_timer",
    )

    def __init__(self, guard: Guard, steps: Any, owner: object, timeout_s: float | None) -> None:
        self._guard = guard
        self._steps = steps
        self._owner = owner
        self._timeout_s = timeout_s
        self._cut: _Cut | None = None
        self._detaching = False
        self._cancels = 0
        self._timer: asyncio.TimerHandle | None = None
        self._soon: asyncio.Handle | None = None
        self._task: asyncio.Task[Any] | None = None
        self._expires: float | None = None  # the loop's time the deadline passes
        self._left: float | None = None  # seconds left on a paused deadline

    def drive(self, yielded: Any) -> Generator[Any, Any, Any]:
        """Drive the suspended awaitable from its first ``yielded`` value to its end."""
        steps = self._steps
        guard = self._guard
        outer, guard._active = guard._active, self
        self._arm()
        try:
            while True:
                thrown: BaseException | None = None
                sent: Any = None
                try:
                    sent = yield yielded
                except GeneratorExit:
                    _close(steps)
                    raise
                except BaseException as error:
                    thrown = error
                if self._detaching:
                    break  # never resumed again: it ignored the cancellation
                try:
                    yielded = steps.send(sent) if thrown is None else steps.throw(thrown)
                except StopIteration as done:
                    return self._settled(done.value)
                except (KeyboardInterrupt, SystemExit):
                    raise
                except BaseException:
                    if self._cut is None:
                        raise
                    break
            if self._detaching:
                self._detach(steps)
            raise self._outcome()
        finally:
            guard._active = outer
            self._disarm()

    # -- the state machine: waiting → cut (cancelled, in grace) → detaching -------------

    def _arm(self) -> None:
        self._task = asyncio.current_task()
        self._start(self._timeout_s)
        if self._guard._holds:
            self.pause()

    def _start(self, timeout_s: float | None) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        limit, why = self._guard._limit(timeout_s, now)
        if limit is not None:
            self._timer = loop.call_later(limit, self._expire, why, loop)
            self._expires = now + limit if why == "timeout" else None

    def pause(self) -> None:
        """Stop the deadline (see :meth:`Guard.hold`); a settle deadline is never paused."""
        timer = self._timer
        if timer is None or self._expires is None or self._cut is not None:
            return
        timer.cancel()
        self._timer = None
        self._left = max(self._expires - asyncio.get_running_loop().time(), 0.0)

    def resume(self) -> None:
        """Restart a paused deadline with the time that was left."""
        left, self._left = self._left, None
        if left is not None and self._cut is None:
            self._start(left)

    def _expire(self, why: _Cut, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        self.interrupt(why, loop)

    def interrupt(self, why: _Cut, loop: asyncio.AbstractEventLoop) -> None:
        """Cut the wait: cancel the awaitable and give it the grace period to finish."""
        if self._cut is not None:
            if why == "abort":
                self._cut = "abort"  # an abort outranks a deadline already passed
            return
        self._cut = why
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_later(self._guard._grace(loop.time()), self._give_up)
        self._cancel()

    def _give_up(self) -> None:
        self._timer = None
        self._detaching = True
        self._cancel()

    def _cancel(self) -> None:
        self._soon = None
        task = self._task
        if task is None or task.done():
            return
        if asyncio.current_task() is task:
            # the awaitable itself aborted the run: cancel once it has suspended (or, if
            # it finishes first, not at all), never the running task at an unknown point
            self._soon = task.get_loop().call_soon(self._cancel)
            return
        self._cancels += 1
        task.cancel()

    def _disarm(self) -> None:
        self._left = None  # the wait is over: a release after it restarts nothing
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._soon is not None:
            self._soon.cancel()
            self._soon = None
        task = self._task
        if task is not None:
            for _ in range(self._cancels):
                if task.cancelling():
                    task.uncancel()
        self._cancels = 0

    def _settled(self, value: Any) -> Any:
        """The awaitable finished: its value, unless the wait was already cut (then a
        coroutine it produced, such as a plain ``def``'s from its worker thread, is closed:
        nobody will await it)."""
        if self._cut is None:
            return value
        if type(value) is _COROUTINE:
            value.close()
        raise self._outcome()

    def _outcome(self) -> BaseException:
        if self._cut == "timeout":
            self._guard.stalled.add(id(self._owner))
            return HookTimeoutError(self._timeout_s or 0.0)
        return RunAborted("aborted")

    def _detach(self, steps: Any) -> None:
        self._guard.stalled.add(id(self._owner))
        log.error(
            "detached",
            owner=owner_name(self._owner),
            detail="it ignored cancellation; the kernel stopped waiting for it",
        )
        _close(steps)


def _close(steps: Any) -> None:
    close = getattr(steps, "close", None)
    if close is None:
        return
    try:
        close()
    except BaseException as error:  # it ignored GeneratorExit too: it is dropped as is
        log.error("detached_close_failed", error=repr(error))


def owner_name(owner: object) -> str:
    """A readable name for ``owner``: a plugin's name, a tool's, or a callable's."""
    for attribute in ("plugin", "name"):
        value = getattr(owner, attribute, None)
        if isinstance(value, str):
            return value
    return getattr(owner, "__qualname__", None) or type(owner).__name__
