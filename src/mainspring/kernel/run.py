"""One run's context: event emission, the phase machine, turns and transcript writes.

Every event of a run is emitted here, by the run's own task, one at a time: subscribers
first (in subscription order, awaited), then ``on_event`` implementations. State is
changed *before* the event that reports it is emitted. Once the run is failing, emission
is "safe": a raising listener is logged and never looped on.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, final

import structlog

from ..errors import HookError, StopRun
from ..logs import get_logger
from ..messages import AssistantMessage, ToolResultMessage
from ..tools import ToolResult
from .events import (
    BUILDERS,
    CompactionEnd,
    HookErrorEvent,
    MessageEnd,
    MessageStart,
    Phase,
    PhaseChange,
    TurnEnd,
    TurnStart,
)
from .hooks import Hooks
from .signal import AbortSignal

if TYPE_CHECKING:
    from ..providers.base import Model, Provider
    from ..settings import Settings
    from ..tools import Tool
    from .state import Core

__all__ = ["ListenerError", "Run"]

log = get_logger("mainspring.kernel")


class ListenerError(Exception):
    """A subscriber raised while an event was delivered."""

    def __init__(self, listener: Any, event_type: str, cause: BaseException) -> None:
        name = getattr(listener, "__qualname__", None) or type(listener).__name__
        self.listener = name
        super().__init__(
            f"subscriber {name} raised on {event_type}: {type(cause).__name__}: {cause}"
        )


@final
class Run:
    """The state and services of one active run."""

    __slots__ = (
        "abortable",
        "agent",
        "batch_results",
        "compacting",
        "core",
        "failing",
        "hooks",
        "model",
        "new_messages",
        "opening",
        "provider",
        "run_id",
        "settings",
        "signal",
        "system_prompt",
        "task",
        "tools",
        "turn_count",
        "turn_message",
        "turn_open",
        "turn_results",
        "undelivered",
    )

    def __init__(
        self,
        *,
        agent: Any,
        core: Core,
        hooks: Hooks,
        run_id: str,
        provider: Provider,
        model: Model,
        settings: Settings,
    ) -> None:
        self.agent = agent
        self.core = core
        self.hooks = hooks
        self.run_id = run_id
        self.provider = provider
        self.model = model
        self.settings = settings
        self.system_prompt = core.system_prompt
        self.tools: dict[str, Tool] = dict(core.tools)
        self.signal = AbortSignal()
        self.task: asyncio.Task[Any] | None = None
        self.abortable = False
        self.failing = False
        self.new_messages: list[Any] = []
        self.turn_open = False
        self.turn_count = 0
        self.turn_message: AssistantMessage | None = None
        self.turn_results: list[ToolResultMessage] = []
        self.batch_results: dict[str, ToolResult] = {}
        self.compacting: tuple[str, int] | None = None
        self.undelivered: tuple[list[Any], list[Any] | None] | None = None
        self.opening: Any = None

    # -- emission ------------------------------------------------------------------------

    async def emit(self, factory: type[Any], **payload: Any) -> None:
        """Build the next event of class ``factory`` and :meth:`deliver` it."""
        core = self.core
        core.seq += 1
        pending = self.deliver(BUILDERS[factory](core.seq, self.run_id, core.turn, payload))
        if pending is not None:
            await pending

    def deliver(self, event: Any) -> Awaitable[None] | None:
        """Deliver ``event`` to every listener, then to ``on_event``.

        Synchronous until a listener or observer returns an awaitable: then the rest of
        the delivery is returned as an awaitable, which the caller must await before it
        goes on (``None`` when everything finished at once, the usual case). Every
        listener and observer sees every event, even after one of them failed; the first
        failure is raised after all of them (unless the run is already failing).
        """
        signal = self.signal
        failure: Exception | None = None
        listeners = self.core.listeners
        index = 0
        for listener in listeners:
            index += 1
            try:
                result = listener(event, signal)
            except Exception as error:
                failure = self._listener_failed(listener, event, error, failure)
                continue
            if result is not None and inspect.isawaitable(result):
                return self._deliver_rest(event, listener, result, listeners[index:], failure)
        try:
            pending = self.hooks.on_event(event, self.agent, signal)
        except (HookError, StopRun) as error:
            failure = self._observer_failed(event, error, failure)
            pending = None
        if pending is not None:
            return self._observe_rest(event, pending, failure)
        if failure is not None:
            raise failure
        return None

    async def _deliver_rest(
        self,
        event: Any,
        listener: Any,
        pending: Awaitable[Any],
        rest: tuple[Any, ...],
        failure: Exception | None,
    ) -> None:
        """The rest of :meth:`deliver` once ``listener`` returned an awaitable."""
        try:
            await pending
        except Exception as error:
            failure = self._listener_failed(listener, event, error, failure)
        signal = self.signal
        for later in rest:
            try:
                result = later(event, signal)
                if result is not None and inspect.isawaitable(result):
                    await result
            except Exception as error:
                failure = self._listener_failed(later, event, error, failure)
        try:
            observed = self.hooks.on_event(event, self.agent, signal)
            if observed is not None:
                await observed
        except (HookError, StopRun) as error:
            failure = self._observer_failed(event, error, failure)
        if failure is not None:
            raise failure

    def _listener_failed(
        self, listener: Any, event: Any, error: Exception, failure: Exception | None
    ) -> Exception | None:
        log.error("listener_failed", event_type=event.type, error=repr(error))
        if failure is None and not self.failing:
            failure = ListenerError(listener, event.type, error)
            failure.__cause__ = error
        return failure

    async def _observe_rest(
        self, event: Any, pending: Awaitable[None], failure: Exception | None
    ) -> None:
        try:
            await pending
        except (HookError, StopRun) as error:
            failure = self._observer_failed(event, error, failure)
        if failure is not None:
            raise failure

    def _observer_failed(
        self, event: Any, error: HookError | StopRun, failure: Exception | None
    ) -> Exception | None:
        if isinstance(error, HookError):
            log.error(
                "on_event_failed", event_type=event.type, plugin=error.plugin, error=str(error)
            )
        # a deliberate stop while the run is already ending changes nothing
        if failure is None and not self.failing:
            failure = error
        return failure

    async def report_hook_error(self, error: HookError, outcome: str) -> None:
        """Emit ``hook_error`` for a failure the kernel contained."""
        log.warning("hook_error", hook=error.hook, plugin=error.plugin, error=error.cause_text)
        await self.emit(
            HookErrorEvent,
            hook=error.hook,
            plugin=error.plugin,
            error=error.cause_text,
            outcome=outcome,
        )

    # -- phases and turns ---------------------------------------------------------------

    async def set_phase(self, phase: Phase) -> None:
        """Move the phase machine and emit ``phase_change``."""
        previous = self.core.phase
        if previous == phase:
            return
        self.core.phase = phase
        await self.emit(PhaseChange, previous=previous, phase=phase)

    async def leave_phase(self, why: str) -> None:
        """Back to ``turn`` from an interrupted compaction or retry (failure paths)."""
        if self.compacting is not None:
            reason, tokens = self.compacting
            self.compacting = None
            await self.emit(
                CompactionEnd,
                reason=reason,
                tokens_before=tokens,
                tokens_after=tokens,
                error=f"interrupted: {why}",
            )
        await self.set_phase("turn")

    async def begin_turn(self) -> None:
        """Open the next turn: ``turn_start``."""
        self.core.turn = self.turn_count
        structlog.contextvars.bind_contextvars(turn=self.turn_count)
        self.turn_count += 1
        self.turn_open = True
        self.turn_message = None
        self.turn_results = []
        self.batch_results = {}
        await self.emit(TurnStart)

    async def end_turn(self) -> None:
        """Close the turn: ``turn_end`` with its assistant message and results."""
        self.turn_open = False
        self.core.turns_completed = self.turn_count
        try:
            await self.emit(
                TurnEnd, message=self.turn_message, tool_results=tuple(self.turn_results)
            )
        finally:
            self.core.turn = None

    # -- transcript ---------------------------------------------------------------------

    def append(self, message: Any) -> None:
        """Add ``message`` to the transcript and to this run's new messages."""
        self.core.messages.append(message)
        self.new_messages.append(message)
        if isinstance(message, AssistantMessage):
            self.turn_message = message
        elif isinstance(message, ToolResultMessage):
            self.turn_results.append(message)

    async def add_message(self, message: Any) -> None:
        """Emit ``message_start``/``message_end`` for a complete message and keep it."""
        self.opening = message
        await self.emit(MessageStart, message=message)
        self.append(message)
        self.opening = None
        await self.emit(MessageEnd, message=message)

    async def finish_open_message(self) -> None:
        """End a message whose ``message_start`` was delivered but a failure cut off."""
        message, self.opening = self.opening, None
        if message is not None:
            self.append(message)
            await self.emit(MessageEnd, message=message)
