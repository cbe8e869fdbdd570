"""A run's recorder: ahead of every subscriber, and ``Agent.observed`` says whether anyone
else listens.

A durable runner journals each event before anyone sees it. The recorder it passes in
``RunOptions`` is called before the subscribers the agent already had (those its factory
or a plugin added) and those added later, and ``Agent.observed`` says whether an event
goes to anyone besides it (a subscriber, or an ``on_event`` observer that wants it).
"""

from __future__ import annotations

from typing import Any

import pytest

import mainspring
from mainspring import Agent, RunOptions, Settings
from mainspring.testing import FauxProvider, check_event_grammar, faux


def _agent(**kwargs: Any) -> Agent:
    provider = FauxProvider([faux.reply(faux.text("hello"))])
    settings = Settings()
    return Agent(model="faux:test", provider=provider, autoload=False, settings=settings, **kwargs)


async def test_the_recorder_sees_each_event_before_every_subscriber() -> None:
    agent = _agent()
    order: list[tuple[str, int]] = []
    agent.subscribe(lambda event, signal: order.append(("early", event.seq)))

    def recorder(event: Any, signal: Any) -> None:
        order.append(("recorder", event.seq))

    agent.subscribe(lambda event, signal: order.append(("late", event.seq)))
    await agent.prompt("hi", options=RunOptions("run-1", 0, recorder=recorder))

    seqs = sorted({seq for _, seq in order})
    assert order == [(who, seq) for seq in seqs for who in ("recorder", "early", "late")]


async def test_the_recorder_skips_what_was_delivered_like_any_subscriber() -> None:
    agent = _agent()
    seen: list[Any] = []
    options = RunOptions("run-2", 3, recorder=lambda event, signal: seen.append(event))
    await agent.prompt("hi", options=options)
    assert seen[0].seq == 4 and all(event.run_id == "run-2" for event in seen)


async def test_observed_names_subscribers_and_observers() -> None:
    alone = _agent()
    assert alone.observed is False

    unsubscribe = alone.subscribe(lambda event, signal: None)
    assert alone.observed is True
    unsubscribe()
    assert alone.observed is False

    class Observer:
        PLUGIN_NAME = "observer"
        CAPABILITIES = ("observe",)

        @mainspring.hookimpl
        def on_event(self, event: Any) -> None:
            pass

    assert _agent(plugins=[Observer()]).observed is True


async def test_a_run_with_a_recorder_keeps_the_event_grammar() -> None:
    agent = _agent()
    events: list[Any] = []
    options = RunOptions("run-3", 0, recorder=lambda event, signal: events.append(event))
    await agent.prompt("hi", options=options)
    check_event_grammar(events)


def test_a_recorder_that_cannot_be_called_is_refused() -> None:
    with pytest.raises(TypeError, match="recorder must be callable"):
        RunOptions(recorder="journal")  # type: ignore[arg-type]
