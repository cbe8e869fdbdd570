"""Every message type has ``.text``: the plain text a person would read."""

from __future__ import annotations

import base64

from mainspring import (
    AssistantMessage,
    CompactionSummary,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

IMAGE = ImageContent(data=base64.b64encode(b"png").decode(), mime_type="image/png")


def test_a_user_message_of_a_string() -> None:
    assert UserMessage(content="hello").text == "hello"


def test_a_user_message_of_blocks_joins_the_text_and_leaves_images_out() -> None:
    message = UserMessage(content=(TextContent(text="look "), IMAGE, TextContent(text="here")))
    assert message.text == "look here"


def test_an_assistant_reply_leaves_thinking_and_calls_out() -> None:
    reply = AssistantMessage(
        content=(
            ThinkingContent(thinking="hmm"),
            TextContent(text="done"),
            ToolCall(id="c1", name="x", arguments={}),
        )
    )
    assert reply.text == "done"


def test_a_tool_result_and_a_compaction_summary() -> None:
    result = ToolResultMessage(tool_call_id="c1", tool_name="x", content=(TextContent(text="ok"),))
    assert result.text == "ok"
    assert CompactionSummary(summary="earlier: greetings").text == "earlier: greetings"
