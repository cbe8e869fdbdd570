"""The tool executor: prepare serially, execute concurrently, report in a stable order.

For one assistant message:

1. **Preparation**, serially in call order: ``tool_execution_start``, lookup, argument
   validation, then the ``before_tool_call`` gates (a ``tool_decision`` per call that
   reached them). A call that fails preparation gets its ``tool_execution_end`` at once.
2. **Execution**: concurrently, or one at a time when a tool of the batch is ``sequential``.
   Updates and ends follow completion order; ``after_tool_result`` runs as each completes.
3. **Results**: one tool-result message per call, in call order.

Every call gets exactly one result, whatever happens: unknown tool, invalid arguments,
blocked, raised, timed out, aborted, or cut off by the output limit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any, final

import structlog
from pydantic import BaseModel

from ..contract.decisions import ApprovalRequest
from ..contract.errors import HookTimeoutError
from ..events import (
    ToolApprovalRequest,
    ToolDecision,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
)
from ..hooks.guard import MIN_WAIT_S, Guard
from ..jsonable import to_jsonable
from ..logs import get_logger
from ..messages import (
    AssistantMessage,
    ToolArgs,
    ToolCall,
    ToolResultMessage,
    thaw,
)
from ..signal import RunAborted
from ..tools import Tool, ToolArgumentsError, ToolResult
from .approvals import (
    Decision,
    PendingApprovals,
    decide_approvals,
    decide_question,
    remembered,
    remembrance,
)
from .tool_context import Asked, CallContext, FileLocks, Reports, cap, to_result
from .tool_meaning import gate_inputs, label_result

if TYPE_CHECKING:
    from .run import Run

__all__ = ["FileLocks", "execute_tool_calls", "settle_tool_calls"]

log = get_logger("mainspring.kernel")


@final
class _Prepared:
    __slots__ = ("args", "asked", "call", "context", "guard", "index", "tool")

    def __init__(self, index: int, call: ToolCall, tool: Tool, args: Any, grace_s: float) -> None:
        self.index = index
        self.call = call
        self.tool = tool
        self.args = args
        self.context: CallContext | None = None
        self.guard = Guard(grace_s)
        """Watches this call's execution: its timeout, abort, detachment."""
        self.asked: ApprovalRequest | None = None
        """Set when a gate asked for approval: the call waits for a decision."""


async def _finish_call(run: Run, call: ToolCall, result: ToolResult) -> None:
    details = result.details
    if details is not None:
        safe = to_jsonable(details)
        if safe is not details:
            result = result.model_copy(update={"details": safe})
    run.batch_results[call.id] = result
    run.core.pending_tool_calls.pop(call.id, None)
    await run.emit(
        ToolExecutionEnd,
        tool_call_id=call.id,
        tool_name=call.name,
        result=result,
        is_error=result.is_error,
    )


async def _prepare(
    run: Run, index: int, call: ToolCall, argument_errors: Mapping[str, str]
) -> _Prepared | None:
    run.core.pending_tool_calls[call.id] = None
    await run.emit(
        ToolExecutionStart, tool_call_id=call.id, tool_name=call.name, args=thaw(call.arguments)
    )
    tool = run.tools.get(call.name)
    if tool is None:
        available = ", ".join(sorted(run.tools)) or "none"
        await _finish_call(
            run,
            call,
            ToolResult.error(f'Tool "{call.name}" not found. Available tools: {available}'),
        )
        return None
    if call.id in argument_errors:
        text = f'Invalid arguments for tool "{call.name}": {argument_errors[call.id]}'
        await _finish_call(run, call, ToolResult.error(text))
        return None
    try:
        args = tool.validate(call.arguments)
    except ToolArgumentsError as error:
        await _finish_call(run, call, ToolResult.error(str(error)))
        return None
    hooks = run.hooks
    shown: Any = args  # no gate, nothing is shown
    provenance = labels = None
    if hooks.relay.has("before_tool_call"):
        # the gates see a read-only copy: none can change what the tool runs with
        try:
            shown = gate_view(args)
        except Exception as error:  # a model whose serialiser raises: nothing to judge
            text = (
                f'Tool call "{call.name}" was blocked: its arguments could not be shown to '
                f"the permission gates ({type(error).__name__}: {error})"
            )
            await _finish_call(run, call, ToolResult.error(text))
            return None
        # provenance and labels, made only for the gates that take them
        provenance, labels = gate_inputs(run, call)

    def revalidate(arguments: Any) -> ToolArgs:
        # an edit is validated like the model's arguments; later gates see it as a view
        return gate_view(tool.validate(arguments))

    decision = await hooks.before_tool_call(
        call,
        shown,
        tool,
        run.agent,
        run.signal,
        run.report_hook_error,
        revalidate,
        provenance=provenance,
        labels=labels,
    )
    edits: dict[str, Any] = {}
    if decision.edited_by:
        # the gates edited the call: what runs is the edited call, validated again
        assert decision.call is not None
        call = decision.call
        try:
            args = tool.validate(call.arguments)
        except ToolArgumentsError as error:  # a prepare_arguments shim that changed its mind
            await _finish_call(run, call, ToolResult.error(str(error)))
            return None
        edits = {"edited_by": decision.edited_by, "arguments": thaw(call.arguments)}
    prepared = _Prepared(index, call, tool, args, run.settings.tools.abort_grace_s)
    if decision.asked is not None:
        plugin, reason = decision.asked
        request = ApprovalRequest(call.id, call.name, call.arguments, reason, plugin)
        if remembered(run, request):
            await run.emit(
                ToolDecision,
                tool_call_id=call.id,
                tool_name=call.name,
                decision="allow",
                plugin=None,
                reason="allowed earlier in this session",
                decided_by="remembered",
                **edits,
            )
            return prepared
        prepared.asked = request
        if run.approvals is None:
            run.approvals = PendingApprovals()
        run.approvals.add(request)  # agent.approve() may answer from now on
        await run.emit(
            ToolApprovalRequest,
            tool_call_id=call.id,
            tool_name=call.name,
            args=thaw(call.arguments),
            reason=reason,
            plugin=plugin,
        )
        return prepared  # decided with the rest of the batch (see _approve)
    await run.emit(
        ToolDecision,
        tool_call_id=call.id,
        tool_name=call.name,
        decision="block" if decision.blocked else "allow",
        plugin=decision.plugin,
        reason=decision.reason,
        rule=decision.rule,
        **edits,
    )
    if decision.blocked:
        text = f'Tool call "{call.name}" was blocked by {decision.plugin}: {decision.reason}'
        await _finish_call(run, call, ToolResult.error(text))
        return None
    return prepared


def gate_view(args: Any) -> ToolArgs:
    """What the gates see of validated ``args``: one :class:`~mainspring.ToolArgs` shape
    for every tool (a model's fields under their schema names, or the JSON-Schema dict)."""
    if isinstance(args, BaseModel):
        return ToolArgs.of(args.model_dump(by_alias=True))
    return ToolArgs.of(args)


async def _approve(run: Run, batch: list[_Prepared]) -> list[_Prepared]:
    """Decide the calls of ``batch`` a gate asked about; the calls that may run."""
    pending = run.approvals
    if pending is None:
        return batch
    try:
        decisions = await decide_approvals(run, pending)
    finally:
        run.approvals = None
    allowed = []
    for prepared in batch:
        request = prepared.asked
        if request is None:
            allowed.append(prepared)
            continue
        call = prepared.call
        decision = decisions[call.id]
        if decision.allow and decision.remember is not None:
            try:
                kept = remembrance(call.name, thaw(call.arguments), decision)
            except ValueError as error:  # a scope the call is outside of: fail closed
                reason = f"the approval asked to remember a scope that does not fit: {error}"
                decision = Decision(False, decision.decided_by, decision.plugin, reason)
            else:
                run.core.remembered_approvals.append(kept)
        await run.emit(
            ToolDecision,
            tool_call_id=call.id,
            tool_name=call.name,
            decision="allow" if decision.allow else "block",
            plugin=decision.plugin,
            reason=decision.reason,
            decided_by=decision.decided_by,
        )
        if decision.allow:
            allowed.append(prepared)
            continue
        who = decision.plugin or decision.decided_by.replace("_", " ")
        text = (
            f'Tool call "{call.name}" was not approved ({who}): {decision.reason or "refused"}. '
            f"It needed approval because {request.plugin} said: {request.reason}"
        )
        await _finish_call(run, call, ToolResult.error(text))
    return allowed


async def _invoke(run: Run, prepared: _Prepared, queue: Reports) -> None:
    """Execute one call in its own task and queue its result; never raises.

    The tool runs under the call's guard: its ``timeout_s`` holds even if it swallows
    the cancellation (it is detached after the grace period). A ``KeyboardInterrupt`` or
    ``SystemExit`` answers the call with an error, aborts the run, and is re-raised by
    ``prompt()`` once the run has settled.
    """
    tool, context = prepared.tool, prepared.context
    assert context is not None
    structlog.contextvars.bind_contextvars(tool_call_id=prepared.call.id, tool_name=tool.name)
    try:
        value = await prepared.guard.watch(tool.run(prepared.args, context), tool, tool.timeout_s)
        result = to_result(value)
    except HookTimeoutError:
        result = ToolResult.error(f'Tool "{tool.name}" timed out after {tool.timeout_s:g} s')
    except RunAborted:
        result = ToolResult.error("Tool call aborted")
    except asyncio.CancelledError:
        context._finished = True
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # cancelled from outside the kernel (shutdown)
        result = ToolResult.error(f'Tool "{tool.name}" failed: it raised CancelledError')
    except (KeyboardInterrupt, SystemExit) as stop:
        result = ToolResult.error(f'Tool "{tool.name}" was interrupted ({type(stop).__name__})')
        if run.exit is None:
            run.exit = stop
        run.abort(f"interrupted: {type(stop).__name__}")
    except BaseException as error:
        detail = str(error) or type(error).__name__
        result = ToolResult.error(f'Tool "{tool.name}" failed: {type(error).__name__}: {detail}')
    context._finished = True
    queue.put_nowait((prepared.index, True, result))


async def _execute(run: Run, batch: list[_Prepared]) -> None:
    queue = Reports()
    locks: FileLocks = run.core.file_locks
    for prepared in batch:
        prepared.context = CallContext(
            prepared.call.id, prepared.index, run.signal, queue, locks, prepared.guard
        )
    by_index = {prepared.index: prepared for prepared in batch}
    sequential = any(prepared.tool.sequential for prepared in batch)
    waiting = list(batch)
    tasks: dict[int, asyncio.Task[None]] = {}
    _launch(run, queue, waiting, tasks, 1 if sequential else len(waiting))
    limit = run.settings.tools.max_result_chars
    watch = run.guard.watch
    try:
        while tasks and not run.signal.aborted:
            if not queue:
                await watch(queue.arrival())
            index, done, value = queue.pop()
            prepared = by_index[index]
            if index not in tasks:
                continue  # a late report of a call already answered
            if not done:
                if isinstance(value, Asked):
                    await _put_question(run, prepared.call, value)
                else:
                    await _report_update(run, prepared.call, value)
                continue
            tasks.pop(index)
            result = await run.hooks.after_tool_result(
                prepared.call, value, run.agent, run.signal, run.report_hook_error
            )
            result = await label_result(run, prepared.call, prepared.tool, value, result)
            await _finish_call(run, prepared.call, cap(result, limit))
            if sequential and waiting and not run.signal.aborted:
                _launch(run, queue, waiting, tasks, 1)
    except RunAborted:
        if not run.guard.aborted:
            raise
    finally:
        await _stop_tasks(batch, tasks, run.settings.tools.abort_grace_s)
    for prepared in batch:
        if prepared.call.id not in run.batch_results:
            await _finish_call(run, prepared.call, ToolResult.error("Tool call aborted"))


def _launch(
    run: Run,
    queue: Reports,
    waiting: list[_Prepared],
    tasks: dict[int, asyncio.Task[None]],
    count: int,
) -> None:
    """Start the first ``count`` waiting calls, each in its own task."""
    for prepared in waiting[:count]:
        tasks[prepared.index] = asyncio.create_task(_invoke(run, prepared, queue))
    del waiting[:count]


async def _put_question(run: Run, call: ToolCall, asked: Asked) -> None:
    """Announce a running call's question and let the approvers answer it (fail closed)."""
    if asked.answer.done():
        return  # the call stopped waiting
    question = asked.question
    described = question.describe()
    request = ApprovalRequest(
        call.id, call.name, described, question.message, question.asker, question
    )

    def announce() -> Awaitable[Any]:
        return run.emit(
            ToolApprovalRequest,
            tool_call_id=call.id,
            tool_name=call.name,
            args=thaw(call.arguments),
            reason=question.message,
            plugin=question.asker,
            question=described,
        )

    answer = await decide_question(run, request, announce)
    log.info(
        "question_answered",
        tool_call_id=call.id,
        asker=question.asker,
        accepted=answer.accepted,
        decided_by=answer.decided_by,
        reason=answer.reason,
    )
    if not asked.answer.done():
        asked.answer.set_result(answer)


async def _report_update(run: Run, call: ToolCall, partial: Any) -> None:
    """Emit a progress report of ``call``, through ``filter_tool_update`` if implemented."""
    if run.hooks.relay.has("filter_tool_update"):
        keep, partial = await run.hooks.filter_tool_update(
            call, partial, run.agent, run.signal, run.report_hook_error
        )
        if not keep:
            return
    await run.emit(
        ToolExecutionUpdate,
        tool_call_id=call.id,
        tool_name=call.name,
        partial_result=to_jsonable(partial),
    )


async def _stop_tasks(
    batch: list[_Prepared], tasks: dict[int, asyncio.Task[None]], grace_s: float
) -> None:
    """Abort every call still running and wait until their tasks have ended.

    Each call's guard cancels its tool and detaches one that ignores the cancellation
    after ``grace_s``, so the wait is bounded; nothing is left running when it returns.
    """
    pending = {index: task for index, task in tasks.items() if not task.done()}
    if not pending:
        return
    loop = asyncio.get_running_loop()
    for prepared in batch:
        if prepared.index in pending:
            if prepared.context is not None:
                prepared.context._finished = True
            prepared.guard.abort(loop)
    _, stuck = await asyncio.wait(pending.values(), timeout=grace_s + 2 * MIN_WAIT_S + 0.5)
    for task in stuck:  # not expected: a guard detaches within grace_s
        log.error("tool_task_not_stopped", task=task.get_name())
        task.cancel()


def _length_cut_result(call: ToolCall, stop_reason: str) -> ToolResult:
    why = (
        "the output token limit"
        if stop_reason == "length"
        else "the provider because it repeated itself"
    )
    return ToolResult.error(
        f'Tool call "{call.name}" was not executed: the reply was cut off by {why} '
        f"(stop_reason={stop_reason}), so its arguments may be incomplete."
    )


async def execute_tool_calls(
    run: Run, message: AssistantMessage, argument_errors: Mapping[str, str]
) -> None:
    """Run every tool call of ``message``; its results join the transcript in call order."""
    calls = message.tool_calls
    batch: list[_Prepared] = []
    if message.stop_reason in ("length", "repetition"):
        for call in calls:
            run.core.pending_tool_calls[call.id] = None
            await run.emit(
                ToolExecutionStart,
                tool_call_id=call.id,
                tool_name=call.name,
                args=thaw(call.arguments),
            )
            await _finish_call(run, call, _length_cut_result(call, message.stop_reason))
    else:
        for index, call in enumerate(calls):
            if run.signal.aborted:
                break
            prepared = await _prepare(run, index, call, argument_errors)
            if prepared is not None:
                batch.append(prepared)
        if batch and not run.signal.aborted:
            batch = await _approve(run, batch)
        run.approvals = None
        if batch and not run.signal.aborted:
            await _execute(run, batch)
    await settle_tool_calls(run, "Tool call aborted" if run.signal.aborted else "Tool call skipped")


async def settle_tool_calls(run: Run, reason: str) -> None:
    """Give every call of the turn's assistant message exactly one result, in call order.

    Calls still pending get their ``tool_execution_end`` with an error ``reason``; then
    each call without a tool-result message gets one (its final result if it has one).
    Used at the end of every batch and when a run fails, stops or aborts mid-batch.
    """
    message = run.turn_message
    if message is None:
        return
    calls = message.tool_calls
    by_id = {call.id: call for call in calls}
    for call_id in list(run.core.pending_tool_calls):
        call = by_id.get(call_id)
        if call is None:
            run.core.pending_tool_calls.pop(call_id, None)
            continue
        await _finish_call(run, call, ToolResult.error(reason))
    answered = {result.tool_call_id for result in run.turn_results}
    for call in calls:
        if call.id in answered:
            continue
        result = run.batch_results.get(call.id) or ToolResult.error(reason)
        await run.add_message(
            ToolResultMessage(
                tool_call_id=call.id,
                tool_name=call.name,
                content=result.content,
                details=result.details,
                is_error=result.is_error,
                labels=result.labels,
            )
        )
