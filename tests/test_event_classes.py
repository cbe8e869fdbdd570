"""The event classes: keyword construction, frozen values, equality, repr, JSON, and the
``message_update`` message built on first read, the same object on every read."""

from __future__ import annotations

import dataclasses
import json
import typing

import pytest

from mainspring import Agent, AssistantMessage, TextContent
from mainspring.events import (
    AgentStart,
    Event,
    MessageUpdate,
    PhaseChange,
    ToolDecision,
    event_to_dict,
    event_to_json,
)
from mainspring.providers import TextDelta
from mainspring.testing import EventRecorder, FauxProvider, faux

EVENT_CLASSES = typing.get_args(Event)


def test_events_are_frozen_values_built_from_keywords() -> None:
    first = PhaseChange(seq=3, run_id="r", turn=0, previous="idle", phase="turn")
    same = PhaseChange(seq=3, run_id="r", turn=0, previous="idle", phase="turn")
    assert first == same and first != dataclasses.replace(first, seq=4)
    assert repr(first) == ("PhaseChange(seq=3, run_id='r', turn=0, previous='idle', phase='turn')")
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.seq = 4  # type: ignore[misc]
    with pytest.raises(TypeError):
        AgentStart(1, "r")  # type: ignore[misc]  # keywords only
    with pytest.raises(TypeError, match="decision"):
        ToolDecision(seq=1, run_id="r", tool_call_id="c", tool_name="t", plugin=None)  # type: ignore[call-arg]


def test_a_message_update_is_frozen_and_compares_by_value() -> None:
    message = AssistantMessage(content=(TextContent(text="Hi"),))
    update = MessageUpdate(seq=1, run_id="r", message=message, delta=TextDelta("Hi"))
    assert update.message is message
    assert update == MessageUpdate(seq=1, run_id="r", message=message, delta=TextDelta("Hi"))
    assert [field.name for field in dataclasses.fields(update)] == [
        "seq",
        "run_id",
        "turn",
        "message",
        "delta",
    ]
    assert repr(update).startswith("MessageUpdate(seq=1, run_id='r', turn=None, message=")
    with pytest.raises(dataclasses.FrozenInstanceError):
        update.message = message  # type: ignore[misc]


async def _recorded_text_run() -> EventRecorder:
    """The events of a run whose reply is one text streamed in 3-character deltas."""
    provider = FauxProvider([faux.reply(faux.text("Hello there"))], chunk_size=3)
    agent = Agent(model="faux:x", provider=provider, autoload=False)
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await agent.prompt("hi")
    return recorder


async def test_every_event_of_a_run_converts_to_json_and_back() -> None:
    recorder = await _recorded_text_run()
    seen = {type(event) for event in recorder.events}
    assert seen <= set(EVENT_CLASSES) and MessageUpdate in seen
    for event in recorder.events:
        data = json.loads(event_to_json(event))
        assert data == json.loads(json.dumps(event_to_dict(event)))
        assert data["type"] == event.type and data["seq"] == event.seq
        assert list(data)[1:] == [field.name for field in dataclasses.fields(event)]


async def test_the_partial_message_is_built_once_on_first_read() -> None:
    recorder = await _recorded_text_run()
    updates = recorder.of_type("message_update")
    assert len(updates) >= 3
    texts = []
    for update in updates:
        first = update.message
        assert isinstance(first, AssistantMessage)
        assert update.message is first  # built once, then kept
        texts.append(first.text)
    assert texts == sorted(texts, key=len) and texts[-1] == "Hello there"
    assert all("Hello there".startswith(text) for text in texts)


def test_every_event_class_has_its_type_name() -> None:
    names = [cls.type for cls in EVENT_CLASSES]
    assert len(set(names)) == len(names)
    assert all(name == name.lower() and " " not in name for name in names)
