"""The run loop: start run, turns (inputs, request, tools, turn end, queues), end run.

``execute_run`` is the whole lifecycle of one ``prompt()``/``resume()``. Nothing raised
inside escapes it: a failure becomes an assistant message with ``stop_reason="error"``
(or ``"aborted"``) that flows through the normal events, inside a turn, followed by
``turn_end``, ``phase_change(turn → idle)`` and ``agent_end``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import structlog

from ..contract.errors import HookError, StopRun, describe_error
from ..events import AgentEnd, AgentEndReason, AgentStart, MessageEnd
from ..logs import get_logger
from ..messages import AssistantMessage, ToolCall
from ..signal import RunAborted
from .delivery import ListenerError
from .next_turn import prepare_next_turn
from .request import request_reply
from .run import Run
from .tools import execute_tool_calls, settle_tool_calls

__all__ = ["execute_run", "take_queued"]

log = get_logger("mainspring.kernel")


def take_queued(queue: list[Any], mode: str) -> list[Any]:
    """Remove and return what a delivery takes from ``queue``: one message or all."""
    if not queue:
        return []
    if mode == "all":
        taken = list(queue)
        queue.clear()
        return taken
    return [queue.pop(0)]


async def execute_run(
    run: Run, inputs: Sequence[Any], first_queue: list[Any] | None = None
) -> None:
    """Run to completion; never raises.

    ``inputs`` open the first turn, then what ``first_queue`` delivers (by its mode; the
    steering queue when ``None``).
    """
    reason: AgentEndReason
    detail: str | None
    # the run has its own task, so this binding is scoped to it (and its tool tasks)
    structlog.contextvars.bind_contextvars(run_id=run.run_id)
    # the inputs count as undelivered until the first turn delivers them
    run.undelivered = (list(inputs), None)
    try:
        await run.emit(AgentStart)
        await run.set_phase("turn")
        reason, detail = await _turns(run, list(inputs), first_queue)
    except StopRun as stop:
        run.failing = True
        reason, detail = "stopped_by_hook", stop.reason
        await _close_turn(run, f"Tool call not executed: the run was stopped ({stop.reason})")
    except asyncio.CancelledError:
        run.failing = True
        run.abort("cancelled")
        reason, detail = "aborted", "Run cancelled"
        await _fail(run, "aborted", detail)
    except (KeyboardInterrupt, SystemExit) as stop:
        # settle first (every call answered, agent_end sent); prompt() re-raises it
        run.failing = True
        if run.exit is None:
            run.exit = stop
        run.abort(f"interrupted: {type(stop).__name__}")
        reason, detail = "aborted", f"Run interrupted ({type(stop).__name__})"
        await _fail(run, "aborted", detail)
    except BaseException as error:  # any other exception, BaseException subclasses too
        run.failing = True
        reason, detail = ("aborted", "Run aborted") if run.signal.aborted else ("error", None)
        detail = detail or _describe(error)
        if not (run.signal.aborted and isinstance(error, RunAborted)):
            log.warning("run_failed", error=detail, exc_info=error)
        await _fail(run, "aborted" if run.signal.aborted else "error", detail)
    await _end_run(run, reason, detail)


async def _deliver(run: Run, inputs: list[Any], queue: list[Any] | None) -> None:
    """Add the turn's input messages; what a failure leaves undelivered goes back on its queue."""
    run.undelivered = (list(inputs), queue)
    pending = run.undelivered[0]
    while pending:
        # taken off first: once its message_start is out, the message counts as delivered
        await run.add_message(pending.pop(0))
    run.undelivered = None


async def _turns(
    run: Run, inputs: list[Any], first_queue: list[Any] | None
) -> tuple[AgentEndReason, str | None]:
    core, settings = run.core, run.settings
    modes = {id(core.steering): settings.steering_mode, id(core.follow_up): settings.follow_up_mode}
    # queued messages are taken inside the turn that delivers them, so a failure before
    # their delivery leaves them queued
    source: list[Any] | None = core.steering if first_queue is None else first_queue
    while True:
        await run.begin_turn()
        await _deliver(run, inputs, None)
        inputs = []
        if source is not None:
            await _deliver(run, take_queued(source, modes[id(source)]), source)
            source = None
        reply = await request_reply(run)
        message = reply.message
        if message.stop_reason in ("error", "aborted"):
            await run.end_turn()
            return _failure_outcome(message)
        if message.tool_calls:
            await execute_tool_calls(run, message, reply.argument_errors)
        await run.end_turn()
        if run.signal.aborted:
            return "aborted", "Run aborted"
        if await run.hooks.should_stop_after_turn(core.snapshot, run.agent, run.signal):
            return "stopped_by_hook", "should_stop_after_turn returned True"
        if message.tool_calls and _all_terminate(run, message):
            # a hard stop: queued messages stay queued for the next run
            return "terminated", "every tool result of the batch asked to terminate"
        if core.steering:
            source = core.steering
        elif core.follow_up and not message.tool_calls:
            source = core.follow_up
        elif not message.tool_calls:
            return "stop", None
        await prepare_next_turn(run)


def _all_terminate(run: Run, message: AssistantMessage) -> bool:
    """Whether every call of ``message`` has a final result that sets ``terminate``."""
    results = run.batch_results
    for call in message.tool_calls:
        result = results.get(call.id)
        if result is None or not result.terminate:
            return False
    return True


def _failure_outcome(message: AssistantMessage) -> tuple[AgentEndReason, str | None]:
    if message.stop_reason == "aborted":
        return "aborted", message.error_message or "Run aborted"
    return "error", message.error_message or "the model request failed"


def _describe(error: BaseException) -> str:
    if isinstance(error, HookError | ListenerError):
        return str(error)
    return describe_error(error)


async def _keep_undelivered(run: Run) -> None:
    """Keep the input messages a failure kept from their turn.

    Queued messages go back to the front of their queue. The run's own inputs (the
    prompt) are delivered into the turn that carries the failure, opening it if need be,
    so the transcript keeps them and ``resume()`` can send them again.
    """
    if run.undelivered is None:
        return
    pending, queue = run.undelivered
    run.undelivered = None
    if not pending:
        return
    if queue is not None:
        queue[:0] = pending
        return
    if not run.turn_open:
        await run.set_phase("turn")
        await run.begin_turn()
    while pending:
        await run.add_message(pending.pop(0))


async def _close_turn(run: Run, reason: str) -> None:
    """End an interrupted turn: settle its tool calls, close any open message."""
    try:
        await run.finish_open_message()
        await _keep_undelivered(run)
        if run.turn_open:
            await run.leave_phase(reason)
            await _close_streaming(run, "aborted" if run.signal.aborted else "error", reason)
            await settle_tool_calls(run, reason)
            await run.end_turn()
    except Exception as error:  # delivery of failure events must never loop
        log.error("close_turn_failed", error=repr(error))


async def _close_streaming(run: Run, stop_reason: str, text: str) -> AssistantMessage | None:
    partial = run.core.streaming_message
    if partial is None:
        return None
    run.core.streaming_message = None
    content = tuple(block for block in partial.content if not isinstance(block, ToolCall))
    message = partial.model_copy(
        update={"content": content, "stop_reason": stop_reason, "error_message": text}
    )
    run.append(message)
    await run.emit(MessageEnd, message=message)
    return message


async def _fail(run: Run, stop_reason: str, text: str) -> None:
    """Carry a failure as an assistant message inside a turn (opening one if needed)."""
    try:
        await run.finish_open_message()
        await run.leave_phase(text)
        await _keep_undelivered(run)
        if not run.turn_open:
            await run.begin_turn()
        message = await _close_streaming(run, stop_reason, text)
        await settle_tool_calls(run, f"Tool call not executed: {text}")
        if message is None:
            message = AssistantMessage(
                provider=run.provider.name,
                model=run.model.id,
                stop_reason="aborted" if stop_reason == "aborted" else "error",
                error_message=text,
            )
            await run.add_message(message)
        await run.end_turn()
    except Exception as error:
        log.error("failure_delivery_failed", error=repr(error))


async def _end_run(run: Run, reason: AgentEndReason, detail: str | None) -> None:
    """``phase_change(turn → idle)`` then ``agent_end``; errors here change nothing."""
    core = run.core
    run.failing = True
    core.turn = None
    if reason in ("error", "aborted"):
        core.error_message = detail
    try:
        await run.set_phase("idle")
    except Exception as error:
        log.error("phase_change_delivery_failed", error=repr(error))
    try:
        await run.emit(AgentEnd, messages=tuple(run.new_messages), reason=reason, detail=detail)
    except Exception as error:
        log.error("agent_end_delivery_failed", error=repr(error))
    run.drop_stalled_reports()
