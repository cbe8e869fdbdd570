"""A plugin's plain ``def`` that blocks cannot freeze the event loop.

The hooks called at most once per tool call or turn (gates, result filters, context
transforms, the stop policy, compaction, token counts, approvers) call a plugin's plain
``def`` in a daemon thread and await it under the run's guard: ``abort()`` and
``hooks.timeout_s`` cut the wait as for an ``async def``, with the hook's own failure
rule. Blocking here means blocking the thread for real (a ``threading.Event`` nobody
sets), as a synchronous HTTP call to a policy server that never answers would.
``asyncio.wait_for`` is only a hang guard.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from mainspring import Agent, Settings, hookimpl, nonblocking, tool
from mainspring.events import HookErrorEvent, ToolExecutionEnd
from mainspring.settings import HookSettings
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux

HANG_GUARD_S = 10.0


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    return text


class Blocker:
    """Blocks the calling thread until released; counts and records its calls."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls = 0
        self.threads: list[str] = []

    def block(self) -> None:
        self.calls += 1
        self.threads.append(threading.current_thread().name)
        self.entered.set()
        self.release.wait()


@pytest.fixture
def blocker() -> Iterator[Blocker]:
    made = Blocker()
    yield made
    made.release.set()  # the daemon thread ends with the test


def make_agent(plugin: Any, steps: list[Any], timeout_s: float | None = 60.0) -> Agent:
    return Agent(
        model="faux:test",
        provider=FauxProvider(steps),
        autoload=False,
        plugins=[plugin],
        tools=[echo],
        settings=Settings(hooks=HookSettings(timeout_s=timeout_s, abort_grace_s=0.1)),
    )


class BlockingGate:
    PLUGIN_NAME = "blocking-gate"

    def __init__(self, blocker: Blocker) -> None:
        self.blocker = blocker

    @hookimpl
    def before_tool_call(self, call: Any) -> None:
        self.blocker.block()


class BlockingTransform:
    PLUGIN_NAME = "blocking-transform"

    def __init__(self, blocker: Blocker) -> None:
        self.blocker = blocker

    @hookimpl
    def transform_context(self, messages: Any) -> None:
        self.blocker.block()


class BlockingStopPolicy:
    PLUGIN_NAME = "blocking-stop-policy"

    def __init__(self, blocker: Blocker) -> None:
        self.blocker = blocker

    @hookimpl
    def should_stop_after_turn(self, state: Any) -> bool:
        self.blocker.block()
        return False


async def test_abort_settles_a_run_whose_gate_blocks_its_thread(blocker: Blocker) -> None:
    agent = make_agent(BlockingGate(blocker), [faux.tool_call("echo", {"text": "a"})])
    recorder = EventRecorder()
    agent.subscribe(recorder)
    running = asyncio.create_task(agent.prompt("go"))
    # the loop is free while the gate blocks: this wait and abort() below both run on it
    assert await asyncio.to_thread(blocker.entered.wait, HANG_GUARD_S)

    agent.abort()
    outcome = await asyncio.wait_for(running, HANG_GUARD_S)

    assert outcome.reason == "aborted"
    (ended,) = recorder.of_type(ToolExecutionEnd)
    assert ended.is_error
    check_event_grammar(recorder.events)


@pytest.mark.parametrize("plugin", [BlockingGate, BlockingTransform, BlockingStopPolicy])
async def test_abort_settles_whichever_cold_hook_blocks(blocker: Blocker, plugin: Any) -> None:
    steps = [faux.tool_call("echo", {"text": "a"}), faux.text("done")]
    agent = make_agent(plugin(blocker), steps)
    running = asyncio.create_task(agent.prompt("go"))
    assert await asyncio.to_thread(blocker.entered.wait, HANG_GUARD_S)

    agent.abort()

    assert (await asyncio.wait_for(running, HANG_GUARD_S)).reason == "aborted"


async def test_a_gate_blocking_past_its_deadline_blocks_the_call_and_is_not_waited_for_again(
    blocker: Blocker,
) -> None:
    steps = [
        faux.tool_call("echo", {"text": "a"}),
        faux.tool_call("echo", {"text": "b"}),
        faux.text("done"),
    ]
    agent = make_agent(BlockingGate(blocker), steps, timeout_s=0.2)
    recorder = EventRecorder()
    agent.subscribe(recorder)

    outcome = await asyncio.wait_for(agent.prompt("go"), HANG_GUARD_S)

    assert outcome.reason == "stop" and outcome.text == "done"
    first, second = recorder.of_type(ToolExecutionEnd)
    assert first.is_error and "timed out after 0.2 s" in first.result.text
    assert second.is_error and "blocking-gate" in second.result.text
    assert blocker.calls == 1  # fail closed at once the second time
    error = recorder.of_type(HookErrorEvent)[0]
    assert error.plugin == "blocking-gate" and "timed out after 0.2 s" in error.error
    check_event_grammar(recorder.events)


async def test_a_transform_blocking_past_its_deadline_is_skipped(blocker: Blocker) -> None:
    agent = make_agent(BlockingTransform(blocker), [faux.text("answered")], timeout_s=0.2)
    recorder = EventRecorder()
    agent.subscribe(recorder)

    outcome = await asyncio.wait_for(agent.prompt("go"), HANG_GUARD_S)

    assert outcome.reason == "stop" and outcome.text == "answered"
    (error,) = recorder.of_type(HookErrorEvent)
    assert error.hook == "transform_context" and "timed out after 0.2 s" in error.error


async def test_plugin_defs_run_off_the_loop_and_observers_and_builtins_on_it() -> None:
    threads: dict[str, str] = {}

    class Recording:
        PLUGIN_NAME = "recording"

        @hookimpl
        def before_tool_call(self, call: Any) -> None:
            threads["gate"] = threading.current_thread().name

        @hookimpl
        def on_event(self, event: Any) -> None:
            threads.setdefault("observer", threading.current_thread().name)

    agent = make_agent(Recording(), [faux.tool_call("echo", {"text": "a"}), faux.text("ok")])
    await agent.prompt("go")

    loop_thread = threading.current_thread().name
    assert threads["gate"] != loop_thread and threads["gate"].startswith("mainspring-hook")
    assert threads["observer"] == loop_thread


async def test_abort_from_another_thread_stops_the_run() -> None:
    entered = asyncio.Event()

    @tool
    async def wait_forever() -> str:
        """Wait until cancelled."""
        entered.set()
        await asyncio.Event().wait()
        return "never"

    agent = Agent(
        model="faux:test",
        provider=FauxProvider([faux.tool_call("wait_forever", {})]),
        autoload=False,
        tools=[wait_forever],
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    running = asyncio.create_task(agent.prompt("go"))
    await entered.wait()

    await asyncio.to_thread(agent.abort, "from a UI thread")
    outcome = await asyncio.wait_for(running, HANG_GUARD_S)

    assert outcome.reason == "aborted"
    (ended,) = recorder.of_type(ToolExecutionEnd)
    assert ended.is_error  # the call was answered
    check_event_grammar(recorder.events)


def test_a_gate_blocked_forever_does_not_hold_up_the_program_at_exit() -> None:
    script = textwrap.dedent(
        """
        import asyncio, threading
        from mainspring import Agent, Settings, hookimpl, tool
        from mainspring.settings import HookSettings
        from mainspring.testing import FauxProvider, faux

        @tool
        def echo(text: str) -> str:
            '''Echo.'''
            return text

        class Stuck:
            PLUGIN_NAME = "stuck"
            @hookimpl
            def before_tool_call(self, call):
                threading.Event().wait()

        async def main():
            agent = Agent(
                model="faux:test", autoload=False, tools=[echo], plugins=[Stuck()],
                provider=FauxProvider([faux.tool_call("echo", {"text": "a"}), faux.text("ok")]),
                settings=Settings(hooks=HookSettings(timeout_s=0.2)),
            )
            print((await agent.prompt("go")).text)

        asyncio.run(main())
        print("exited")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok", "exited"]


async def test_a_def_marked_nonblocking_is_called_on_the_loop() -> None:
    threads: list[str] = []

    class Computing:
        PLUGIN_NAME = "computing"

        @hookimpl
        @nonblocking
        def before_tool_call(self, call: Any) -> None:
            threads.append(threading.current_thread().name)

    agent = make_agent(Computing(), [faux.tool_call("echo", {"text": "a"}), faux.text("ok")])
    await agent.prompt("go")

    assert threads == [threading.current_thread().name]
