"""The Agent's run lifecycle: awaited listeners, idle semantics, busy errors, event loops."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from mainspring import Agent, AgentBusyError, Tool, ToolContext, UserMessage
from mainspring.events import AgentEnd
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux


def make_agent(
    steps: list[Any], *, tools: list[Tool] | tuple[Tool, ...] = (), **provider_kwargs: Any
) -> tuple[Agent, EventRecorder, FauxProvider]:
    provider = FauxProvider(steps, **provider_kwargs)
    agent = Agent(model="faux:test", provider=provider, autoload=False, tools=tools)
    recorder = EventRecorder()
    agent.subscribe(recorder)
    return agent, recorder, provider


def assert_idle(agent: Agent) -> None:
    state = agent.state
    assert state.is_streaming is False
    assert state.phase == "idle"
    assert state.pending_tool_calls == frozenset()
    assert state.streaming_message is None


def assert_no_task_left() -> None:
    leftover = {task for task in asyncio.all_tasks() if task is not asyncio.current_task()}
    assert leftover == set(), leftover


class NoArgs(BaseModel):
    pass


class Gate:
    """A tool that signals when it runs and waits until released."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    def tool(self) -> Tool:
        async def wait(args: NoArgs, ctx: ToolContext) -> str:
            self.entered.set()
            await self.release.wait()
            return "released"

        return Tool("wait", "waits", NoArgs, wait)


# ------------------------------------------------------------------ awaited listeners


async def test_async_agent_end_listener_holds_prompt_and_wait_for_idle() -> None:
    agent, recorder, _ = make_agent(["hello"])
    reached_end = asyncio.Event()
    release = asyncio.Event()
    listener_done: list[bool] = []

    async def slow_logger(event: Any, signal: Any) -> None:
        if event.type == "agent_end":
            reached_end.set()
            await release.wait()
            listener_done.append(True)

    agent.subscribe(slow_logger)
    run = asyncio.create_task(agent.prompt("hi"))
    await reached_end.wait()

    idle = asyncio.create_task(agent.wait_for_idle())
    await asyncio.sleep(0)  # let both waiters run up to their await
    state = agent.state
    assert state.is_streaming is True
    assert state.phase == "idle"  # phase_change(turn -> idle) came before agent_end
    assert not run.done()
    assert not idle.done()
    with pytest.raises(AgentBusyError):
        await agent.prompt("too early")

    release.set()
    await run
    await idle
    assert listener_done == [True]
    assert_idle(agent)
    check_event_grammar(recorder.events)
    assert recorder.types()[-1] == "agent_end"


async def test_async_listeners_are_awaited_in_subscription_order_one_event_at_a_time() -> None:
    agent, recorder, _ = make_agent(
        [faux.tool_call("noop", {}), "done"],
        tools=[Tool("noop", "noop", NoArgs, lambda args, ctx: "ok")],
    )
    log: list[tuple[str, int]] = []
    delivering = False
    overlaps: list[int] = []

    def listener(name: str) -> Any:
        async def deliver(event: Any, signal: Any) -> None:
            nonlocal delivering
            if name == "first":
                if delivering:
                    overlaps.append(event.seq)
                delivering = True
            log.append((name, event.seq))
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            if name == "second":
                delivering = False

        return deliver

    agent.subscribe(listener("first"))
    agent.subscribe(listener("second"))
    await agent.prompt("go")
    check_event_grammar(recorder.events)
    assert overlaps == []
    expected: list[tuple[str, int]] = []
    for event in recorder.events:
        expected += [("first", event.seq), ("second", event.seq)]
    assert log == expected


async def test_slow_async_listener_on_tool_start_delays_the_tool() -> None:
    order: list[str] = []

    async def tool_fn(args: NoArgs, ctx: ToolContext) -> str:
        order.append("tool ran")
        return "ok"

    agent, recorder, _ = make_agent(
        [faux.tool_call("t", {}), "done"], tools=[Tool("t", "t", NoArgs, tool_fn)]
    )

    async def slow(event: Any, signal: Any) -> None:
        if event.type == "tool_execution_start":
            await asyncio.sleep(0.02)
            order.append("listener finished")

    agent.subscribe(slow)
    await agent.prompt("go")
    check_event_grammar(recorder.events)
    assert order == ["listener finished", "tool ran"]


async def test_unsubscribe_stops_delivery() -> None:
    agent, recorder, _ = make_agent(["one", "two"])
    second = EventRecorder()
    unsubscribe = agent.subscribe(second)
    await agent.prompt("a")
    count = len(second.events)
    unsubscribe()
    unsubscribe()  # idempotent
    await agent.prompt("b")
    assert len(second.events) == count
    check_event_grammar(recorder.events)


async def test_subscribe_rejects_a_non_callable() -> None:
    agent, _, _ = make_agent([])
    with pytest.raises(TypeError):
        agent.subscribe("not a listener")  # type: ignore[arg-type]


# ------------------------------------------------------------------ busy


async def test_prompt_resume_and_reset_while_busy_raise_agent_busy_error() -> None:
    gate = Gate()
    agent, recorder, _ = make_agent(
        [faux.tool_call("wait", {}), "done", "follow-up done"], tools=[gate.tool()]
    )
    run = asyncio.create_task(agent.prompt("go"))
    await gate.entered.wait()
    assert agent.state.is_streaming is True

    with pytest.raises(AgentBusyError) as busy:
        await agent.prompt("again")
    text = str(busy.value)
    assert "steer" in text and "follow_up" in text
    with pytest.raises(AgentBusyError):
        await agent.resume()
    with pytest.raises(AgentBusyError):
        agent.reset()
    # steering and follow-up are the way to talk to a busy agent
    agent.follow_up("queued while busy")
    assert [m.content for m in agent.state.follow_up_queue] == ["queued while busy"]

    gate.release.set()
    await run
    check_event_grammar(recorder.events)
    # the rejected calls left no trace in the run; the follow-up joined it
    assert len(recorder.of_type("agent_start")) == 1
    assert [m.content for m in recorder.messages("user")] == ["go", "queued while busy"]
    assert recorder.of_type(AgentEnd)[0].reason == "stop"
    assert_idle(agent)


async def test_busy_error_message_mentions_steer_and_follow_up() -> None:
    error = AgentBusyError("prompt")
    assert "steer()" in str(error)
    assert "follow_up()" in str(error)
    assert "wait_for_idle" in str(error)


async def test_wait_for_idle_when_idle_returns_at_once() -> None:
    agent, recorder, _ = make_agent(["x"])
    await asyncio.wait_for(agent.wait_for_idle(), timeout=1)
    await agent.prompt("hi")
    await asyncio.wait_for(agent.wait_for_idle(), timeout=1)
    check_event_grammar(recorder.events)


async def test_wait_for_idle_waits_for_a_running_prompt() -> None:
    gate = Gate()
    agent, recorder, _ = make_agent([faux.tool_call("wait", {}), "done"], tools=[gate.tool()])
    run = asyncio.create_task(agent.prompt("go"))
    await gate.entered.wait()
    idle = asyncio.create_task(agent.wait_for_idle())
    await asyncio.sleep(0)
    assert not idle.done()
    gate.release.set()
    await idle
    assert_idle(agent)
    assert recorder.types()[-1] == "agent_end"
    await run
    check_event_grammar(recorder.events)


# ------------------------------------------------------------------ settling


async def test_prompt_leaves_no_task_behind() -> None:
    class Args(BaseModel):
        seconds: float

    async def nap(args: Args, ctx: ToolContext) -> str:
        await asyncio.sleep(args.seconds)
        return "ok"

    agent, recorder, _ = make_agent(
        [
            [faux.tool_call("nap", {"seconds": 0.01}), faux.tool_call("nap", {"seconds": 0.02})],
            "done",
        ],
        tools=[Tool("nap", "nap", Args, nap)],
    )
    await agent.prompt("go")
    assert_no_task_left()
    check_event_grammar(recorder.events)
    assert_idle(agent)


async def test_prompt_accepts_a_string_a_message_or_a_list() -> None:
    agent, recorder, _ = make_agent(["1", "2", "3"])
    await agent.prompt("text")
    await agent.prompt(UserMessage(content="message"))
    await agent.prompt([UserMessage(content="a"), UserMessage(content="b")])
    check_event_grammar(recorder.events)
    assert [m.content for m in recorder.messages("user")] == ["text", "message", "a", "b"]


async def test_prompt_rejects_bad_input_before_any_run() -> None:
    agent, recorder, _ = make_agent(["x"])
    with pytest.raises(ValueError):
        await agent.prompt([])
    with pytest.raises(TypeError):
        await agent.prompt([42])  # type: ignore[list-item]
    assert recorder.events == []
    assert_idle(agent)
    await agent.prompt("fine")
    check_event_grammar(recorder.events)


async def test_is_streaming_is_true_from_agent_start_to_agent_end() -> None:
    agent, recorder, _ = make_agent(["hello"])
    seen: list[tuple[str, bool]] = []
    agent.subscribe(lambda event, signal: seen.append((event.type, agent.state.is_streaming)))
    await agent.prompt("hi")
    assert all(streaming for _, streaming in seen)
    assert agent.state.is_streaming is False
    check_event_grammar(recorder.events)


async def test_configure_applies_to_the_next_run_only() -> None:
    gate = Gate()
    agent, recorder, provider = make_agent(
        [faux.tool_call("wait", {}), "done", "second"], tools=[gate.tool()]
    )
    agent.configure(system_prompt="be terse")
    run = asyncio.create_task(agent.prompt("go"))
    await gate.entered.wait()
    agent.configure(system_prompt="be verbose")
    gate.release.set()
    await run
    await agent.prompt("again")
    assert [r.system_prompt for r in provider.requests] == ["be terse", "be terse", "be verbose"]
    assert agent.state.system_prompt == "be verbose"
    check_event_grammar(recorder.events)


async def test_reset_clears_transcript_and_error() -> None:
    agent, recorder, _ = make_agent([faux.error("boom"), "fresh"])
    await agent.prompt("hi")
    assert agent.state.error_message is not None
    agent.reset()
    assert agent.state.messages == ()
    assert agent.state.error_message is None
    await agent.prompt("again")
    assert [m.role for m in agent.state.messages] == ["user", "assistant"]
    check_event_grammar(recorder.events)


async def test_initial_messages_are_the_start_of_the_transcript() -> None:
    history = (UserMessage(content="earlier"),)
    provider = FauxProvider(["ok"])
    agent = Agent(model="faux:test", provider=provider, autoload=False, messages=history)
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await agent.prompt("now")
    assert [m.content for m in provider.requests[0].messages] == ["earlier", "now"]
    check_event_grammar(recorder.events)


async def test_model_resolution_with_a_provider_override() -> None:
    agent, _, _ = make_agent(["x"])
    model = agent.state.model
    assert (model.provider, model.id) == ("faux", "test")
    assert model.context_window == 128_000
    assert model.max_output_tokens == 8_192


# ------------------------------------------------------------------ event loops


def test_agent_is_usable_from_two_successive_asyncio_run_calls(tmp_path: Any) -> None:
    target = tmp_path / "file.txt"

    class Args(BaseModel):
        pass

    async def locked(args: Args, ctx: ToolContext) -> str:
        async with ctx.file_lock(str(target)):
            await asyncio.sleep(0.001)
        return "locked"

    provider = FauxProvider(
        [faux.tool_call("locked", {}), "one", faux.tool_call("locked", {}), "two"], delay_s=0.001
    )
    # built outside any event loop
    agent = Agent(
        model="faux:test",
        provider=provider,
        autoload=False,
        tools=[Tool("locked", "takes a file lock", Args, locked)],
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)

    async def run(text: str) -> None:
        await agent.prompt(text)
        await agent.wait_for_idle()

    asyncio.run(run("first"))
    asyncio.run(run("second"))

    check_event_grammar(recorder.events)
    assert [e.reason for e in recorder.of_type(AgentEnd)] == ["stop", "stop"]
    assert [m.text for m in recorder.messages("assistant") if m.text] == ["one", "two"]
    assert all(not r.is_error for r in recorder.messages("tool_result"))
    assert agent.state.is_streaming is False


def test_abort_works_in_a_second_event_loop() -> None:
    provider = FauxProvider(["x" * 400, "y" * 400], delay_s=0.005)
    agent = Agent(model="faux:test", provider=provider, autoload=False)
    recorder = EventRecorder()
    agent.subscribe(recorder)

    def abort_early(event: Any, signal: Any) -> None:
        if event.type == "message_update":
            agent.abort()

    agent.subscribe(abort_early)
    asyncio.run(agent.prompt("first"))
    asyncio.run(agent.prompt("second"))
    check_event_grammar(recorder.events)
    assert [e.reason for e in recorder.of_type(AgentEnd)] == ["aborted", "aborted"]


async def test_two_concurrent_prompts_one_runs_one_is_refused() -> None:
    agent, recorder, _ = make_agent(["only one"])
    outcomes = await asyncio.gather(agent.prompt("a"), agent.prompt("b"), return_exceptions=True)
    assert isinstance(outcomes[0], AgentEnd) and outcomes[0].reason == "stop"
    assert isinstance(outcomes[1], AgentBusyError)
    check_event_grammar(recorder.events)
    assert len(recorder.of_type("agent_start")) == 1
