"""Event delivery: the subscribers, then the ``on_event`` observers, as one plan.

A subscriber (``agent.subscribe(listener)``) is called ``listener(event, signal)``; an
observer is an ``on_event`` implementation called with the leading run of ``(event,
agent, signal)`` it asks for. Both are steps of one *delivery plan*, rebuilt only when the
subscribers or the plugins change, and called in order, one event at a time.

Delivery is synchronous until a step returns an awaitable: then the rest of the delivery
is returned as an awaitable for the caller to await before it goes on (``None`` when every
step finished at once, the usual case). Awaitables are awaited under the run's
:class:`~mainspring.kernel.guard.Guard`: an abort cuts them, and one still running after
``hooks.timeout_s`` is cancelled.

Failure semantics: a step that *raises* fails the run (the first failure is raised after
every step has seen the event; while the run is already failing, failures are only
logged). A step that *times out* or ignores cancellation gets a ``hook_error`` (emitted
right after the event's delivery) and is not called again in this run; the run goes on.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, final

from ..errors import HookError, HookTimeoutError, StopRun
from ..logs import get_logger
from .relay import GENERAL, HookRelay
from .signal import RunAborted

if TYPE_CHECKING:
    from .guard import Guard
    from .signal import AbortSignal

__all__ = ["LISTENER", "Delivery", "ListenerError"]

log = get_logger("mainspring.kernel")

LISTENER = -2
"""The arity code of a subscriber: called ``listener(event, signal)``."""

# (function, arity, is_async, owner, position): owner is the Implementation of an
# observer or the subscriber itself
_Step = tuple[Any, int, bool, Any, int]


class ListenerError(Exception):
    """A subscriber raised while an event was delivered."""

    def __init__(self, listener: Any, event_type: str, cause: BaseException) -> None:
        name = listener_name(listener)
        self.listener = name
        super().__init__(
            f"subscriber {name} raised on {event_type}: {type(cause).__name__}: {cause}"
        )


def listener_name(listener: Any) -> str:
    """How a subscriber is named in errors and ``hook_error`` events."""
    return getattr(listener, "__qualname__", None) or type(listener).__name__


@final
class Delivery:
    """Delivers a run's events to the subscribers and observers (see the module)."""

    __slots__ = (
        "_listeners",
        "_plan",
        "_version",
        "agent",
        "failing",
        "guard",
        "quiet_through",
        "relay",
        "reports",
        "signal",
        "timeout_s",
    )

    def __init__(
        self,
        relay: HookRelay,
        agent: Any,
        signal: AbortSignal,
        guard: Guard,
        timeout_s: float | None,
    ) -> None:
        self.relay = relay
        self.agent = agent
        self.signal = signal
        self.guard = guard
        self.timeout_s = timeout_s
        self.failing = False
        """Set once the run is failing: failures are logged, never raised."""
        self.reports: list[HookError] = []
        """Steps that timed out or were detached, for ``hook_error`` events."""
        self.quiet_through = 0
        """Events with a ``seq`` up to this one are not delivered: a replayed run's
        listeners already saw them (see :mod:`mainspring.kernel.replay`)."""
        self._listeners: tuple[Any, ...] | None = None
        self._version = -1
        self._plan: tuple[_Step, ...] = ()

    def plan(self, listeners: tuple[Any, ...]) -> tuple[_Step, ...]:
        """The delivery plan for ``listeners`` then the current observers (cached)."""
        relay = self.relay
        if listeners is self._listeners and relay.version == self._version:
            return self._plan
        observers = relay.plan("on_event")
        steps: list[_Step] = [
            (listener, LISTENER, False, listener, index) for index, listener in enumerate(listeners)
        ]
        offset = len(steps)
        steps.extend(
            (function, arity, is_async, impl, offset + position)
            for function, arity, is_async, position, impl in observers
        )
        self._listeners, self._version, self._plan = listeners, relay.version, tuple(steps)
        return self._plan

    def deliver(self, event: Any, listeners: tuple[Any, ...]) -> Awaitable[None] | None:
        """Deliver ``event`` to every step; see the module for the failure semantics."""
        if event.seq <= self.quiet_through:
            return None
        plan = self.plan(listeners)
        agent, signal = self.agent, self.signal
        skipped = self.guard.stalled
        failure: BaseException | None = None
        for function, arity, is_async, owner, position in plan:
            if skipped and id(owner) in skipped:
                continue
            try:
                if arity == LISTENER:
                    result = function(event, signal)
                elif arity == 1:
                    result = function(event)
                elif arity == 3:
                    result = function(event, agent, signal)
                elif arity == GENERAL:
                    result = owner.general_call((event, agent, signal))
                else:
                    result = function(*(event, agent, signal)[:arity])
                if is_async or (result is not None and inspect.isawaitable(result)):
                    return self._rest(event, plan, position, result, failure)
            except BaseException as raised:
                failure = self._failed(owner, arity, event, raised, failure)
        if failure is not None:
            raise failure
        return None

    async def _rest(
        self,
        event: Any,
        plan: tuple[_Step, ...],
        position: int,
        pending: Awaitable[Any],
        failure: BaseException | None,
    ) -> None:
        """The rest of :meth:`deliver` from the step at ``position``, which is pending."""
        agent, signal, guard, timeout = self.agent, self.signal, self.guard, self.timeout_s
        watch = guard.watch
        function, arity, _, owner, _ = plan[position]
        try:
            await watch(pending, owner, timeout)
        except BaseException as raised:
            failure = self._failed(owner, arity, event, raised, failure)
        skipped = guard.stalled
        for function, arity, is_async, owner, _ in plan[position + 1 :]:
            if skipped and id(owner) in skipped:
                continue
            try:
                # as in deliver(): async observers make this loop hot too
                if arity == 1:
                    result = function(event)
                elif arity == 3:
                    result = function(event, agent, signal)
                elif arity == LISTENER:
                    result = function(event, signal)
                elif arity == GENERAL:
                    result = owner.general_call((event, agent, signal))
                else:
                    result = function(*(event, agent, signal)[:arity])
                if is_async or (result is not None and inspect.isawaitable(result)):
                    await watch(result, owner, timeout)
            except BaseException as raised:
                failure = self._failed(owner, arity, event, raised, failure)
        if failure is not None:
            raise failure

    def _failed(
        self,
        owner: Any,
        arity: int,
        event: Any,
        raised: BaseException,
        failure: BaseException | None,
    ) -> BaseException | None:
        """Record ``raised`` from one step; the failure to raise after the delivery."""
        if isinstance(raised, KeyboardInterrupt | SystemExit):
            raise raised
        if isinstance(raised, RunAborted) and self.guard.aborted:
            # the abort goes on once every step has seen the event (unless already failing)
            return failure if self.failing else (failure or raised)
        if isinstance(raised, asyncio.CancelledError) and _being_cancelled():
            raise raised
        listener = arity == LISTENER
        name = listener_name(owner) if listener else owner.plugin
        hook = "listener" if listener else "on_event"
        if isinstance(raised, HookTimeoutError) or id(owner) in self.guard.stalled:
            self.guard.stalled.add(id(owner))
            self.reports.append(HookError(hook, name, raised))
            return failure
        if listener:
            log.error("listener_failed", event_type=event.type, error=repr(raised))
            error: BaseException = ListenerError(owner, event.type, raised)
            error.__cause__ = raised
        elif isinstance(raised, StopRun | HookError):
            error = raised
        else:
            error = HookError(hook, name, raised)
            error.__cause__ = raised
        if isinstance(error, HookError):
            log.error("on_event_failed", event_type=event.type, plugin=name, error=str(error))
        # a failure (or a deliberate stop) while the run is already ending changes nothing
        if failure is None and not self.failing:
            return error
        return failure


def _being_cancelled() -> bool:
    """Whether the current task has a cancellation requested (not one a plugin invented)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
