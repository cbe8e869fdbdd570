"""The replay seam's recorder: ahead of every subscriber, and told whether anyone else listens.

A durable runner journals each event before anyone sees it. The recorder it gives
``prepare_replay`` is called before the subscribers the agent already had (those its
factory or a plugin added) and those added later, and ``reaches_others`` says whether an
event goes to anyone besides it (a subscriber, or an ``on_event`` observer that wants it).
"""

from __future__ import annotations

from typing import Any

import mainspring
from mainspring import Agent, Settings
from mainspring.kernel.replay import prepare_replay, reaches_others
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

    prepare_replay(agent, "run-1", 0, recorder=recorder)
    agent.subscribe(lambda event, signal: order.append(("late", event.seq)))
    await agent.prompt("hi")

    seqs = sorted({seq for _, seq in order})
    assert order == [(who, seq) for seq in seqs for who in ("recorder", "early", "late")]


async def test_the_recorder_skips_what_was_delivered_like_any_subscriber() -> None:
    agent = _agent()
    seen: list[Any] = []
    prepare_replay(agent, "run-2", 3, recorder=lambda event, signal: seen.append(event))
    await agent.prompt("hi")
    assert seen[0].seq == 4 and all(event.run_id == "run-2" for event in seen)


async def test_reaches_others_names_subscribers_and_observers() -> None:
    alone = _agent()
    answers: list[bool] = []
    prepare_replay(alone, "r", 0, recorder=lambda event, signal: answers.append(True))
    assert reaches_others(alone) is False

    unsubscribe = alone.subscribe(lambda event, signal: None)
    assert reaches_others(alone) is True
    unsubscribe()
    assert reaches_others(alone) is False

    class Observer:
        PLUGIN_NAME = "observer"
        CAPABILITIES = ("observe",)

        @mainspring.hookimpl
        def on_event(self, event: Any) -> None:
            pass

    observed = _agent(plugins=[Observer()])
    prepare_replay(observed, "r", 0, recorder=lambda event, signal: None)
    assert reaches_others(observed) is True


async def test_a_run_with_a_recorder_keeps_the_event_grammar() -> None:
    agent = _agent()
    events: list[Any] = []
    prepare_replay(agent, "run-3", 0, recorder=lambda event, signal: events.append(event))
    await agent.prompt("hi")
    check_event_grammar(events)
