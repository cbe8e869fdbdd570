"""abort() settles the run whatever a plugin does; hook deadlines apply each hook's rule.

A hostile plugin here hangs forever, or hangs *and* swallows the cancellation meant to
stop it. The contract (DESIGN §4, settings ``hooks``): abort cuts every wait on plugin
code; code that ignores the cancellation is detached after ``hooks.abort_grace_s`` and
never resumed; ``hooks.timeout_s`` bounds each hook call, with the hook's own failure
rule on expiry. ``asyncio.wait_for`` below is only a hang guard: these runs hung forever
before, and the bound is many times what a settled run takes.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from mainspring import Agent, Block, Settings, hookimpl, tool
from mainspring.events import AgentEnd, HookErrorEvent, ToolDecision, ToolExecutionEnd
from mainspring.settings import HookSettings
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux

HANG_GUARD_S = 10.0


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    return text


async def hang(swallow: bool, entered: asyncio.Event) -> None:
    """Await forever; with ``swallow``, ignore every cancellation."""
    entered.set()
    while True:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            if not swallow:
                raise


def settings(timeout_s: float | None = 60.0, grace_s: float = 0.1) -> Settings:
    return Settings(hooks=HookSettings(timeout_s=timeout_s, abort_grace_s=grace_s))


def make_agent(
    plugins: list[Any], steps: list[Any], hook_settings: Settings
) -> tuple[Agent, EventRecorder]:
    agent = Agent(
        model="faux:test",
        provider=FauxProvider(steps),
        autoload=False,
        plugins=plugins,
        tools=[echo],
        settings=hook_settings,
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    return agent, recorder


class HangingGate:
    name = "hanging-gate"

    def __init__(self, swallow: bool) -> None:
        self.swallow = swallow
        self.entered = asyncio.Event()

    @hookimpl
    async def before_tool_call(self, call: Any) -> None:
        await hang(self.swallow, self.entered)


class HangingTransform:
    name = "hanging-transform"

    def __init__(self, swallow: bool) -> None:
        self.swallow = swallow
        self.entered = asyncio.Event()

    @hookimpl
    async def transform_context(self, messages: Any) -> None:
        await hang(self.swallow, self.entered)


class HangingObserver:
    name = "hanging-observer"

    def __init__(self, swallow: bool, on: str = "turn_start") -> None:
        self.swallow = swallow
        self.on = on
        self.entered = asyncio.Event()
        self.calls = 0

    @hookimpl
    async def on_event(self, event: Any) -> None:
        if event.type == self.on:
            self.calls += 1
            await hang(self.swallow, self.entered)


async def abort_when_entered(agent: Agent, entered: asyncio.Event) -> None:
    run = asyncio.ensure_future(agent.prompt("go"))
    await entered.wait()
    agent.abort()
    await asyncio.wait_for(run, HANG_GUARD_S)


def assert_settled(agent: Agent, recorder: EventRecorder, reason: str) -> AgentEnd:
    check_event_grammar(recorder.events)
    end = recorder.events[-1]
    assert isinstance(end, AgentEnd)
    assert end.reason == reason
    state = agent.state
    assert not state.is_streaming and state.phase == "idle"
    assert state.pending_tool_calls == frozenset()
    return end


@pytest.mark.parametrize("swallow", [False, True], ids=["cooperative", "swallows-cancel"])
async def test_abort_settles_a_run_whose_gate_never_returns(swallow: bool) -> None:
    gate = HangingGate(swallow)
    steps = [faux.tool_call("echo", {"text": "x"}, id="c1"), faux.text("never")]
    agent, recorder = make_agent([gate], steps, settings())

    await abort_when_entered(agent, gate.entered)

    assert_settled(agent, recorder, "aborted")
    ends = recorder.of_type(ToolExecutionEnd)
    assert [end.tool_call_id for end in ends] == ["c1"]
    assert ends[0].is_error
    # the call never ran: every call still gets exactly one result
    results = [m for m in agent.state.messages if m.role == "tool_result"]
    assert [r.tool_call_id for r in results] == ["c1"] and results[0].is_error


@pytest.mark.parametrize("swallow", [False, True], ids=["cooperative", "swallows-cancel"])
async def test_abort_settles_a_run_whose_transform_never_returns(swallow: bool) -> None:
    transform = HangingTransform(swallow)
    agent, recorder = make_agent([transform], [faux.text("never")], settings())

    await abort_when_entered(agent, transform.entered)

    assert_settled(agent, recorder, "aborted")


@pytest.mark.parametrize("swallow", [False, True], ids=["cooperative", "swallows-cancel"])
async def test_abort_settles_a_run_whose_observer_hangs_and_skips_it_afterwards(
    swallow: bool,
) -> None:
    observer = HangingObserver(swallow)
    agent, recorder = make_agent([observer], [faux.text("never")], settings())

    await abort_when_entered(agent, observer.entered)

    assert_settled(agent, recorder, "aborted")
    # the failure events did not go back through the hanging observer forever
    assert observer.calls == 1


@pytest.mark.parametrize("swallow", [False, True], ids=["cooperative", "swallows-cancel"])
async def test_abort_settles_a_run_whose_subscriber_hangs(swallow: bool) -> None:
    entered = asyncio.Event()
    calls: list[str] = []

    async def hanging_listener(event: Any, signal: Any) -> None:
        if event.type == "message_end":
            calls.append(event.type)
            await hang(swallow, entered)

    agent, recorder = make_agent([], [faux.text("hello")], settings())
    agent.subscribe(hanging_listener)

    await abort_when_entered(agent, entered)

    assert_settled(agent, recorder, "aborted")


async def test_a_gate_past_its_deadline_blocks_the_call() -> None:
    gate = HangingGate(swallow=True)
    steps = [faux.tool_call("echo", {"text": "x"}, id="c1"), faux.text("done")]
    agent, recorder = make_agent([gate], steps, settings(timeout_s=0.05, grace_s=0.05))

    await asyncio.wait_for(agent.prompt("go"), HANG_GUARD_S)

    assert_settled(agent, recorder, "stop")
    errors = recorder.of_type(HookErrorEvent)
    assert [(e.hook, e.plugin) for e in errors] == [("before_tool_call", "hanging-gate")]
    assert "timed out after 0.05 s" in errors[0].error
    decision = recorder.of_type(ToolDecision)[0]
    assert (decision.decision, decision.plugin) == ("block", "hanging-gate")
    end = recorder.of_type(ToolExecutionEnd)[0]
    assert end.is_error and "timed out after 0.05 s" in end.result.text


async def test_a_gate_that_timed_out_is_not_asked_again_and_blocks_later_calls() -> None:
    calls: list[str] = []

    class SlowOnce:
        name = "slow-gate"

        @hookimpl
        async def before_tool_call(self, call: Any) -> Block | None:
            calls.append(call.id)
            await asyncio.Event().wait()
            return None

    steps = [
        faux.tool_call("echo", {"text": "a"}, id="c1"),
        faux.tool_call("echo", {"text": "b"}, id="c2"),
        faux.text("done"),
    ]
    agent, recorder = make_agent([SlowOnce()], steps, settings(timeout_s=0.05, grace_s=0.05))

    await asyncio.wait_for(agent.prompt("go"), HANG_GUARD_S)

    assert_settled(agent, recorder, "stop")
    assert calls == ["c1"]
    decisions = recorder.of_type(ToolDecision)
    assert [(d.tool_call_id, d.decision) for d in decisions] == [("c1", "block"), ("c2", "block")]
    assert all(end.is_error for end in recorder.of_type(ToolExecutionEnd))


async def test_a_transform_past_its_deadline_is_skipped_and_the_run_goes_on() -> None:
    transform = HangingTransform(swallow=False)
    agent, recorder = make_agent([transform], [faux.text("fine")], settings(timeout_s=0.05))

    await asyncio.wait_for(agent.prompt("go"), HANG_GUARD_S)

    assert_settled(agent, recorder, "stop")
    errors = recorder.of_type(HookErrorEvent)
    assert [(e.hook, e.plugin) for e in errors] == [("transform_context", "hanging-transform")]
    assert "timed out after 0.05 s" in errors[0].error
    assert agent.state.messages[-1].text == "fine"


@pytest.mark.parametrize("swallow", [False, True], ids=["cooperative", "swallows-cancel"])
async def test_an_observer_past_its_deadline_gets_a_hook_error_and_is_skipped(
    swallow: bool,
) -> None:
    observer = HangingObserver(swallow, on="message_end")
    agent, recorder = make_agent(
        [observer], [faux.text("fine")], settings(timeout_s=0.05, grace_s=0.05)
    )

    await asyncio.wait_for(agent.prompt("go"), HANG_GUARD_S)

    assert_settled(agent, recorder, "stop")
    errors = recorder.of_type(HookErrorEvent)
    assert [(e.hook, e.plugin) for e in errors] == [("on_event", "hanging-observer")]
    assert "timed out after 0.05 s" in errors[0].error
    assert observer.calls == 1  # two message_end events, one call


async def test_a_subscriber_past_its_deadline_gets_a_hook_error_and_is_skipped() -> None:
    calls: list[str] = []

    async def slow_listener(event: Any, signal: Any) -> None:
        calls.append(event.type)
        if event.type == "turn_start":
            await asyncio.Event().wait()

    agent, recorder = make_agent([], [faux.text("fine")], settings(timeout_s=0.05))
    agent.subscribe(slow_listener)

    await asyncio.wait_for(agent.prompt("go"), HANG_GUARD_S)

    assert_settled(agent, recorder, "stop")
    errors = recorder.of_type(HookErrorEvent)
    assert [e.hook for e in errors] == ["listener"]
    assert "slow_listener" in errors[0].plugin
    assert calls == ["agent_start", "phase_change", "turn_start"]


async def test_cancelling_the_caller_aborts_the_run_lets_it_settle_then_reraises() -> None:
    observer = HangingObserver(swallow=True, on="message_end")
    agent, recorder = make_agent([observer], [faux.text("hello")], settings())

    with pytest.raises(TimeoutError):
        await asyncio.wait_for(agent.prompt("go"), 0.2)

    assert_settled(agent, recorder, "aborted")


async def test_a_task_group_cancelling_prompt_leaves_a_settled_agent() -> None:
    gate = HangingGate(swallow=True)
    steps = [faux.tool_call("echo", {"text": "x"}, id="c1"), faux.text("never")]
    agent, recorder = make_agent([gate], steps, settings())

    async def fail_once_gated() -> None:
        await gate.entered.wait()
        raise RuntimeError("sibling failed")

    with pytest.raises(ExceptionGroup):
        async with asyncio.TaskGroup() as group:
            group.create_task(agent.prompt("go"))
            group.create_task(fail_once_gated())

    assert_settled(agent, recorder, "aborted")


def test_asyncio_run_exits_although_an_observer_ignores_cancellation() -> None:
    script = textwrap.dedent(
        """
        import asyncio
        from mainspring import Agent, Settings, hookimpl
        from mainspring.settings import HookSettings
        from mainspring.testing import FauxProvider, faux

        class Stubborn:
            @hookimpl
            async def on_event(self, event):
                if event.type == "message_end":
                    while True:
                        try:
                            await asyncio.sleep(3600)
                        except asyncio.CancelledError:
                            pass

        async def main():
            agent = Agent(
                model="faux:test", provider=FauxProvider([faux.text("hi")]), autoload=False,
                plugins=[Stubborn()],
                settings=Settings(hooks=HookSettings(timeout_s=0.1, abort_grace_s=0.1)),
            )
            await agent.prompt("go")
            print("settled", agent.state.phase)

        asyncio.run(main())
        print("exited")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["settled", "idle", "exited"]
