"""Messages kept in a transcript share pydantic's record of their given fields.

A kept message and the blocks inside it share ``model_fields_set`` with every other
message given the same fields (it is most of a small message's size); what each one
reports is unchanged, and copying one with changes never changes another.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from mainspring import Agent, AssistantMessage, TextContent, ToolResult, UserMessage
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux


async def kept(replies: list[Any], count: int = 2) -> list[Agent]:
    agents = []
    for _ in range(count):
        agent = Agent(model="faux:test", provider=FauxProvider(list(replies)), autoload=False)
        recorder = EventRecorder()
        agent.subscribe(recorder)
        await agent.prompt("go")
        check_event_grammar(recorder.events)
        agents.append(agent)
    return agents


async def test_kept_messages_report_their_given_fields_and_share_them() -> None:
    first, second = await kept([faux.text("done")])
    (user_a, reply_a), (user_b, reply_b) = first.state.messages, second.state.messages
    assert user_a.model_fields_set == {"content"}
    assert user_a.model_fields_set is user_b.model_fields_set
    assert reply_a.model_fields_set is reply_b.model_fields_set
    assert {"content", "usage", "stop_reason"} <= reply_a.model_fields_set
    block_a, block_b = reply_a.content[0], reply_b.content[0]
    assert block_a.model_fields_set is block_b.model_fields_set
    assert block_a.model_dump(exclude_unset=True)["text"] == "done"


async def test_copying_a_kept_message_with_changes_leaves_the_others_alone() -> None:
    first, second = await kept([faux.text("done")])
    user_a, user_b = first.state.messages[0], second.state.messages[0]
    assert user_a.model_fields_set is user_b.model_fields_set

    changed = user_a.model_copy(update={"timestamp": 1.0})

    assert changed.model_fields_set == {"content", "timestamp"}
    assert user_a.model_fields_set == user_b.model_fields_set == {"content"}
    assert changed.timestamp == 1.0 and user_b.timestamp != 1.0


def test_custom_messages_share_too_unless_they_take_extra_fields() -> None:
    class Note(BaseModel):
        model_config = ConfigDict(frozen=True)
        role: str = "note"
        body: str

    class Loose(BaseModel):
        model_config = ConfigDict(frozen=True, extra="allow")
        role: str = "loose"

    agent = Agent(model="faux:test", provider=FauxProvider([]), autoload=False)
    first, second = Note(body="x"), Note(body="y")
    loose = Loose(anything="goes")  # type: ignore[call-arg]
    loose_fields = loose.model_fields_set
    agent.append_message(UserMessage(content="hello"))
    agent.append_message(AssistantMessage(content=(TextContent(text="hi"),)))
    agent.append_message(first)
    agent.append_message(second)
    agent.append_message(loose)

    assert first.model_fields_set is second.model_fields_set
    assert first.model_fields_set == {"body"}
    assert loose.model_fields_set is loose_fields
    assert loose.model_fields_set == {"anything"}


def test_tool_results_given_alike_share_their_record() -> None:
    one, other = ToolResult("a"), ToolResult.error("b")
    assert one.model_fields_set is other.model_fields_set
    assert one.content[0].model_fields_set is other.content[0].model_fields_set
    assert one.model_copy(update={"is_error": True}).model_fields_set == one.model_fields_set
