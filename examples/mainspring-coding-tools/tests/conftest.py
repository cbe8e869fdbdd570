"""Shared fixtures for the mainspring-coding-tools tests.

Every test runs a real agent in-process: the plugin module is passed with
``plugins=[mainspring_coding_tools]`` and ``autoload=False`` (so nothing else installed
takes part), the workspace comes from the plugin options, and a ``FauxProvider`` plays the
model. Every run's events are checked with ``check_event_grammar``.

Fixture names start with ``coding_`` so they cannot collide with fixtures of other test
directories collected in the same pytest session.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mainspring_coding_tools
import pytest

from mainspring import AbortSignal, Agent, Settings, Tool, ToolResult, ToolResultMessage
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux


@dataclass
class CodingRun:
    """One finished run: the agent, its events and the scripted provider."""

    agent: Agent
    recorder: EventRecorder
    provider: FauxProvider
    results: list[ToolResultMessage] = field(default_factory=list)

    def texts(self) -> list[str]:
        """The text of every tool result, in call order."""
        return [result.text for result in self.results]


RunSteps = Callable[..., Awaitable[CodingRun]]
CallTools = Callable[..., Awaitable[list[ToolResultMessage]]]


@pytest.fixture
def coding_ws(tmp_path: Path) -> Path:
    """An empty workspace directory (``tmp_path/ws``; ``tmp_path`` itself is outside)."""
    root = tmp_path / "ws"
    root.mkdir()
    return root


def coding_agent(workspace: Path, provider: FauxProvider, **options: Any) -> Agent:
    """An agent on ``provider`` with only this plugin, rooted in ``workspace``."""
    settings = Settings(
        plugin_options={"mainspring-coding-tools": {"workspace": str(workspace), **options}}
    )
    return Agent(
        model="faux:test",
        provider=provider,
        plugins=[mainspring_coding_tools],
        autoload=False,
        settings=settings,
    )


@pytest.fixture
def coding_make_agent(coding_ws: Path) -> Callable[..., tuple[Agent, FauxProvider]]:
    """``coding_make_agent(steps, **options)``: an agent in ``coding_ws`` and its provider,
    for tests that drive the run themselves."""

    def make(steps: list[Any], **options: Any) -> tuple[Agent, FauxProvider]:
        provider = FauxProvider(steps)
        return coding_agent(coding_ws, provider, **options), provider

    return make


@pytest.fixture
def coding_run(coding_ws: Path) -> RunSteps:
    """``await coding_run(steps, **options)``: prompt an agent scripted with ``steps``."""

    async def run(
        steps: list[Any], prompt: str = "go", listener: Any = None, **options: Any
    ) -> CodingRun:
        provider = FauxProvider(steps)
        agent = coding_agent(coding_ws, provider, **options)
        recorder = EventRecorder()
        agent.subscribe(recorder)
        if listener is not None:
            agent.subscribe(listener)
        await agent.prompt(prompt)
        check_event_grammar(recorder.events)
        return CodingRun(agent, recorder, provider, recorder.messages("tool_result"))

    return run


@pytest.fixture
def coding_call(coding_run: RunSteps) -> CallTools:
    """``await coding_call(("read", {...}), ("edit", {...}), **options)``: one model turn
    making all these calls (one batch), then ``done``; returns the tool results in call
    order."""

    async def call(*calls: tuple[str, dict[str, Any]], **options: Any) -> list[ToolResultMessage]:
        step = [faux.tool_call(name, args) for name, args in calls]
        run = await coding_run([step, faux.text("done")], **options)
        assert len(run.results) == len(calls)
        return run.results

    return call


def exited(pid: int, within_s: float = 5.0) -> bool:
    """Whether process ``pid`` has exited (a zombie counts), waiting at most ``within_s``.

    A ``SIGKILL`` is delivered asynchronously: a killed process closes its files (so the
    tool sees its output pipe close) a moment before it is marked dead. This waits on a
    pidfd, which becomes readable when the process exits: an event, not a poll.
    """
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([fd], [], [], within_s)
        return bool(readable)
    finally:
        os.close(fd)


def surviving_group_members(pgid: int) -> list[int]:
    """The processes of process group ``pgid`` that do not exit within 5 s."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path("/proc", entry, "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(entry))
    return [pid for pid in members if not exited(pid)]


@pytest.fixture
def coding_survivors() -> Callable[[int], list[int]]:
    """:func:`surviving_group_members` (skipped where there is no ``/proc`` or pidfd)."""
    if not os.path.isdir("/proc/self") or not hasattr(os, "pidfd_open"):
        pytest.skip("needs /proc and pidfd_open to inspect processes")
    return surviving_group_members


@pytest.fixture
def coding_exited() -> Callable[[int], bool]:
    """:func:`exited` (skipped where there is no pidfd)."""
    if not hasattr(os, "pidfd_open"):
        pytest.skip("needs pidfd_open to watch a process")
    return exited


class Heartbeat:
    """Measures how long the event loop stays blocked: a task sleeps 10 ms at a time and
    records the longest extra delay between two wake-ups (``longest``, in seconds).

    ``async with Heartbeat() as beat: ...``; read ``beat.longest`` afterwards.
    """

    PERIOD_S = 0.01

    def __init__(self) -> None:
        self.longest = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _beat(self) -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(self.PERIOD_S)
            now = time.monotonic()
            self.longest = max(self.longest, now - last - self.PERIOD_S)
            last = now

    async def __aenter__(self) -> Heartbeat:
        self._task = asyncio.create_task(self._beat())
        await asyncio.sleep(0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


class DirectContext:
    """A :class:`mainspring.ToolContext` for calling a tool without an agent, through
    ``Tool.validate`` and ``Tool.run`` (for tests that make hundreds of calls)."""

    tool_call_id = "direct"

    def __init__(self) -> None:
        self.signal = AbortSignal()
        self._locks: dict[str, asyncio.Lock] = {}

    def update(self, partial: Any) -> None:
        pass

    @contextlib.asynccontextmanager
    async def file_lock(self, path: str) -> AsyncIterator[None]:
        async with self._locks.setdefault(path, asyncio.Lock()):
            yield


async def call_directly(tool: Tool, **arguments: Any) -> ToolResult:
    """Validate ``arguments`` and run ``tool`` with a :class:`DirectContext`."""
    result = await tool.run(tool.validate(arguments), DirectContext())
    assert isinstance(result, ToolResult)
    return result


CallDirectly = Callable[..., Awaitable[ToolResult]]


@pytest.fixture
def coding_direct() -> CallDirectly:
    """:func:`call_directly`: ``await coding_direct(tool, **arguments)``."""
    return call_directly


@pytest.fixture
def coding_heartbeat() -> type[Heartbeat]:
    """The :class:`Heartbeat` class: ``async with coding_heartbeat() as beat: ...``."""
    return Heartbeat
