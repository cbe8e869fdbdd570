"""Transcript entries to JSON data and back, through the public ``mainspring`` names."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, ConfigDict

import mainspring
from mainspring import (
    AssistantMessage,
    CompactionSummary,
    CustomMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    decode_message,
    encode_message,
)


class Note(BaseModel):
    model_config = ConfigDict(frozen=True)

    role: str = "note"
    text: str


TRANSCRIPT = [
    UserMessage(content="list the files"),
    AssistantMessage(
        content=(TextContent(text="Looking."), ToolCall(id="c1", name="ls", arguments={"p": "."})),
        provider="faux",
        model="test",
        usage=Usage(input_tokens=3, output_tokens=5),
        stop_reason="tool_use",
    ),
    ToolResultMessage(
        tool_call_id="c1", tool_name="ls", content=(TextContent(text="a.txt"),), is_error=False
    ),
    CompactionSummary(summary="earlier: greetings", tokens_before=100),
]


@pytest.mark.parametrize("message", TRANSCRIPT, ids=lambda m: m.role)
def test_built_in_messages_survive_a_trip_through_json(message: mainspring.Message) -> None:
    data = json.loads(json.dumps(encode_message(message)))
    assert decode_message(data) == message


def test_a_custom_message_comes_back_with_its_fields() -> None:
    data = json.loads(json.dumps(encode_message(Note(text="remember this"))))
    back = decode_message(data)
    assert isinstance(back, CustomMessage)
    assert (back.role, back.model_extra) == ("note", {"text": "remember this"})


def test_what_json_cannot_hold_is_described_not_raised() -> None:
    result = ToolResultMessage(
        tool_call_id="c1", tool_name="t", content=(), details={"lock": object()}, is_error=False
    )
    assert encode_message(result)["details"] == {"lock": "<unserializable: object>"}


@pytest.mark.parametrize("data", [None, [], {"content": "x"}, {"role": 3}])
def test_data_without_a_role_is_refused(data: object) -> None:
    with pytest.raises(ValueError, match="role"):
        decode_message(data)
