"""should_stop_after_turn: any True stops the run (stopped_by_hook); raising fails the run.

Hook table (DESIGN §6, §10, §15): after each completed turn; any ``True`` stops the run
with ``reason=stopped_by_hook`` and later implementations are not called; queues are
kept; an implementation that raises is a run failure (lifecycle rule 1), carried by an
assistant error message inside a turn the kernel opens for it.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from mainspring import Agent, AgentState, Settings, StopRun, UserMessage, hookimpl, tool
from mainspring.testing import EventRecorder, FauxProvider, faux, scripted_run


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    return text


def loop_steps(n: int) -> list[Any]:
    """``n`` tool-call replies, then a final text."""
    return [faux.tool_call("echo", {"text": str(i)}) for i in range(n)] + [faux.text("done")]


async def run_agent(
    plugins: list[Any], steps: list[Any], before: Any = None, **kwargs: Any
) -> tuple[Agent, EventRecorder, FauxProvider]:
    kwargs.setdefault("tools", [echo])
    return await scripted_run(steps, plugins=plugins, before=before, **kwargs)


@contextmanager
def no_unawaited_coroutines() -> Iterator[None]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    leaked = [w for w in caught if "never awaited" in str(w.message)]
    assert not leaked, [str(w.message) for w in leaked]


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_true_stops_the_run_after_the_turn(kind: str) -> None:
    if kind == "sync":

        class StopAfterFirst:
            @hookimpl
            def should_stop_after_turn(self, state):
                return state.turns_completed >= 1

    else:

        class StopAfterFirst:  # type: ignore[no-redef]
            @hookimpl
            async def should_stop_after_turn(self, state):
                return state.turns_completed >= 1

    agent, recorder, provider = await run_agent([StopAfterFirst()], loop_steps(3))

    assert len(provider.requests) == 1
    assert len(recorder.of_type("turn_end")) == 1
    end = recorder.of_type("agent_end")[0]
    assert end.reason == "stopped_by_hook"
    assert agent.state.error_message is None
    # the turn that completed is intact: its call has its result
    assert [m.role for m in agent.state.messages] == ["user", "assistant", "tool_result"]


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_false_and_none_let_the_run_go_on(kind: str) -> None:
    calls: list[int] = []
    if kind == "sync":

        class Never:
            @hookimpl
            def should_stop_after_turn(self, state):
                calls.append(state.turns_completed)
                return False

    else:

        class Never:  # type: ignore[no-redef]
            @hookimpl
            async def should_stop_after_turn(self, state):
                calls.append(state.turns_completed)

    _, recorder, provider = await run_agent([Never()], loop_steps(2))

    assert calls == [1, 2, 3]  # once per completed turn
    assert len(provider.requests) == 3
    assert recorder.of_type("agent_end")[0].reason == "stop"


async def test_it_is_called_after_turn_end_with_the_state_after_the_turn() -> None:
    seen: list[tuple[str, AgentState, Any, Any]] = []
    recorder = EventRecorder()

    class Spy:
        @hookimpl
        def should_stop_after_turn(self, state, agent, signal):
            seen.append((recorder.events[-1].type, state, agent, signal))

    def subscribe(agent: Agent) -> None:
        agent.subscribe(recorder)

    agent, _, _ = await run_agent([Spy()], [faux.text("hi")], before=subscribe)

    ((last_event, state, got_agent, signal),) = seen
    assert last_event == "turn_end"
    assert isinstance(state, AgentState)
    assert [m.role for m in state.messages] == ["user", "assistant"]
    # a plugin sees the agent through its own view
    assert got_agent is agent.view_for("Spy")
    assert signal.aborted is False


@pytest.mark.parametrize("later_kind", ["sync", "async"])
async def test_the_first_true_wins_and_later_ones_are_not_called(later_kind: str) -> None:
    later_calls: list[str] = []

    class Stopper:
        @hookimpl
        def should_stop_after_turn(self):
            return True

    if later_kind == "sync":

        class Later:
            @hookimpl
            def should_stop_after_turn(self):
                later_calls.append("called")
                return False

    else:

        class Later:  # type: ignore[no-redef]
            @hookimpl
            async def should_stop_after_turn(self):
                later_calls.append("called")
                return False

    with no_unawaited_coroutines():
        _, recorder, _ = await run_agent([Later(), Stopper()], loop_steps(2))

    assert later_calls == []
    assert recorder.of_type("agent_end")[0].reason == "stopped_by_hook"


async def test_tryfirst_and_trylast_are_honoured() -> None:
    order: list[str] = []

    def plugin(label: str, **marks: bool) -> Any:
        class P:
            name = label

            @hookimpl(**marks)
            async def should_stop_after_turn(self):
                order.append(label)

        return P()

    plugins = [plugin("last", trylast=True), plugin("first", tryfirst=True), plugin("mid")]
    await run_agent(plugins, [faux.text("hi")])

    # the built-in max_turns is trylast too; it answers False well below its limit
    assert order == ["first", "mid", "last"]


async def test_queues_are_kept_when_a_hook_stops_the_run() -> None:
    class Stop:
        @hookimpl
        def should_stop_after_turn(self):
            return True

    def queue(agent: Agent) -> None:
        agent.follow_up("later, please")

    agent, recorder, provider = await run_agent([Stop()], [faux.text("hi")], before=queue)

    assert recorder.of_type("agent_end")[0].reason == "stopped_by_hook"
    (queued,) = agent.state.follow_up_queue
    assert isinstance(queued, UserMessage) and queued.content == "later, please"
    assert len(provider.requests) == 1


async def test_steering_queued_during_the_turn_is_kept_when_stopped() -> None:
    agent_box: list[Agent] = []

    @tool
    def steer_me(text: str) -> str:
        """Steers the agent while running."""
        agent_box[0].steer("change course")
        return text

    class Stop:
        @hookimpl
        def should_stop_after_turn(self):
            return True

    agent, recorder, _ = await run_agent(
        [Stop()],
        [faux.tool_call("steer_me", {"text": "x"}), faux.text("never")],
        before=agent_box.append,
        tools=[steer_me],
    )

    assert recorder.of_type("agent_end")[0].reason == "stopped_by_hook"
    assert [m.content for m in agent.state.steering_queue] == ["change course"]


# -- StopRun ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_stop_run_gives_the_reason_as_detail(kind: str) -> None:
    if kind == "sync":

        class Budget:
            @hookimpl
            def should_stop_after_turn(self):
                raise StopRun("budget exhausted: $0.50")

    else:

        class Budget:  # type: ignore[no-redef]
            @hookimpl
            async def should_stop_after_turn(self):
                raise StopRun("budget exhausted: $0.50")

    agent, recorder, provider = await run_agent([Budget()], loop_steps(2))

    end = recorder.of_type("agent_end")[0]
    assert (end.reason, end.detail) == ("stopped_by_hook", "budget exhausted: $0.50")
    assert len(provider.requests) == 1
    assert recorder.of_type("hook_error") == []
    # no assistant message is invented
    assert [m.role for m in agent.state.messages] == ["user", "assistant", "tool_result"]
    assert agent.state.error_message is None


# -- failure: a run failure -------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_raising_stop_policy_fails_the_run(kind: str) -> None:
    if kind == "sync":

        class Broken:
            name = "stop-policy"

            @hookimpl
            def should_stop_after_turn(self):
                raise ZeroDivisionError("division by zero")

    else:

        class Broken:  # type: ignore[no-redef]
            name = "stop-policy"

            @hookimpl
            async def should_stop_after_turn(self):
                raise ZeroDivisionError("division by zero")

    agent, recorder, provider = await run_agent([Broken()], loop_steps(2))

    end = recorder.of_type("agent_end")[0]
    assert end.reason == "error"
    assert "stop-policy" in end.detail
    last = agent.state.messages[-1]
    assert last.role == "assistant" and last.stop_reason == "error"
    assert "stop-policy" in last.error_message
    assert "ZeroDivisionError" in last.error_message
    assert agent.state.error_message == end.detail
    assert len(provider.requests) == 1
    # the failure came after turn_end: the kernel opened a turn to carry it
    turn_ends = recorder.of_type("turn_end")
    assert len(turn_ends) == 2
    assert turn_ends[-1].message is last
    assert agent.state.is_streaming is False


async def test_the_agent_is_usable_after_a_failing_stop_policy() -> None:
    fail = [True]

    class Flaky:
        @hookimpl
        def should_stop_after_turn(self):
            if fail[0]:
                fail[0] = False
                raise RuntimeError("flaky")
            return False

    agent, _, _provider = await run_agent([Flaky()], [faux.text("one"), faux.text("two")])

    await agent.prompt("again")
    assert agent.state.messages[-1].text == "two"
    assert agent.state.error_message is None


# -- the built-in max_turns -------------------------------------------------------------


async def test_the_builtin_turn_cap_stops_a_looping_run() -> None:
    _agent, recorder, provider = await run_agent([], loop_steps(5), settings=Settings(max_turns=2))

    end = recorder.of_type("agent_end")[0]
    assert end.reason == "stopped_by_hook"
    assert "2" in end.detail and "max_turns" in end.detail
    assert len(provider.requests) == 2


async def test_the_builtin_turn_cap_can_be_disabled_by_name() -> None:
    _, recorder, provider = await run_agent(
        [], loop_steps(3), settings=Settings(max_turns=1), disable_plugins=["max_turns"]
    )

    assert recorder.of_type("agent_end")[0].reason == "stop"
    assert len(provider.requests) == 4
