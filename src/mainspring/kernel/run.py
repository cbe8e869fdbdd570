"""One run's context: its guard, its delivery, the hooks bound to them, event emission,
the phase machine, turns and transcript writes.

:class:`Run` is made for each ``prompt()``/``resume()`` and dropped when the run ends.
Every event of a run is numbered and emitted here, and nowhere else (:meth:`Run.emit`,
and :meth:`Run.update_emitter` for the per-delta ``message_update``), by the run's own
task, one at a time: subscribers first (in subscription order, awaited), then
``on_event`` implementations. State is changed *before* the event that reports it is
emitted. Once the run is failing, emission is "safe": a raising listener is logged and
never looped on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, final

import structlog

from ..contract.errors import HookError
from ..events import (
    BUILDERS,
    CompactionEnd,
    HookErrorEvent,
    MessageEnd,
    MessageStart,
    Phase,
    PhaseChange,
    TurnEnd,
    TurnStart,
    message_update,
)
from ..hooks.facade import Hooks
from ..hooks.guard import Guard
from ..logs import get_logger
from ..messages import AssistantMessage, ToolResultMessage
from ..signal import AbortSignal
from ..tools import ToolResult
from .approvals import PendingApprovals
from .delivery import Delivery, ListenerError

if TYPE_CHECKING:
    from ..providers.base import Model, Provider, ThinkingLevel
    from ..settings import Settings
    from ..tools import Tool
    from .options import RunOptions
    from .state import Core

__all__ = ["ListenerError", "Run"]

log = get_logger("mainspring.kernel")


@final
class Run:
    """The state and services of one active run."""

    __slots__ = (
        "agent",
        "approvals",
        "batch_results",
        "compacting",
        "context",
        "core",
        "delivery",
        "exit",
        "guard",
        "hooks",
        "last_event",
        "model",
        "new_messages",
        "opening",
        "options",
        "provider",
        "questions",
        "run_id",
        "sent",
        "settings",
        "signal",
        "system_prompt",
        "task",
        "thinking_level",
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
        options: RunOptions,
    ) -> None:
        self.agent = agent
        self.core = core
        self.run_id = run_id
        self.provider = provider
        self.model = model
        self.settings = settings
        self.system_prompt = core.system_prompt
        self.tools: dict[str, Tool] = core.tools
        """The agent's tool map at the start of the turn (never changed in place: the agent
        replaces it, and the run takes the new one at the next turn)."""
        self.signal = AbortSignal()
        self.guard = Guard(settings.hooks.abort_grace_s)
        self.hooks = hooks.bound(self.guard, settings.hooks.timeout_s)
        """The agent's hooks bound to this run's guard and deadline."""
        self.delivery = Delivery(
            hooks.relay, agent, self.signal, self.guard, settings.hooks.timeout_s
        )
        self.delivery.quiet_through = options.delivered_through
        self.delivery.recorder = options.recorder
        self.options = options
        self.task: asyncio.Task[Any] | None = None
        self.last_event: Any = None
        """The last event emitted (``agent_end`` once the run is over: its outcome)."""
        self.approvals: PendingApprovals | None = None
        """The calls waiting for approval, while they wait (``agent.approve()``)."""
        self.questions: PendingApprovals | None = None
        """A running call's question, while it waits (``agent.approve()``)."""
        self.exit: BaseException | None = None
        """A ``KeyboardInterrupt``/``SystemExit`` raised inside the run, re-raised by
        ``prompt()`` once the run has settled."""
        self.new_messages: list[Any] = []
        self.turn_open = False
        self.turn_count = 0
        self.turn_message: AssistantMessage | None = None
        self.turn_results: list[ToolResultMessage] = []
        self.batch_results: dict[str, ToolResult] = {}
        self.compacting: tuple[str, int] | None = None
        self.undelivered: tuple[list[Any], list[Any] | None] | None = None
        self.opening: Any = None
        self.sent: tuple[Any, ...] | None = None
        """The context of the latest model request, after ``transform_context``: where
        the arguments of the calls in its reply may have come from (provenance)."""
        self.context: tuple[tuple[Any, ...], int] | None = None
        """Set by ``prepare_next_turn``: ``(messages, mark)``, what requests send in place
        of the transcript's first ``mark`` messages (until a compaction replaces it)."""
        self.thinking_level: ThinkingLevel | None = None
        """Set by ``prepare_next_turn``: the thinking level of the rest of the run (else
        the agent's)."""

    @property
    def failing(self) -> bool:
        """Whether the run is ending in failure: delivery failures are only logged."""
        return self.delivery.failing

    @failing.setter
    def failing(self, value: bool) -> None:
        self.delivery.failing = value

    def abort(self, reason: str) -> None:
        """Set the signal and cut whatever the run is waiting for (see :class:`Guard`).

        Called from a thread other than the one running the run's loop, it is handed to
        the loop (the signal's callbacks and the guard belong to the loop's thread).
        """
        task = self.task
        if task is not None and not task.done():
            loop = task.get_loop()
            if not _running_in(loop):
                with contextlib.suppress(RuntimeError):  # a closed loop runs nothing more
                    loop.call_soon_threadsafe(self.abort, reason)
                return
        self.signal.set(reason)
        if task is not None and not task.done():
            self.guard.abort(task.get_loop())

    # -- emission ------------------------------------------------------------------------

    async def emit(self, factory: type[Any], **payload: Any) -> Any:
        """Build the next event of class ``factory``, :meth:`deliver` it, and return it.

        A ``hook_error`` for a subscriber or observer that stalled on an earlier event is
        emitted first: reported between two events, it lands where the grammar allows it
        (not after the ``turn_end`` it stalled on while the turn still counts as open).
        """
        failed: Exception | None = None
        if self.delivery.reports:
            try:
                await self._report_stalled()
            except Exception as error:
                # a subscriber raised on the report: the event still goes out (a
                # message_start never loses its message_end), then the run fails
                failed = error
        core = self.core
        core.seq += 1
        event = BUILDERS[factory](core.seq, self.run_id, core.turn, payload)
        self.last_event = event
        pending = self.deliver(event)
        if pending is not None:
            await pending
        if failed is not None:
            raise failed
        return event

    def update_emitter(self) -> Callable[[Any, Any], Awaitable[None] | None]:
        """The emitter of one model request's ``message_update`` events (the per-delta path).

        ``emit(message, delta)`` numbers the event, makes it the state's streaming message
        and delivers it; it returns ``None`` when the delivery finished at once, else an
        awaitable the caller must await before it goes on. One request belongs to one
        turn: the turn is read when the emitter is made.
        """
        core, run_id, turn = self.core, self.run_id, self.core.turn
        deliver = self.delivery.deliver

        def emit(message: Any, delta: Any) -> Awaitable[None] | None:
            core.seq = seq = core.seq + 1
            update = message_update(seq, run_id, turn, message, delta)
            core.streaming = update
            return deliver(update, core.listeners)

        return emit

    def deliver(self, event: Any) -> Awaitable[None] | None:
        """Deliver ``event`` to every subscriber, then to ``on_event`` (see
        :class:`~mainspring.kernel.delivery.Delivery`).

        ``None`` when the delivery finished at once (the usual case), else an awaitable
        the caller must await before it goes on.
        """
        return self.delivery.deliver(event, self.core.listeners)

    async def _report_stalled(self) -> None:
        reports = self.delivery.reports
        while reports:
            await self.report_hook_error(reports.pop(0), "not called again in this run")

    def drop_stalled_reports(self) -> None:
        """After ``agent_end`` nothing may be emitted: log what is left to report."""
        for error in self.delivery.reports:
            log.warning("hook_error", hook=error.hook, plugin=error.plugin, error=error.cause_text)
        self.delivery.reports.clear()

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
        if self.delivery.reports:
            await self._report_stalled()  # between turns, before the turn counts as open
        if self.core.tools is not self.tools:
            # configure(tools=...) during the run (a plugin refreshing its tools): the
            # new list applies from this turn on, never to a batch already running
            self.tools = self.core.tools
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


def _running_in(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether this thread is running ``loop``."""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
