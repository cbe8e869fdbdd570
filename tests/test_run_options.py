"""A run entered with ``RunOptions``: the seam durable runners replay a run through.

- ``run_id`` gives the run the id it had; ``delivered_through`` keeps the events up to
  that ``seq`` from subscribers and ``on_event`` observers, numbering going on unchanged;
- ``provider`` serves every request of that run only;
- malformed options are refused with a sentence, before the run starts, losing nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

from mainspring import Agent, RunOptions, hookimpl
from mainspring.events import AgentEnd, AgentStart
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux


def _script() -> list[Any]:
    return [faux.tool_call("echo", {"text": "hi"}), faux.text("done")]


class _Observer:
    def __init__(self) -> None:
        self.seqs: list[int] = []

    @hookimpl
    def on_event(self, event: Any) -> None:
        self.seqs.append(event.seq)


async def _recorded_run(options: RunOptions | None) -> tuple[EventRecorder, _Observer, AgentEnd]:
    from mainspring import tool

    @tool
    def echo(text: str) -> str:
        """Echo the text back."""
        return text

    observer = _Observer()
    agent = Agent(
        model="faux:test",
        provider=FauxProvider(_script()),
        tools=[echo],
        plugins=[observer],
        autoload=False,
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    end = await agent.prompt("go", options=options)
    return recorder, observer, end


async def test_a_replayed_run_keeps_its_id_and_delivers_only_what_was_not_delivered() -> None:
    first, first_observer, _ = await _recorded_run(None)
    check_event_grammar(first.events)
    run_id = first.events[0].run_id
    through = first.events[len(first.events) // 2].seq

    replayed, observer, end = await _recorded_run(
        RunOptions(run_id="replayed-run", delivered_through=through)
    )
    expected = [(e.type, e.seq) for e in first.events if e.seq > through]
    assert [(e.type, e.seq) for e in replayed.events] == expected
    assert {e.run_id for e in replayed.events} == {"replayed-run"} != {run_id}
    assert observer.seqs == [seq for _, seq in expected]
    assert first_observer.seqs == [e.seq for e in first.events]
    assert end.run_id == "replayed-run" and end.reason == "stop"


async def test_without_options_every_event_is_delivered_under_a_new_id() -> None:
    recorder, _, _ = await _recorded_run(RunOptions())
    check_event_grammar(recorder.events)
    assert isinstance(recorder.events[0], AgentStart)
    assert recorder.events[0].run_id


async def test_the_provider_option_serves_that_run_only() -> None:
    own = FauxProvider([faux.text("from the agent's provider")])
    replaying = FauxProvider([faux.text("from the replaying provider")])
    agent = Agent(model="faux:test", provider=own, autoload=False)

    replayed = await agent.prompt("one", options=RunOptions(provider=replaying))
    later = await agent.prompt("two")

    assert replayed.text == "from the replaying provider"
    assert later.text == "from the agent's provider"
    assert len(replaying.requests) == 1 and len(own.requests) == 1
    assert agent.provider is own


async def test_resume_takes_options_too() -> None:
    agent = Agent(
        model="faux:test",
        provider=FauxProvider([faux.error("down"), faux.text("back")]),
        autoload=False,
    )
    await agent.prompt("hi")
    recorder = EventRecorder()
    agent.subscribe(recorder)
    end = await agent.resume(options=RunOptions(run_id="resumed"))
    assert end.text == "back"
    assert {e.run_id for e in recorder.events} == {"resumed"}


@pytest.mark.parametrize(
    ("make", "error", "words"),
    [
        (lambda: RunOptions(run_id=""), TypeError, "run_id must be a non-empty str"),
        (lambda: RunOptions(run_id=7), TypeError, "run_id must be a non-empty str"),  # type: ignore[arg-type]
        (lambda: RunOptions(delivered_through=-1), ValueError, "must be >= 0"),
        (lambda: RunOptions(delivered_through=True), TypeError, "must be an int"),
        (lambda: RunOptions(provider=object()), TypeError, "must be a Provider"),  # type: ignore[arg-type]
    ],
)
def test_malformed_options_are_refused_with_a_sentence(
    make: Any, error: type[Exception], words: str
) -> None:
    with pytest.raises(error, match=words):
        make()


async def test_options_of_the_wrong_type_are_refused_before_the_run_and_lose_nothing() -> None:
    agent = Agent(model="faux:test", provider=FauxProvider([faux.text("ok")]), autoload=False)
    with pytest.raises(TypeError, match="options must be a RunOptions, not dict"):
        await agent.prompt("hi", options={"run_id": "x"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="options must be a RunOptions"):
        await agent.resume(options="x")  # type: ignore[arg-type]
    assert agent.state.messages == () and not agent.is_running
    assert (await agent.prompt("hi")).text == "ok"
