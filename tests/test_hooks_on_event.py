"""on_event: every plugin observes every event, after the subscribers, awaited, in order.

Hook table (DESIGN §4, §6, §15): every event, right after the subscribers; all
implementations, in order, awaited; an implementation that raises fails the run, as a
raising subscriber does (except while the run is already ending: logged, nothing
changes). ``StopRun`` from it is a deliberate stop.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mainspring import Agent, Settings, StopRun, hookimpl, tool
from mainspring.testing import EventRecorder, FauxProvider, faux, scripted_run


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    return text


TOOL_RUN = [faux.tool_call("echo", {"text": "x"}), faux.text("done")]


async def run_agent(
    plugins: list[Any], steps: list[Any], recorder: EventRecorder | None = None, **kwargs: Any
) -> tuple[Agent, EventRecorder, FauxProvider]:
    kwargs.setdefault("tools", [echo])
    return await scripted_run(steps, plugins=plugins, recorder=recorder, **kwargs)


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_every_event_reaches_on_event_in_order(kind: str) -> None:
    seen: list[Any] = []
    if kind == "sync":

        class Observer:
            @hookimpl
            def on_event(self, event):
                seen.append(event)

    else:

        class Observer:  # type: ignore[no-redef]
            @hookimpl
            async def on_event(self, event):
                await asyncio.sleep(0)
                seen.append(event)

    _, recorder, _ = await run_agent([Observer()], TOOL_RUN)

    assert seen == recorder.events  # the same objects, the same total order
    assert [e.seq for e in seen] == list(range(seen[0].seq, seen[0].seq + len(seen)))


async def test_on_event_runs_right_after_the_subscribers_for_each_event() -> None:
    log: list[tuple[str, int]] = []

    class Observer:
        @hookimpl
        async def on_event(self, event):
            await asyncio.sleep(0)
            log.append(("hook", event.seq))

    provider = FauxProvider([faux.text("hi")])
    agent = Agent(provider=provider, model="faux:test", plugins=[Observer()], autoload=False)

    async def slow_listener(event: Any, signal: Any) -> None:
        await asyncio.sleep(0)
        log.append(("sub-1", event.seq))

    agent.subscribe(slow_listener)
    agent.subscribe(lambda event, signal: log.append(("sub-2", event.seq)))
    await agent.prompt("go")

    seqs = sorted({seq for _, seq in log})
    expected = [(who, seq) for seq in seqs for who in ("sub-1", "sub-2", "hook")]
    assert log == expected


async def test_every_implementation_is_called_in_order() -> None:
    log: list[tuple[str, str]] = []

    def observer(label: str, **marks: bool) -> Any:
        class Observer:
            name = label

            @hookimpl(**marks)
            async def on_event(self, event):
                log.append((label, event.type))

        return Observer()

    plugins = [
        observer("last", trylast=True),
        observer("a"),
        observer("first", tryfirst=True),
        observer("b"),
    ]
    _, recorder, _ = await run_agent(plugins, [faux.text("hi")])

    per_event = ["first", "b", "a", "last"]
    assert log == [(label, t) for t in recorder.types() for label in per_event]


async def test_what_an_observer_returns_is_ignored_and_the_next_ones_still_see_the_event() -> None:
    """Observers that answer (a value, an awaitable) between quiet ones: every observer,
    in order, sees every event; a returned value changes nothing."""
    log: list[tuple[str, int]] = []

    def observer(label: str, answer: str) -> Any:
        class Observer:
            name = label

            if answer == "async":

                @hookimpl
                async def on_event(self, event):
                    log.append((label, event.seq))

            else:

                @hookimpl
                def on_event(self, event):
                    log.append((label, event.seq))
                    return "a value" if answer == "value" else None

        return Observer()

    plugins = [
        observer("quiet-2", "none"),
        observer("async", "async"),
        observer("value", "value"),
        observer("quiet-1", "none"),
    ]
    _, recorder, _ = await run_agent(plugins, TOOL_RUN)

    order = ["quiet-1", "value", "async", "quiet-2"]
    assert log == [(label, e.seq) for e in recorder.events for label in order]
    recorder.check_grammar()


async def test_on_event_gets_the_agent_and_the_runs_signal() -> None:
    seen: list[tuple[Any, Any]] = []

    class Observer:
        @hookimpl
        def on_event(self, event, agent, signal):
            seen.append((agent, signal))

    agent, _, _ = await run_agent([Observer()], [faux.text("hi")])

    # a plugin sees the agent through its own view, the same object at every event
    assert {id(a) for a, _ in seen} == {id(agent.view_for("Observer"))}
    assert len({id(s) for _, s in seen}) == 1


async def test_the_run_waits_for_an_async_observer() -> None:
    """``prompt()`` returns only after on_event of agent_end has finished."""
    finished: list[str] = []

    class SlowWriter:
        @hookimpl
        async def on_event(self, event, agent):
            for _ in range(5):
                await asyncio.sleep(0)
            assert agent.state.is_streaming  # still streaming while agent_end is delivered
            finished.append(event.type)

    _, recorder, _ = await run_agent([SlowWriter()], [faux.text("hi")])

    assert finished == recorder.types()
    assert finished[-1] == "agent_end"


# -- failure: a run failure -------------------------------------------------------------


@pytest.mark.parametrize("error", [ConnectionError, GeneratorExit])
@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_raising_observer_fails_the_run_naming_the_plugin(
    kind: str, error: type[BaseException]
) -> None:
    if kind == "sync":

        class Broken:
            name = "metrics"

            @hookimpl
            def on_event(self, event):
                if event.type == "tool_execution_start":
                    raise error("statsd down")

    else:

        class Broken:  # type: ignore[no-redef]
            name = "metrics"

            @hookimpl
            async def on_event(self, event):
                if event.type == "tool_execution_start":
                    raise error("statsd down")

    agent, recorder, provider = await run_agent([Broken()], TOOL_RUN)

    end = recorder.of_type("agent_end")[0]
    assert end.reason == "error"
    assert "metrics" in end.detail and "statsd down" in end.detail
    last = agent.state.messages[-1]
    assert last.role == "assistant" and last.stop_reason == "error"
    assert "metrics" in last.error_message
    # the call still got exactly one result
    assert [m.role for m in agent.state.messages] == [
        "user",
        "assistant",
        "tool_result",
        "assistant",
    ]
    assert len(provider.requests) == 1
    assert agent.state.is_streaming is False
    assert agent.state.pending_tool_calls == frozenset()


async def test_a_raising_observer_on_agent_start_gets_a_turn_to_carry_the_error() -> None:
    class Broken:
        @hookimpl
        def on_event(self, event):
            if event.type == "agent_start":
                raise RuntimeError("cannot open log")

    agent, recorder, provider = await run_agent([Broken()], [faux.text("never")])

    assert recorder.of_type("agent_end")[0].reason == "error"
    assert provider.requests == []
    assert recorder.types().count("turn_start") == 1
    assert agent.state.messages[-1].stop_reason == "error"


async def test_a_raising_observer_of_agent_end_changes_nothing() -> None:
    class Broken:
        @hookimpl
        def on_event(self, event):
            if event.type == "agent_end":
                raise RuntimeError("too late to matter")

    agent, recorder, _ = await run_agent([Broken()], [faux.text("hi")])

    assert recorder.of_type("agent_end")[0].reason == "stop"
    assert agent.state.error_message is None
    assert agent.state.messages[-1].text == "hi"
    assert agent.state.is_streaming is False


async def test_a_raising_observer_does_not_loop_on_the_failure_events() -> None:
    calls: list[str] = []

    class AlwaysBroken:
        @hookimpl
        def on_event(self, event):
            calls.append(event.type)
            raise RuntimeError("always")

    agent, recorder, _ = await run_agent([AlwaysBroken()], [faux.text("never")])

    assert recorder.of_type("agent_end")[0].reason == "error"
    assert calls == recorder.types()  # once per event, no retry storm
    assert agent.state.is_streaming is False


async def test_a_raising_observer_in_the_retry_phase_fails_the_run_cleanly() -> None:
    class Broken:
        @hookimpl
        def on_event(self, event):
            if event.type == "retry":
                raise RuntimeError("retry logger failed")

    steps = [faux.error("overloaded", retryable=True, retry_after=0), faux.text("never")]
    agent, recorder, _ = await run_agent([Broken()], steps)

    assert recorder.of_type("agent_end")[0].reason == "error"
    assert agent.state.phase == "idle"


async def test_a_raising_observer_in_the_compaction_phase_fails_the_run_cleanly() -> None:
    class Huge:
        @hookimpl(tryfirst=True)
        def count_tokens(self):
            return 10_000_000

    class Broken:
        @hookimpl
        def on_event(self, event):
            if event.type == "compaction_start":
                raise RuntimeError("compaction logger failed")

    agent, recorder, _ = await run_agent([Broken(), Huge()], [faux.text("never")])

    assert recorder.of_type("agent_end")[0].reason == "error"
    assert agent.state.phase == "idle"


# -- StopRun ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_stop_run_from_an_observer_is_a_deliberate_stop(kind: str) -> None:
    if kind == "sync":

        class Watchdog:
            @hookimpl
            def on_event(self, event):
                if event.type == "tool_execution_start":
                    raise StopRun("watchdog: no tools today")

    else:

        class Watchdog:  # type: ignore[no-redef]
            @hookimpl
            async def on_event(self, event):
                if event.type == "tool_execution_start":
                    raise StopRun("watchdog: no tools today")

    agent, recorder, provider = await run_agent([Watchdog()], TOOL_RUN)

    end = recorder.of_type("agent_end")[0]
    assert (end.reason, end.detail) == ("stopped_by_hook", "watchdog: no tools today")
    assert len(provider.requests) == 1
    assert [m.role for m in agent.state.messages] == ["user", "assistant", "tool_result"]
    assert agent.state.messages[-1].is_error
    assert agent.state.error_message is None


async def test_stop_run_from_an_observer_of_the_retry_event() -> None:
    class GiveUp:
        @hookimpl
        def on_event(self, event):
            if event.type == "retry":
                raise StopRun("no retries on this deployment")

    steps = [faux.error("overloaded", retryable=True, retry_after=0), faux.text("never")]
    agent, recorder, provider = await run_agent(
        [GiveUp()], steps, settings=Settings(retry={"max_attempts": 3})
    )

    end = recorder.of_type("agent_end")[0]
    assert (end.reason, end.detail) == ("stopped_by_hook", "no retries on this deployment")
    assert len(provider.requests) == 1
    assert agent.state.phase == "idle"
