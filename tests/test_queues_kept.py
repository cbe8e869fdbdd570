"""Queues survive an abort and a stop policy; ``clear_queues()`` empties them."""

from __future__ import annotations

from typing import Any

from mainspring import Agent, UserMessage, hookimpl
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux


def _agent(provider: FauxProvider, plugins: list[Any] | None = None) -> tuple[Agent, EventRecorder]:
    agent = Agent(model="faux:t", provider=provider, plugins=plugins or [], autoload=False)
    recorder = EventRecorder()
    agent.subscribe(recorder)
    return agent, recorder


async def test_queues_are_kept_when_the_run_is_aborted() -> None:
    agent, recorder = _agent(FauxProvider([faux.text("a long reply " * 20)], delay_s=0.001))

    def abort_midway(event: Any, signal: Any) -> None:
        if event.type == "message_update":
            agent.follow_up("later")
            agent.steer("now")
            agent.abort()

    agent.subscribe(abort_midway)
    await agent.prompt("go")
    check_event_grammar(recorder.events)
    assert recorder.of_type("agent_end")[0].reason == "aborted"
    state = agent.state
    assert [m.content for m in state.steering_queue] == ["now"]
    assert [m.content for m in state.follow_up_queue] == ["later"]


async def test_queues_are_kept_when_a_plugin_stops_the_run() -> None:
    class StopAfterFirstTurn:
        name = "stopper"

        @hookimpl
        def should_stop_after_turn(self) -> bool:
            return True

    agent, recorder = _agent(FauxProvider([faux.text("done")]), [StopAfterFirstTurn()])
    agent.follow_up("next")
    await agent.prompt("go")
    check_event_grammar(recorder.events)
    end = recorder.of_type("agent_end")[0]
    assert end.reason == "stopped_by_hook"
    assert recorder.types()[-3:] == ["turn_end", "phase_change", "agent_end"]
    assert [m.content for m in agent.state.follow_up_queue] == ["next"]


async def test_clear_queues_returns_and_empties_both() -> None:
    agent, _ = _agent(FauxProvider([]))
    agent.steer("s")
    agent.follow_up(UserMessage(content="f"))
    steering, follow_up = agent.clear_queues()
    assert [m.content for m in steering] == ["s"]
    assert [m.content for m in follow_up] == ["f"]
    assert agent.state.steering_queue == ()
    assert agent.state.follow_up_queue == ()
