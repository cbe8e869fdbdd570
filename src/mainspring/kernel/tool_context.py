"""What a running tool sees and gives back: its context, file locks, its result's shape.

:class:`CallContext` is the :class:`~mainspring.ToolContext` of one executing call;
:class:`FileLocks` serialises calls that touch the same file; :func:`to_result` turns what
a tool returned into a :class:`~mainspring.ToolResult`, and :func:`cap` bounds the text
the model is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, final

from pydantic import BaseModel

from ..hooks.guard import Guard
from ..messages import ImageContent, TextContent
from ..questions import Answer, Question
from ..signal import AbortSignal
from ..tools import ToolResult

__all__ = ["Asked", "CallContext", "FileLocks", "Reports", "cap", "to_result"]

Report = tuple[int, bool, Any]
"""(call index, whether it is the call's result, the result or a partial one / a question)."""


@final
class Reports:
    """The reports of one tool batch's calls, in the order made; one reader, on the loop.

    What ``asyncio.Queue`` does for this, without its four deques, its event and a
    coroutine per read: a batch is in flight in every running agent at once, so its size
    counts. The reader takes reports with :meth:`pop` while there are any and otherwise
    awaits :meth:`arrival`.
    """

    __slots__ = ("_items", "_waiter")

    def __init__(self) -> None:
        self._items: list[Report] = []
        self._waiter: asyncio.Future[None] | None = None

    def put_nowait(self, item: Report) -> None:
        """Add ``item`` (on the loop's thread) and wake the reader."""
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def arrival(self) -> asyncio.Future[None]:
        """A future done once a report is added (at once if there is one)."""
        waiter = self._waiter
        if waiter is None or waiter.done():  # a cut wait may have cancelled the last one
            waiter = self._waiter = asyncio.get_running_loop().create_future()
            if self._items:
                self._waiter = None
                waiter.set_result(None)
        return waiter

    def pop(self) -> Report:
        """The oldest report (``IndexError`` when there is none)."""
        return self._items.pop(0)

    def __bool__(self) -> bool:
        return bool(self._items)


@final
class Asked:
    """A call's question on its way to the run (see :meth:`CallContext.ask`)."""

    __slots__ = ("answer", "question")

    def __init__(self, question: Question, answer: asyncio.Future[Answer]) -> None:
        self.question = question
        self.answer = answer


@final
class FileLocks:
    """Async locks keyed by real path, shared by all tool calls of one agent."""

    __slots__ = ("_locks", "_loop")

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    @asynccontextmanager
    async def lock(self, path: str | os.PathLike[str]) -> AsyncIterator[None]:
        """Hold the lock of ``path``'s real path (symlinks resolved)."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop, self._locks = loop, {}
        key = os.path.realpath(os.fspath(path))  # noqa: ASYNC240 - a few lstat calls
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        async with lock:
            yield


@final
class CallContext:
    """The :class:`~mainspring.ToolContext` of one executing call."""

    __slots__ = (
        "_finished",
        "_guard",
        "_index",
        "_locks",
        "_loop",
        "_loop_thread",
        "_queue",
        "signal",
        "tool_call_id",
    )

    def __init__(
        self,
        call_id: str,
        index: int,
        signal: AbortSignal,
        queue: Reports,
        locks: FileLocks,
        guard: Guard,
    ) -> None:
        self.tool_call_id = call_id
        self._guard = guard
        self.signal = signal
        self._index = index
        self._queue = queue
        self._locks = locks
        self._finished = False
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()  # built by the run, on the loop's thread

    def update(self, partial_result: Any) -> None:
        """Schedule a ``tool_execution_update``; a no-op once the call has finished.

        Synchronous and safe from any thread: a plain-function tool runs in a worker
        thread, and its reports are handed to the event loop.
        """
        if self._finished:
            return
        item = (self._index, False, partial_result)
        if threading.get_ident() == self._loop_thread:
            self._queue.put_nowait(item)
            return
        with contextlib.suppress(RuntimeError):  # the loop closed: the run is over
            self._loop.call_soon_threadsafe(self._put_late, item)

    def _put_late(self, item: tuple[int, bool, Any]) -> None:
        if not self._finished:
            self._queue.put_nowait(item)

    def file_lock(self, path: str) -> Any:
        """Serialise calls touching ``path`` (see :class:`FileLocks`)."""
        return self._locks.lock(path)

    async def ask(self, question: Question) -> Answer:
        """Put ``question`` to the approvers and wait for the answer (on the run's loop).

        The run puts it to them between the calls' reports, one question at a time
        (:func:`~mainspring.kernel.approvals.decide_question`); a call that has finished
        gets a declined answer at once. The tool's ``timeout_s`` is held while the
        question waits (the person's time is not the tool's; the approvals' own deadline
        bounds it), and an abort still ends the call.
        """
        if not isinstance(question, Question):
            raise TypeError(f"ctx.ask() takes a Question, not {type(question).__name__}")
        if self._finished:
            return Answer(False, None, "the call has finished", "aborted")
        answer: asyncio.Future[Answer] = self._loop.create_future()
        self._queue.put_nowait((self._index, False, Asked(question, answer)))
        release = self._guard.hold()
        try:
            return await answer
        finally:
            release()


def to_result(value: Any) -> ToolResult:
    """What a tool returned as a :class:`ToolResult` (a string, ``None``, a model, data)."""
    if isinstance(value, ToolResult):
        return value
    if value is None:
        return ToolResult("")
    if isinstance(value, str):
        return ToolResult(value)
    if isinstance(value, TextContent):
        return ToolResult((value,))
    if isinstance(value, BaseModel):
        return ToolResult(value.model_dump_json(), details=value)
    try:
        return ToolResult(json.dumps(value, ensure_ascii=False, default=str), details=value)
    except (TypeError, ValueError):
        return ToolResult(repr(value), details=value)


def cap(result: ToolResult, limit: int | None) -> ToolResult:
    """``result`` with at most ``limit`` characters of text; the model is told what was cut."""
    if limit is None:
        return result
    total = sum(len(block.text) for block in result.content if isinstance(block, TextContent))
    if total <= limit:
        return result
    remaining = limit
    content: list[TextContent | ImageContent] = []
    for block in result.content:
        if isinstance(block, TextContent):
            if remaining > 0:
                content.append(block.model_copy(update={"text": block.text[:remaining]}))
            remaining -= len(block.text)
        else:
            content.append(block)
    note = (
        f"\n[output truncated: showing the first {limit} of {total} characters; "
        f"{total - limit} characters were cut]"
    )
    content.append(TextContent(text=note))
    return result.model_copy(update={"content": tuple(content)})
