"""``message_update.message``: the partial message as it stood at that delta.

The kernel builds it when it is first read, so these tests read it late (after the run),
early (inside the listener), through the state, twice, and through the dataclass
helpers: it must be the same value every way.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from mainspring import AssistantMessage, TextContent, ThinkingContent, ToolCall
from mainspring.events import MessageUpdate, event_to_json
from mainspring.providers.base import TextDelta, ThinkingDelta, ToolCallEnd
from mainspring.testing import faux, scripted_run


def expected_partials(updates: list[MessageUpdate]) -> list[tuple[Any, ...]]:
    """The content each update should show, rebuilt from the deltas alone."""
    blocks: list[list[Any]] = []  # [kind, text] or ["call", id, name, ended]
    expected = []
    for update in updates:
        delta = update.delta
        kind = "text" if isinstance(delta, TextDelta) else "thinking"
        if isinstance(delta, TextDelta | ThinkingDelta):
            if blocks and blocks[-1][0] == kind:
                blocks[-1][1] += delta.text
            else:
                blocks.append([kind, delta.text])
        elif delta.type == "tool_call_start":
            blocks.append(["call", delta.id, delta.name, False])
        elif isinstance(delta, ToolCallEnd):
            next(b for b in blocks if b[0] == "call" and b[1] == delta.id)[3] = True
        expected.append(tuple((b[0], b[1]) if b[0] != "call" else (b[1], b[3]) for b in blocks))
    return expected


def shown(message: AssistantMessage) -> tuple[Any, ...]:
    out: list[Any] = []
    for block in message.content:
        if isinstance(block, TextContent):
            out.append(("text", block.text))
        elif isinstance(block, ThinkingContent):
            out.append(("thinking", block.thinking))
        else:
            assert isinstance(block, ToolCall)
            out.append((block.id, block.arguments == {"text": "abc"}))
    return tuple(out)


REPLY = faux.reply(
    faux.thinking("let me think about it"),
    faux.text("calling a tool now"),
    faux.tool_call("echo", {"text": "abc"}, id="c1"),
    faux.text("and more words after"),
)


async def run_reply(listener: Any = None) -> Any:
    from mainspring import tool

    @tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    def before(agent: Any) -> None:
        if listener is not None:
            agent.subscribe(listener)

    return await scripted_run([REPLY, faux.text("ok")], tools=[echo], before=before)


async def test_each_partial_read_after_the_run_is_the_message_at_its_delta() -> None:
    run = await run_reply()
    updates = [e for e in run.recorder.events if e.type == "message_update"]
    first_reply = [u for u in updates if u.turn == 0]
    assert len(first_reply) > 10
    assert [shown(u.message) for u in first_reply] == expected_partials(first_reply)


async def test_the_partial_read_inside_the_listener_is_the_states_streaming_message() -> None:
    checked: list[bool] = []
    holder: dict[str, Any] = {}

    def listener(event: Any, signal: Any) -> None:
        if event.type == "message_update":
            agent = holder["agent"]
            # the state first on odd updates, the event first on even ones
            if event.seq % 2:
                state_message = agent.state.streaming_message
                checked.append(state_message is event.message)
            else:
                event_message = event.message
                checked.append(agent.state.streaming_message is event_message)
            checked.append(event.message is event.message)

    from mainspring import tool

    @tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    def before(agent: Any) -> None:
        holder["agent"] = agent
        agent.subscribe(listener)

    await scripted_run([REPLY, faux.text("ok")], tools=[echo], before=before)
    assert checked and all(checked)


async def test_an_unread_update_behaves_as_any_frozen_event() -> None:
    run = await run_reply()
    updates = [e for e in run.recorder.events if e.type == "message_update"]
    unread, other = updates[5], updates[6]

    copy = dataclasses.replace(unread, seq=unread.seq)
    assert copy == unread and hash(copy) == hash(unread)
    assert copy.message is unread.message
    assert unread != other
    with pytest.raises(dataclasses.FrozenInstanceError):
        other.message = unread.message  # type: ignore[misc]
    data = json.loads(event_to_json(other))
    assert data["type"] == "message_update"
    assert data["message"]["role"] == "assistant" and data["message"]["content"]
    assert "PartialMessage" not in repr(updates[7])


async def test_the_final_message_holds_the_whole_text() -> None:
    run = await run_reply()
    final = next(
        e.message
        for e in run.recorder.events
        if e.type == "message_end" and e.turn == 0 and e.message.role == "assistant"
    )
    assert (
        shown(final)
        == expected_partials(
            [e for e in run.recorder.events if e.type == "message_update" and e.turn == 0]
        )[-1]
    )


async def test_message_start_carries_the_message_before_its_first_delta() -> None:
    """A UI that shows message_start's message and appends each delta shows the reply once.

    The first delta arrives in the first ``message_update`` only (it used to be in
    ``message_start`` as well: such a UI showed "TheThe").
    """
    shown_text: list[str] = []
    at_start: list[Any] = []
    ended: list[str] = []

    def ui(event: Any, signal: Any) -> None:
        if event.type == "message_start" and event.message.role == "assistant":
            at_start.append((event.message.content, agent_state()))
            shown_text.append(event.message.text)
        elif event.type == "message_update" and isinstance(event.delta, TextDelta):
            shown_text[-1] += event.delta.text
        elif event.type == "message_end" and event.message.role == "assistant":
            ended.append(event.message.text)

    holder: list[Any] = []

    def agent_state() -> Any:
        return holder[0].state.streaming_message.content

    def before(agent: Any) -> None:
        holder.append(agent)
        agent.subscribe(ui)

    run = await scripted_run([faux.text("The answer is 42")], before=before)
    assert shown_text == ended == ["The answer is 42"]
    assert at_start == [((), ())]  # the event's message and the state's: both empty
    updates = [e for e in run.recorder.events if e.type == "message_update"]
    assert updates[0].message.text == updates[0].delta.text  # the first delta, once
