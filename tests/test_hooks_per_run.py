"""A run's hooks are bound to that run: what its guard recorded ends with it.

An implementation that stalled in a run (timed out: "not called again in this run") is
called again afterwards, outside any run (``resume()``'s check of a custom tail) and in
the next run. The agent's hooks were once re-pointed at each run's guard and kept it
after the run: a converter that stalled once made ``resume()`` refuse a transcript the
converters make sendable.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel

from mainspring import Agent, Settings, UserMessage, hookimpl
from mainspring.events import HookErrorEvent
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux


class Note(BaseModel):
    role: str = "note"
    text: str


class StallsOnceThenConvertsNotes:
    """A converter whose first call never returns; later calls make notes user messages."""

    name = "notes"

    def __init__(self) -> None:
        self.calls = 0
        self.never = asyncio.Event()

    @hookimpl
    async def convert_to_llm(self, messages: tuple[Any, ...]) -> list[Any]:
        self.calls += 1
        if self.calls == 1:
            await self.never.wait()  # never set: the call stalls until its deadline
        return [UserMessage(content=m.text) if isinstance(m, Note) else m for m in messages]


async def test_an_implementation_that_stalled_in_a_run_is_called_again_after_it() -> None:
    converter = StallsOnceThenConvertsNotes()
    agent = Agent(
        model="faux:test",
        provider=FauxProvider([faux.text("first"), faux.text("seen the note")]),
        plugins=[converter],
        autoload=False,
        settings=Settings(hooks={"timeout_s": 0.2}),
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)

    first = await agent.prompt("hi")
    assert first.text == "first"
    stalled = recorder.of_type(HookErrorEvent)
    assert [(e.hook, e.plugin) for e in stalled] == [("convert_to_llm", "notes")]

    agent.append_message(Note(text="remember the milk"))
    resumed = await agent.resume()

    assert resumed.text == "seen the note"
    assert converter.calls >= 3  # the stalled call, resume()'s check, the second run
    check_event_grammar(recorder.events)
