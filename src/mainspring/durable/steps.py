"""Checkpoints of a durable run: model requests and tool calls as DBOS steps.

- :class:`DurableProvider` puts a provider behind one step per model request. The step
  streams the real reply, passing each delta to the kernel as it arrives, and checkpoints
  the whole delta sequence (and the :class:`~mainspring.ProviderError` that ended it, if
  one did). Replayed after a crash, the step answers from its checkpoint: the kernel gets
  the same deltas and assembles the same message, with the same events. A request the
  process died during has no checkpoint and is sent again.
- :func:`durable_tool` wraps a tool so that each call is one step. The step's checkpoint
  is the call's *final* result, after the result filters, the redactors and the size cap
  (never what the tool returned): the tool's value goes to the kernel at once, and the
  step ends when the kernel ends the call, with the result its ``tool_execution_end``
  carries; that event is journaled only once the checkpoint is written. The step also
  records how many progress reports the call made; a replay re-reports a placeholder
  for each (the originals were journaled before its end). A call the process died
  during is run again only if the tool is ``idempotent``; otherwise it gets an error
  result saying so, and the model decides what to do.
- :func:`step` runs any function of a plugin as a step (a summariser's model call, a
  lookup), so the plugin stays deterministic across a recovery.

Before a tool runs, the events the run recorded so far are written to its journal
(:func:`write_journal`) and the call's step is marked started in the same transaction; a
step found marked by an earlier execution, without a checkpoint, is a call the process
died during.

Outside a DBOS workflow (or inside another step) every wrapper calls straight through.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, Protocol, TypeVar

from dbos import DBOS

from ..messages import Usage
from ..providers.base import (
    ModelRequest,
    Provider,
    ProviderError,
    StreamDone,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageReport,
)
from ..signal import AbortSignal
from ..tools import Tool, ToolResult

__all__ = [
    "INTERRUPTED",
    "CallEnding",
    "CheckpointError",
    "DurableProvider",
    "JournalWriter",
    "RunCheckpoints",
    "bind_run",
    "checkpoint_failed",
    "delta_to_dict",
    "durable_tool",
    "execution_over",
    "in_workflow",
    "step",
    "write_journal",
]

T = TypeVar("T")

INTERRUPTED = (
    'The process running tool "{name}" stopped during this call; it was not run again '
    "because the tool is not marked idempotent. Its effects, if any, are unknown."
)
"""The error result of a non-idempotent call the process died during."""

_DELTAS: dict[str, type[Any]] = {
    "text_delta": TextDelta,
    "thinking_delta": ThinkingDelta,
    "tool_call_start": ToolCallStart,
    "tool_call_delta": ToolCallDelta,
    "tool_call_end": ToolCallEnd,
    "usage": UsageReport,
    "done": StreamDone,
}


def in_workflow() -> bool:
    """Whether the caller runs in a DBOS workflow, outside any step."""
    return DBOS.workflow_id is not None and DBOS.step_id is None


async def step(name: str, function: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
    """Await ``function(*args)`` as a checkpointed step named ``name``.

    In a durable run the result is recorded the first time and returned from the record
    when the run is replayed; elsewhere the function is just awaited. The result must be
    JSON-able (the runs' database holds only JSON). Use it for anything a plugin does
    that may differ between two executions (a model call, the clock, a random choice,
    an outside lookup).
    """
    if not in_workflow():
        return await function(*args)
    result: T = await DBOS.run_step_async({"name": name}, function, *args)
    return result


def delta_to_dict(delta: StreamEvent) -> dict[str, Any]:
    """A stream delta as JSON (what a request's checkpoint and the journal keep)."""
    data = {item.name: getattr(delta, item.name) for item in dataclasses.fields(delta)}
    if isinstance(delta, UsageReport):
        data["usage"] = delta.usage.model_dump(mode="json")
    return data


def _load_delta(data: dict[str, Any]) -> StreamEvent:
    fields = dict(data)
    cls = _DELTAS[fields.pop("type")]
    if cls is UsageReport:
        fields["usage"] = Usage.model_validate(fields["usage"])
    delta: StreamEvent = cls(**fields)
    return delta


def _dump_error(error: BaseException) -> dict[str, Any]:
    if isinstance(error, ProviderError):
        return {
            "message": error.message,
            "retryable": error.retryable,
            "status_code": error.status_code,
            "retry_after": error.retry_after,
            "context_overflow": error.context_overflow,
        }
    return {"message": f"{type(error).__name__}: {error}", "retryable": False}


class CheckpointError(Exception):
    """A checkpoint of a durable run could not be written or read (the database failed,
    or a replay met a checkpoint of another step). It is never shown to the model: the
    run is aborted and its workflow fails with this error."""


class CallEnding:
    """A tool call that ran live, waiting for the kernel to end it with its final result."""

    def __init__(self, step: asyncio.Future[Any]) -> None:
        self.step = step
        self.final: asyncio.Future[ToolResult] = asyncio.get_running_loop().create_future()

    async def end(self, result: ToolResult) -> None:
        """Hand the final result to the step and wait until it is checkpointed."""
        if not self.final.done():
            self.final.set_result(result)
        await asyncio.wait({self.step})
        if not self.step.cancelled():
            self.step.exception()  # a failure was reported to the run (it stops)


class JournalWriter(Protocol):
    """Writes what a run recorded to its journal (:class:`.journal.RunJournal`)."""

    async def flush(self, started_step: int | None = None) -> bool:
        """Write the recorded events; with ``started_step``, mark that step started in the
        same transaction and say whether an earlier execution had marked it."""


class RunCheckpoints:
    """What the wrappers of one durable run share (bound with :func:`bind_run`).

    ``fail`` hears every :class:`CheckpointError` (the run stops); ``ending`` maps the id
    of a call that ran live to its :class:`CallEnding` until the kernel ends the call;
    ``journal`` writes the run's recorded events before a step starts.
    """

    def __init__(
        self, fail: Callable[[BaseException], None], journal: JournalWriter | None = None
    ) -> None:
        self._report = fail
        self.failed = False
        """Set at the first failure: this execution of the run journals nothing more
        (it was cancelled, taken over, or lost its database; the workflow fails)."""
        self.ending: dict[str, CallEnding] = {}
        self.journal = journal

    def fail(self, failure: BaseException) -> None:
        """A checkpoint failed (a :class:`CheckpointError`, or DBOS's own signal that this
        execution must stop: cancelled, or taken over): stop journaling, stop the run."""
        self.failed = True
        self._report(failure)

    async def call_ended(self, tool_call_id: str, result: ToolResult) -> None:
        """The kernel ended a call: checkpoint its final result if its step waits for it."""
        ending = self.ending.pop(tool_call_id, None)
        if ending is not None:
            await ending.end(result)

    def close(self) -> None:
        """Cancel the steps of calls the kernel never ended (the run is over)."""
        for ending in self.ending.values():
            ending.step.cancel()
        self.ending.clear()


_RUN: contextvars.ContextVar[RunCheckpoints | None] = contextvars.ContextVar(
    "mainspring_durable_run", default=None
)


def bind_run(checkpoints: RunCheckpoints) -> contextvars.Token[Any]:
    """Have the wrappers in this context (a run's tasks) use ``checkpoints``."""
    return _RUN.set(checkpoints)


async def write_journal(started_step: int | None = None) -> bool:
    """Write the events the current run recorded to its journal (done before a tool runs
    and before an approval wait; otherwise within 50 ms). With ``started_step``
    (a tool call's step), mark the step started; whether an earlier execution had.
    Outside a durable run, nothing. A failure is a :class:`CheckpointError` (the run
    stops)."""
    run = _RUN.get()
    if run is None or run.journal is None:
        return False
    try:
        return await run.journal.flush(started_step)
    except Exception as error:
        raise checkpoint_failed("the journal", error) from error


async def _checkpointed(name: str, function: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """``function`` as the step ``name``; what DBOS itself raises becomes a
    :class:`CheckpointError`, reported to the run (which stops) before it is raised."""
    try:
        result: T = await DBOS.run_step_async({"name": name}, function)
    except asyncio.CancelledError:
        raise
    except Exception as error:
        raise checkpoint_failed(f"step {name}", error) from error
    except BaseException as error:  # DBOS: this execution must stop (cancelled, taken over)
        execution_over(error)
        raise
    return result


def execution_over(error: BaseException) -> None:
    """DBOS told this execution of the run to stop (``error``, not an ``Exception``):
    the run journals nothing more and stops; the workflow ends with ``error``."""
    if isinstance(error, (KeyboardInterrupt, SystemExit)):
        return
    run = _RUN.get()
    if run is not None:
        run.fail(error)


def checkpoint_failed(what: str, error: Exception) -> CheckpointError:
    """Report that DBOS failed ``what`` (``error``) to the run, which stops; the error."""
    failed = CheckpointError(f"the checkpoint of {what} failed: {error}")
    run = _RUN.get()
    if run is not None:
        run.fail(failed)
    return failed


class DurableProvider:
    """A provider whose every request is a checkpointed step (see the module).

    The step ends, and its checkpoint is written, as soon as the inner provider yields
    :class:`~mainspring.providers.base.StreamDone`: what the provider does after it (an
    HTTP provider drains its response) happens when the kernel closes the stream, outside
    the step. ``StreamDone`` reaches the kernel only once the checkpoint is written, so a
    reply the kernel consumed is never requested again.
    """

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.name = inner.name
        models = getattr(inner, "models", None)
        if models is not None:
            self.models = models

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def stream(
        self, request: ModelRequest, signal: AbortSignal
    ) -> AsyncIterator[StreamEvent]:
        """The reply's deltas: live from the provider, or from the step's checkpoint."""
        if not in_workflow():
            async for delta in self.inner.stream(request, signal):
                yield delta
            return
        live: asyncio.Queue[StreamEvent | None] = asyncio.Queue()
        opened: list[AsyncIterator[StreamEvent]] = []
        ran = False

        async def request_step() -> dict[str, Any]:
            nonlocal ran
            ran = True
            deltas: list[dict[str, Any]] = []
            error: dict[str, Any] | None = None
            inner = aiter(self.inner.stream(request, signal))
            opened.append(inner)
            try:
                while True:
                    try:
                        delta = await anext(inner)
                    except StopAsyncIteration:
                        break
                    deltas.append(delta_to_dict(delta))
                    live.put_nowait(delta)
                    if isinstance(delta, StreamDone):
                        break  # the reply is complete: checkpoint it now
            except Exception as failure:
                error = _dump_error(failure)
            return {"deltas": deltas, "error": error}

        task = asyncio.ensure_future(_checkpointed(f"mainspring.model.{self.name}", request_step))
        # after the step's last delta: None, so one await per delta reads the stream
        task.add_done_callback(lambda _: live.put_nowait(None))
        done: StreamEvent | None = None
        try:
            while (item := await live.get()) is not None:
                if isinstance(item, StreamDone):
                    done = item  # passed on once the checkpoint is written
                    break
                yield item
            record = await task
            if ran:
                if done is not None:  # the step ended with it: nothing came after it
                    yield done
            else:  # answered from the checkpoint: the kernel sees the same deltas
                for data in record["deltas"]:
                    yield _load_delta(data)
            error = record["error"]
            if error is not None:
                raise ProviderError(**error)
        finally:
            if not task.done():  # the kernel stopped reading before the reply was complete
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            for inner in opened:  # the provider's own work after StreamDone, or its cleanup
                close = getattr(inner, "aclose", None)
                if close is not None:
                    with contextlib.suppress(Exception):  # a broken close loses nothing
                        await close()


REPLAYED_UPDATE = "(a progress report, replayed from a checkpoint)"
"""What a replayed call reports in place of each progress report it made (the originals
were journaled before its end; only their number matters to the replay)."""


class _CountingContext:
    """A tool's context that counts its progress reports for the checkpoint."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.updates = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def update(self, partial_result: Any) -> None:
        self.updates += 1
        self._inner.update(partial_result)


def durable_tool(tool: Tool) -> Tool:
    """Make each call of ``tool`` a checkpointed step (see the module); ``tool`` itself.

    The tool object is kept, with its ``execute`` replaced (once) by one that, in a
    durable run, runs the original as a step and, anywhere else, just calls it: gates see
    the very object the plugin registered (``if tool is not shout`` holds in a worker as
    in-process), and every agent sharing the object gets the same behaviour.
    """
    if getattr(tool.execute, "_mainspring_durable", False):
        return tool
    name, idempotent = tool.name, tool.idempotent
    original = Tool(
        tool.name,
        tool.description,
        tool.parameters,
        tool.execute,
        sequential=tool.sequential,
        timeout_s=tool.timeout_s,
        label=tool.label,
        idempotent=tool.idempotent,
    )

    async def execute(args: Any, ctx: Any) -> Any:
        run = _RUN.get()
        if not in_workflow() or run is None:
            return await original.run(args, ctx)
        value: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        counting = _CountingContext(ctx)

        async def call_step() -> dict[str, Any]:
            # the step's id is unique in the run and the same on every replay (a call id
            # need not be: a model may reuse one after a compaction)
            step_id = DBOS.step_id
            assert step_id is not None
            earlier = await write_journal(started_step=step_id)
            if earlier and not idempotent:
                result = ToolResult.error(INTERRUPTED.format(name=name))
                return {"result": result.model_dump(mode="json"), "updates": 0}
            ending = CallEnding(step_task)
            run.ending[ctx.tool_call_id] = ending  # before the kernel can end the call
            try:
                value.set_result(await original.run(args, counting))
            except Exception as error:
                value.set_exception(error)  # the kernel reports it and ends the call
            final = await ending.final
            return {"result": final.model_dump(mode="json"), "updates": counting.updates}

        step_task = asyncio.ensure_future(_checkpointed(f"mainspring.tool.{name}", call_step))
        try:
            await asyncio.wait({value, step_task}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            step_task.cancel()  # the call was cut (an abort, its timeout): no checkpoint
            raise
        if value.done():
            return value.result()  # live: the step ends when the kernel ends the call
        record = step_task.result()  # from the checkpoint
        for _ in range(int(record.get("updates", 0))):
            ctx.update(REPLAYED_UPDATE)
        return ToolResult.model_validate(record["result"])

    execute._mainspring_durable = True  # type: ignore[attr-defined]
    # a plain def's Tool.run runs this in a worker thread, which returns the coroutine
    # (only created there) for the loop to await
    tool.execute = execute
    return tool
