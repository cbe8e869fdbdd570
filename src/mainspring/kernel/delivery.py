"""Event delivery: the subscribers, then the ``on_event`` observers, as one plan.

A subscriber (``agent.subscribe(listener)``) is called ``listener(event, signal)``; an
observer is an ``on_event`` implementation called with the leading run of ``(event,
agent, signal)`` it asks for. Both are steps of one *delivery plan*, rebuilt only when the
subscribers or the plugins change, and called in order, one event at a time, with
``(event, agent, signal)``: the plan is :class:`~mainspring.hooks.scan.Steps`, called by
generated code while the steps return nothing (the usual case).

Delivery is synchronous until a step returns an awaitable: then the rest of the delivery
is returned as an awaitable for the caller to await before it goes on (``None`` when every
step finished at once, the usual case). Awaitables are awaited under the run's
:class:`~mainspring.hooks.guard.Guard`: an abort cuts them, and one still running after
``hooks.timeout_s`` is cancelled.

Failure semantics: a step that *raises* fails the run (the first failure is raised after
every step has seen the event; while the run is already failing, failures are only
logged). A step that *times out* or ignores cancellation gets a ``hook_error`` (emitted
right after the event's delivery) and is not called again in this run; the run goes on.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, final

from ..contract.errors import HookError, HookTimeoutError, StopRun
from ..hooks.failures import failure_of, passes_through
from ..hooks.plan import HookRelay, Implementation, calls_of
from ..hooks.scan import Steps, scan
from ..logs import get_logger
from ..signal import RunAborted

if TYPE_CHECKING:
    from ..hooks.guard import Guard
    from ..signal import AbortSignal

__all__ = ["Delivery", "ListenerError"]

log = get_logger("mainspring.kernel")

_SUBSCRIBER = (0, 2)
"""The positions in ``(event, agent, signal)`` a subscriber is called with."""


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
        "recorder",
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
        listeners already saw them (see :class:`~mainspring.RunOptions`)."""
        self.recorder: Any = None
        """Delivered to before every listener and observer (see
        :class:`~mainspring.RunOptions`); set before the first event."""
        self._listeners: tuple[Any, ...] | None = None
        self._version = -1
        self._plan: tuple[Steps, tuple[Any, ...]] = (Steps.of(()), ())

    def plan(self, listeners: tuple[Any, ...]) -> tuple[Steps, tuple[Any, ...]]:
        """The delivery plan for ``listeners`` then the current observers (cached):
        ``(steps, owners)``, where ``steps`` delivers to ``owners[i]`` (the subscriber
        itself, or the observer's :class:`Implementation`).

        An observer marked :func:`~mainspring.contract.markers.observes_when` is left out of
        the plan while its predicate says it has nothing to do for this agent.
        """
        relay = self.relay
        if listeners is self._listeners and relay.version == self._version:
            return self._plan
        agent = self.agent
        observers = tuple(
            impl for impl in relay.plan("on_event") if impl.wanted is None or impl.wanted(agent)
        )
        self._listeners, self._version = listeners, relay.version
        if self.recorder is None and not listeners:
            # observers alone: the built-ins' plan is one object every run shares
            compiled = calls_of(observers)
            self._plan = (compiled.steps, compiled.plan)
            return self._plan
        first = () if self.recorder is None else (self.recorder,)
        owners: tuple[Any, ...] = (*first, *listeners, *observers)
        steps: list[tuple[Callable[..., Any], tuple[int, ...] | None]] = [
            (listener, _SUBSCRIBER) for listener in (*first, *listeners)
        ]
        steps.extend(impl.step for impl in observers)
        self._plan = (Steps.of(steps), owners)
        return self._plan

    def deliver(self, event: Any, listeners: tuple[Any, ...]) -> Awaitable[None] | None:
        """Deliver ``event`` to every step; see the module for the failure semantics."""
        if event.seq <= self.quiet_through:
            return None
        steps, owners = self.plan(listeners)
        args = (event, self.agent, self.signal)
        skipped = self.guard.stalled
        failure: BaseException | None = None
        position, count = 0, len(owners)
        while position < count:
            end = count
            if skipped:  # one step at a time: a stalled one is not called again
                if id(owners[position]) in skipped:
                    position += 1
                    continue
                end = position + 1
            position, result, raised = scan(steps, args, position, end)
            if position == end:
                continue
            if raised is not None:
                failure = self._failed(owners[position], event, raised, failure)
            elif inspect.isawaitable(result):
                return self._rest(args, owners, position, result, failure)
            position += 1
        if failure is not None:
            raise failure
        return None

    async def _rest(
        self,
        args: tuple[Any, ...],
        owners: tuple[Any, ...],
        position: int,
        pending: Awaitable[Any],
        failure: BaseException | None,
    ) -> None:
        """The rest of :meth:`deliver` from the step at ``position``, which is pending
        (each step called on its own: what is left is slow anyway)."""
        guard, timeout = self.guard, self.timeout_s
        event = args[0]
        try:
            await guard.watch(pending, owners[position], timeout)
        except BaseException as raised:
            failure = self._failed(owners[position], event, raised, failure)
        skipped = guard.stalled
        for step in range(position + 1, len(owners)):
            owner = owners[step]
            if skipped and id(owner) in skipped:
                continue
            try:
                if isinstance(owner, Implementation):
                    result = owner.call(args)
                else:  # a subscriber
                    result = owner(event, args[2])
                if result is not None and inspect.isawaitable(result):
                    ready, pending_rest = guard.step(result)
                    if not ready:
                        await guard.follow(pending_rest, owner, timeout)
            except BaseException as raised:
                failure = self._failed(owner, event, raised, failure)
        if failure is not None:
            raise failure

    def _failed(
        self,
        owner: Any,
        event: Any,
        raised: BaseException,
        failure: BaseException | None,
    ) -> BaseException | None:
        """Record ``raised`` from one step; the failure to raise after the delivery."""
        if isinstance(raised, RunAborted) and self.guard.aborted:
            # the abort goes on once every step has seen the event (unless already failing)
            return failure if self.failing else (failure or raised)
        if not isinstance(raised, StopRun) and passes_through(raised, self.guard):
            raise raised
        listener = not isinstance(owner, Implementation)
        name = listener_name(owner) if listener else owner.plugin
        hook = "listener" if listener else "on_event"
        if isinstance(raised, HookTimeoutError) or id(owner) in self.guard.stalled:
            # a stall: reported, and skipped for the rest of the run
            self.guard.stalled.add(id(owner))
            self.reports.append(HookError(hook, name, raised))
            return failure
        if listener:
            log.error("listener_failed", event_type=event.type, error=repr(raised))
            error: BaseException = ListenerError(owner, event.type, raised)
            error.__cause__ = raised
        elif isinstance(raised, StopRun):
            error = raised
        else:
            error = failure_of(hook, name, raised)
        if isinstance(error, HookError):
            log.error("on_event_failed", event_type=event.type, plugin=name, error=str(error))
        # a failure (or a deliberate stop) while the run is already ending changes nothing
        if failure is None and not self.failing:
            return error
        return failure
