"""Shared fixtures for the mainspring-coding-tools tests.

Every test runs a real agent in-process: the plugin module is passed with
``plugins=[mainspring_coding_tools]`` and ``autoload=False`` (so nothing else installed
takes part), the workspace comes from the plugin options, and a ``FauxProvider`` plays the
model. Every run's events are checked with ``check_event_grammar``.

Fixture names start with ``coding_`` so they cannot collide with fixtures of other test
directories collected in the same pytest session.
"""

from __future__ import annotations

import os
import select
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mainspring_coding_tools
import pytest

from mainspring import Agent, Settings, ToolResultMessage
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
