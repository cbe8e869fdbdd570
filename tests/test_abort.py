"""abort(): never hangs, every call gets one result, partial output is kept as "aborted".

Abort is triggered from a listener (inside the run's own task) and from another task,
during a model stream, a tool batch and a retry backoff. Conditions are awaited through
events, never by sleeping; tools sleep only to simulate work.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from pydantic import BaseModel

from mainspring import Agent, Tool, ToolContext
from mainspring.events import AgentEnd, Retry, ToolExecutionEnd, TurnEnd
from mainspring.settings import RetrySettings, Settings
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux

LONG_TEXT = "".join(f"word{i:03d} " for i in range(100))  # 800 chars, 200 deltas of 4


def make_agent(
    steps: list[Any],
    *,
    tools: tuple[Tool, ...] = (),
    settings: Settings | None = None,
    **provider_kwargs: Any,
) -> tuple[Agent, EventRecorder, FauxProvider]:
    provider = FauxProvider(steps, **provider_kwargs)
    agent = Agent(
        model="faux:test", provider=provider, autoload=False, tools=tools, settings=settings
    )
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


def sleeping_tool(
    name: str, seconds: float, started: list[str], all_started: asyncio.Event, expected: int
) -> Tool:
    async def execute(args: NoArgs, ctx: ToolContext) -> str:
        started.append(name)
        if len(started) == expected:
            all_started.set()
        await asyncio.sleep(seconds)
        return f"{name} finished"

    return Tool(name, f"sleeps {seconds} s", NoArgs, execute)


# ------------------------------------------------------------------ model stream


async def test_abort_from_a_listener_after_n_updates_keeps_the_partial_text() -> None:
    agent, recorder, _ = make_agent([faux.text(LONG_TEXT)], delay_s=0.01)
    updates = 0

    def abort_after_five(event: Any, signal: Any) -> None:
        nonlocal updates
        if event.type == "message_update":
            updates += 1
            if updates == 5:
                agent.abort()

    agent.subscribe(abort_after_five)
    began = time.monotonic()
    await agent.prompt("talk")
    assert time.monotonic() - began < 1.0

    check_event_grammar(recorder.events)
    message = recorder.messages("assistant")[-1]
    assert message.stop_reason == "aborted"
    assert message.text == LONG_TEXT[:20]
    assert recorder.types().count("message_update") == 5
    (end,) = recorder.of_type(AgentEnd)
    assert end.reason == "aborted"
    assert agent.state.messages[-1] == message
    assert agent.state.error_message is not None
    assert_idle(agent)


async def test_abort_from_another_task_mid_stream() -> None:
    agent, recorder, _ = make_agent([faux.text(LONG_TEXT)], delay_s=0.01)
    streaming = asyncio.Event()

    def on_update(event: Any, signal: Any) -> None:
        if event.type == "message_update" and len(event.message.text) >= 12:
            streaming.set()

    agent.subscribe(on_update)
    run = asyncio.create_task(agent.prompt("talk"))
    await streaming.wait()
    assert agent.state.is_streaming is True
    agent.abort()
    aborted_at = time.monotonic()
    await run
    assert time.monotonic() - aborted_at < 1.0

    check_event_grammar(recorder.events)
    message = recorder.messages("assistant")[-1]
    assert message.stop_reason == "aborted"
    assert 12 <= len(message.text) < len(LONG_TEXT)
    assert LONG_TEXT.startswith(message.text)
    (end,) = recorder.of_type(AgentEnd)
    assert end.reason == "aborted"
    (turn_end,) = recorder.of_type(TurnEnd)
    assert turn_end.message == message
    assert_idle(agent)
    assert_no_task_left()


async def test_abort_when_idle_is_a_no_op() -> None:
    agent, recorder, _ = make_agent([faux.text("hello")])
    agent.abort()
    agent.abort("again")
    assert recorder.events == []
    assert_idle(agent)
    await agent.prompt("hi")
    check_event_grammar(recorder.events)
    assert recorder.of_type(AgentEnd)[0].reason == "stop"
    # aborting after the run is over does not touch it or the next run
    agent.abort()
    assert agent.state.error_message is None


async def test_agent_is_usable_after_an_abort_and_the_aborted_reply_is_not_resent() -> None:
    agent, recorder, provider = make_agent([faux.text(LONG_TEXT), faux.text("ok")], delay_s=0.01)

    def abort_on_third(event: Any, signal: Any) -> None:
        if event.type == "message_update" and len(event.message.text) == 12:
            agent.abort()

    unsubscribe = agent.subscribe(abort_on_third)
    await agent.prompt("first")
    unsubscribe()
    await agent.prompt("second")
    check_event_grammar(recorder.events)
    assert [e.reason for e in recorder.of_type(AgentEnd)] == ["aborted", "stop"]
    assert agent.state.error_message is None
    second_request = provider.requests[1]
    assert all(
        getattr(m, "stop_reason", None) not in ("error", "aborted") for m in second_request.messages
    )
    assert [m.role for m in second_request.messages] == ["user", "user"]


async def test_abort_twice_is_harmless() -> None:
    agent, recorder, _ = make_agent([faux.text(LONG_TEXT)], delay_s=0.01)

    def abort_twice(event: Any, signal: Any) -> None:
        if event.type == "message_update":
            agent.abort("first")
            agent.abort("second")

    agent.subscribe(abort_twice)
    await agent.prompt("talk")
    check_event_grammar(recorder.events)
    assert recorder.of_type(AgentEnd)[0].reason == "aborted"
    assert recorder.types().count("message_update") == 1


async def test_cancelling_the_prompt_caller_aborts_the_run() -> None:
    agent, recorder, _ = make_agent([faux.text(LONG_TEXT)], delay_s=0.01)
    streaming = asyncio.Event()
    agent.subscribe(
        lambda event, signal: streaming.set() if event.type == "message_update" else None
    )
    run = asyncio.create_task(agent.prompt("talk"))
    await streaming.wait()
    run.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await run
    check_event_grammar(recorder.events)
    assert recorder.of_type(AgentEnd)[0].reason == "aborted"
    assert_idle(agent)
    assert_no_task_left()


# ------------------------------------------------------------------ tool batch


async def test_abort_during_three_sleeping_tools_returns_fast_with_aborted_results() -> None:
    started: list[str] = []
    all_started = asyncio.Event()
    tools = tuple(sleeping_tool(n, 3600, started, all_started, 3) for n in ("a", "b", "c"))
    agent, recorder, _ = make_agent(
        [[faux.tool_call("a", {}), faux.tool_call("b", {}), faux.tool_call("c", {})]],
        tools=tools,
    )
    run = asyncio.create_task(agent.prompt("go"))
    await all_started.wait()
    assert len(agent.state.pending_tool_calls) == 3
    aborted_at = time.monotonic()
    agent.abort()
    await run
    assert time.monotonic() - aborted_at < 1.0

    check_event_grammar(recorder.events)
    ends = recorder.of_type(ToolExecutionEnd)
    assert sorted(e.tool_name for e in ends) == ["a", "b", "c"]
    assert all(e.is_error for e in ends)
    assert all("aborted" in e.result.text.lower() for e in ends)
    results = recorder.messages("tool_result")
    assert [r.tool_name for r in results] == ["a", "b", "c"]
    assert all(r.is_error and "aborted" in r.text.lower() for r in results)
    (end,) = recorder.of_type(AgentEnd)
    assert end.reason == "aborted"
    (turn_end,) = recorder.of_type(TurnEnd)
    assert turn_end.tool_results == tuple(results)
    assert_idle(agent)
    assert agent.state.error_message is not None
    assert_no_task_left()


async def test_abort_from_inside_a_tool_stops_the_whole_batch() -> None:
    started: list[str] = []
    all_started = asyncio.Event()
    sleeper = sleeping_tool("sleeper", 3600, started, all_started, 99)

    class Args(BaseModel):
        pass

    async def stop_everything(args: Args, ctx: ToolContext) -> str:
        await all_started.wait()
        agent.abort()
        await asyncio.sleep(3600)
        return "unreachable"

    stopper = Tool("stopper", "aborts the run", Args, stop_everything)
    agent, recorder, _ = make_agent(
        [[faux.tool_call("sleeper", {}), faux.tool_call("stopper", {})]],
        tools=(sleeper, stopper),
    )
    # release the stopper once the sleeper runs
    agent.subscribe(
        lambda event, signal: (
            all_started.set()
            if event.type == "tool_execution_start" and event.tool_name == "stopper"
            else None
        )
    )
    began = time.monotonic()
    await agent.prompt("go")
    assert time.monotonic() - began < 1.0
    check_event_grammar(recorder.events)
    results = recorder.messages("tool_result")
    assert [r.tool_name for r in results] == ["sleeper", "stopper"]
    assert all(r.is_error for r in results)
    assert recorder.of_type(AgentEnd)[0].reason == "aborted"
    assert_idle(agent)


async def test_abort_from_a_tool_execution_update_listener_does_not_wait_for_the_tools() -> None:
    class Args(BaseModel):
        pass

    async def slow(args: Args, ctx: ToolContext) -> str:
        ctx.update("working")
        await asyncio.sleep(3)  # ignores the signal, like a careless tool
        return "done"

    tool = Tool("slow", "slow", Args, slow)
    agent, recorder, _ = make_agent(
        [[faux.tool_call("slow", {}), faux.tool_call("slow", {})]], tools=(tool,)
    )

    def abort_on_update(event: Any, signal: Any) -> None:
        if event.type == "tool_execution_update":
            agent.abort()

    agent.subscribe(abort_on_update)
    began = time.monotonic()
    await agent.prompt("go")
    elapsed = time.monotonic() - began
    check_event_grammar(recorder.events)
    assert recorder.of_type(AgentEnd)[0].reason == "aborted"
    assert all(r.is_error for r in recorder.messages("tool_result"))
    assert elapsed < 1.0, f"abort() from a listener waited {elapsed:.2f} s for the tools"


async def test_abort_from_a_tool_execution_start_listener_gives_every_call_a_result() -> None:
    started: list[str] = []
    all_started = asyncio.Event()
    tools = tuple(sleeping_tool(n, 3600, started, all_started, 3) for n in ("a", "b", "c"))
    agent, recorder, _ = make_agent(
        [[faux.tool_call("a", {}), faux.tool_call("b", {}), faux.tool_call("c", {})]],
        tools=tools,
    )

    def abort_on_first_start(event: Any, signal: Any) -> None:
        if event.type == "tool_execution_start":
            agent.abort()

    agent.subscribe(abort_on_first_start)
    began = time.monotonic()
    await agent.prompt("go")
    assert time.monotonic() - began < 1.0
    check_event_grammar(recorder.events)
    assert started == []  # nothing was executed
    results = recorder.messages("tool_result")
    assert [r.tool_name for r in results] == ["a", "b", "c"]
    assert all(r.is_error for r in results)
    assert recorder.of_type(AgentEnd)[0].reason == "aborted"
    assert_idle(agent)


async def test_abort_during_a_sync_tool_in_a_thread_does_not_wait_for_it() -> None:
    class Args(BaseModel):
        pass

    entered = asyncio.Event()
    loop = asyncio.get_running_loop()

    def blocking(args: Args, ctx: ToolContext) -> str:
        loop.call_soon_threadsafe(entered.set)
        time.sleep(1.2)
        return "done"

    tool = Tool("blocking", "blocks a thread", Args, blocking)
    agent, recorder, _ = make_agent([faux.tool_call("blocking", {})], tools=(tool,))
    run = asyncio.create_task(agent.prompt("go"))
    await entered.wait()
    aborted_at = time.monotonic()
    agent.abort()
    await run
    assert time.monotonic() - aborted_at < 1.0  # abort_grace_s defaults to 0.5 s
    check_event_grammar(recorder.events)
    (result,) = recorder.messages("tool_result")
    assert result.is_error and "aborted" in result.text.lower()
    assert_idle(agent)


# ------------------------------------------------------------------ retry backoff


async def test_abort_during_retry_backoff_from_another_task_returns_fast() -> None:
    agent, recorder, _ = make_agent(
        [faux.error("overloaded", retryable=True, retry_after=30), faux.text("never")]
    )
    retrying = asyncio.Event()
    agent.subscribe(lambda event, signal: retrying.set() if event.type == "retry" else None)
    run = asyncio.create_task(agent.prompt("hi"))
    await retrying.wait()
    assert agent.state.phase == "retry"
    aborted_at = time.monotonic()
    agent.abort()
    await run
    assert time.monotonic() - aborted_at < 1.0

    check_event_grammar(recorder.events)
    (retry,) = recorder.of_type(Retry)
    assert retry.delay_s == 30
    message = recorder.messages("assistant")[-1]
    assert message.stop_reason == "aborted"
    assert recorder.of_type(AgentEnd)[0].reason == "aborted"
    assert_idle(agent)
    assert_no_task_left()


async def test_abort_from_the_retry_listener_skips_the_backoff() -> None:
    # max_delay_s bounds the damage if the backoff ignores the abort
    settings = Settings(retry=RetrySettings(max_delay_s=3))
    agent, recorder, _ = make_agent(
        [faux.error("overloaded", retryable=True, retry_after=30), faux.text("never")],
        settings=settings,
    )
    agent.subscribe(lambda event, signal: agent.abort() if event.type == "retry" else None)
    began = time.monotonic()
    await agent.prompt("hi")
    elapsed = time.monotonic() - began
    check_event_grammar(recorder.events)
    assert recorder.of_type(AgentEnd)[0].reason == "aborted"
    assert recorder.messages("assistant")[-1].stop_reason == "aborted"
    assert elapsed < 1.0, f"the retry backoff slept {elapsed:.2f} s after abort()"


async def test_queues_are_kept_after_an_abort() -> None:
    agent, recorder, _ = make_agent([faux.text(LONG_TEXT)], delay_s=0.01)
    agent.follow_up("later")

    def abort_now(event: Any, signal: Any) -> None:
        if event.type == "message_update":
            agent.steer("redirect")
            agent.abort()

    agent.subscribe(abort_now)
    await agent.prompt("talk")
    check_event_grammar(recorder.events)
    assert recorder.of_type(AgentEnd)[0].reason == "aborted"
    assert [m.content for m in agent.state.follow_up_queue] == ["later"]
    assert [m.content for m in agent.state.steering_queue] == ["redirect"]


async def test_abort_from_an_agent_start_listener_never_calls_the_model() -> None:
    agent, recorder, provider = make_agent(["never streamed"])
    agent.subscribe(lambda event, signal: agent.abort() if event.type == "agent_start" else None)
    await agent.prompt("hi")
    check_event_grammar(recorder.events)
    assert recorder.of_type(AgentEnd)[0].reason == "aborted"
    assert recorder.messages("assistant")[-1].stop_reason == "aborted"
    assert provider.requests == []
    assert_idle(agent)


async def test_abort_from_a_turn_end_listener_stops_before_the_next_turn() -> None:
    class Args(BaseModel):
        pass

    async def noop(args: Args, ctx: ToolContext) -> str:
        return "ok"

    agent, recorder, provider = make_agent(
        [faux.tool_call("noop", {}), "never"], tools=(Tool("noop", "noop", Args, noop),)
    )
    agent.subscribe(lambda event, signal: agent.abort() if event.type == "turn_end" else None)
    await agent.prompt("hi")
    check_event_grammar(recorder.events)
    assert recorder.of_type(AgentEnd)[0].reason == "aborted"
    assert len(provider.requests) == 1
    assert len(recorder.of_type("turn_start")) == 1
    assert_idle(agent)
