"""Checkpoints of a durable run: model requests and tool calls as DBOS steps.

- :class:`DurableProvider` puts a provider behind one step per model request. The step
  streams the real reply, passing each delta to the kernel as it arrives, and checkpoints
  the whole delta sequence (and the :class:`~mainspring.ProviderError` that ended it, if
  one did). Replayed after a crash, the step answers from its checkpoint: the kernel gets
  the same deltas and assembles the same message, with the same events. A request the
  process died during has no checkpoint and is sent again.
- :func:`durable_tool` wraps a tool so that each call is one step checkpointing its
  :class:`~mainspring.ToolResult` (and its progress reports, re-reported on replay). A call
  the process died during is run again only if the tool is ``idempotent``; otherwise it
  gets an error result saying so, and the model decides what to do.
- :func:`step` runs any function of a plugin as a step (a summariser's model call, a
  lookup), so the plugin stays deterministic across a recovery.

Outside a DBOS workflow (or inside another step) every wrapper calls straight through.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import os
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, TypeVar

from dbos import DBOS

from ..jsonable import to_jsonable
from ..kernel.tool_context import to_result
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
    "CheckpointError",
    "DurableProvider",
    "durable_tool",
    "in_workflow",
    "report_checkpoint_failures",
    "step",
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


def _dump_delta(delta: StreamEvent) -> dict[str, Any]:
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


FailureReport = Callable[[CheckpointError], None]
_ON_FAILURE: contextvars.ContextVar[FailureReport | None] = contextvars.ContextVar(
    "mainspring_durable_on_failure", default=None
)


def report_checkpoint_failures(report: FailureReport) -> contextvars.Token[Any]:
    """Have every checkpoint failure in this context (a run's tasks) go to ``report``."""
    return _ON_FAILURE.set(report)


async def _checkpointed(name: str, function: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """``function`` as the step ``name``; what DBOS itself raises becomes a
    :class:`CheckpointError`, reported to the run (which stops) before it is raised."""
    try:
        result: T = await DBOS.run_step_async({"name": name}, function)
    except asyncio.CancelledError:
        raise
    except Exception as error:
        failed = CheckpointError(f"the checkpoint of step {name} failed: {error}")
        report = _ON_FAILURE.get()
        if report is not None:
            report(failed)
        raise failed from error
    return result


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
        live: asyncio.Queue[StreamEvent] = asyncio.Queue()
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
                    deltas.append(_dump_delta(delta))
                    live.put_nowait(delta)
                    if isinstance(delta, StreamDone):
                        break  # the reply is complete: checkpoint it now
            except Exception as failure:
                error = _dump_error(failure)
            return {"deltas": deltas, "error": error}

        task = asyncio.ensure_future(_checkpointed(f"mainspring.model.{self.name}", request_step))
        done: StreamEvent | None = None
        getter: asyncio.Future[StreamEvent] | None = None
        try:
            while not task.done():
                getter = asyncio.ensure_future(live.get())
                await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
                if not getter.done():
                    getter.cancel()
                    break  # the step finished: what is left is passed on below
                item = getter.result()
                if isinstance(item, StreamDone):
                    done = item  # passed on once the checkpoint is written
                    break
                yield item
            record = await task
            if ran:
                if done is not None:
                    yield done
                while not live.empty():
                    yield live.get_nowait()
            else:  # answered from the checkpoint: the kernel sees the same deltas
                for data in record["deltas"]:
                    yield _load_delta(data)
            error = record["error"]
            if error is not None:
                raise ProviderError(**error)
        finally:
            if getter is not None:
                getter.cancel()
            if not task.done():  # the kernel stopped reading before the reply was complete
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            for inner in opened:  # the provider's own work after StreamDone, or its cleanup
                close = getattr(inner, "aclose", None)
                if close is not None:
                    with contextlib.suppress(Exception):  # a broken close loses nothing
                        await close()


class _RecordingContext:
    """A tool's context that also records its progress reports for the checkpoint."""

    def __init__(self, inner: Any, updates: list[Any]) -> None:
        self._inner = inner
        self._updates = updates

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def update(self, partial_result: Any) -> None:
        self._updates.append(to_jsonable(partial_result))
        self._inner.update(partial_result)


def _raised(record: dict[str, Any]) -> BaseException:
    """The exception a checkpointed call raised, as the kernel reports it (by type name)."""
    cls: type[Exception] = type(record["type"], (Exception,), {})
    return cls(record["message"])


def durable_tool(tool: Tool) -> Tool:
    """``tool`` with each call a checkpointed step (see the module)."""
    if getattr(tool.execute, "_mainspring_durable", False):
        return tool
    name, idempotent = tool.name, tool.idempotent

    async def execute(args: Any, ctx: Any) -> Any:
        if not in_workflow():
            return await tool.run(args, ctx)
        replayed = True
        updates: list[Any] = []

        async def call_step() -> dict[str, Any]:
            nonlocal replayed
            replayed = False
            workflow_id = DBOS.workflow_id
            assert workflow_id is not None
            # the step's id is unique in the run and the same on every replay (a call id
            # need not be: a model may reuse one after a compaction)
            key = f"mainspring.tool_started.{DBOS.step_id}"
            earlier = await DBOS.get_event_async(workflow_id, key, timeout_seconds=0)
            if earlier is not None and not idempotent:
                result = ToolResult.error(INTERRUPTED.format(name=name))
                return {"result": result.model_dump(mode="json"), "updates": []}
            await DBOS.set_event_async(key, os.getpid())
            try:
                value = await tool.run(args, _RecordingContext(ctx, updates))
            except Exception as error:
                detail = str(error) or type(error).__name__
                raised = {"type": type(error).__name__, "message": detail}
                return {"raised": raised, "updates": updates}
            result = to_result(value)
            if result.details is not None:
                result = result.model_copy(update={"details": to_jsonable(result.details)})
            return {"result": result.model_dump(mode="json"), "updates": updates}

        record = await _checkpointed(f"mainspring.tool.{name}", call_step)
        if replayed:
            for partial in record["updates"]:
                ctx.update(partial)
        if "raised" in record:
            raise _raised(record["raised"])
        return ToolResult.model_validate(record["result"])

    execute._mainspring_durable = True  # type: ignore[attr-defined]
    return Tool(
        tool.name,
        tool.description,
        tool.parameters,
        execute,
        sequential=tool.sequential,
        timeout_s=tool.timeout_s,
        label=tool.label,
        idempotent=tool.idempotent,
    )
