"""One example implementation of every hook, shown in ``docs/hooks.md`` under its hook.

Each function is a complete ``@hookimpl``; ``docs/generate_hook_reference.py`` copies its
source into the reference and ``tests/test_hook_examples.py`` runs each one through a
real agent, so the examples stay true. They import only public names.
"""

from __future__ import annotations

import json
import time
from typing import Any

from mainspring import (
    Approval,
    Ask,
    Block,
    CompactionResult,
    NextTurn,
    TextContent,
    ToolResult,
    UserMessage,
    hookimpl,
    tool,
)
from mainspring.effects import Labels
from mainspring.providers import StreamDone, TextDelta

SECRET_MARK = "sk-"

SHOWN_WITH = {"register_tools": ("word_count",), "register_providers": ("EchoProvider",)}
"""What the reference shows before an example besides the hook function itself."""


@hookimpl
def transform_context(messages: tuple[Any, ...]) -> list[Any]:
    """Elide the output of tool results older than the last ten messages."""
    cutoff = len(messages) - 10
    elided = (TextContent(text="[old tool output elided]"),)
    return [
        message.model_copy(update={"content": elided})
        if message.role == "tool_result" and index < cutoff
        else message
        for index, message in enumerate(messages)
    ]


@hookimpl
def convert_to_llm(messages: tuple[Any, ...]) -> list[Any]:
    """Show the model the notes a UI added to the transcript (role "note") as user text."""
    return [
        UserMessage(content=f"(note from the user's UI) {message.text}")
        if message.role == "note"
        else message
        for message in messages
    ]


@hookimpl
def count_tokens(messages: tuple[Any, ...], model: Any) -> int | None:
    """Count code-heavy transcripts at three characters per token (the default uses four)."""
    if not model.id.startswith("code-"):
        return None  # not mine: the next implementation (or the built-in estimate) answers
    return sum(len(message.text) for message in messages) // 3


@hookimpl
async def compact(messages: tuple[Any, ...], reason: str) -> CompactionResult | None:
    """Keep the first user message and the last four messages (never a result alone)."""
    tail = list(messages[-4:])
    while tail and tail[0].role == "tool_result":  # its call would be cut off
        tail.pop(0)
    first = next((m for m in messages if m.role == "user"), None)
    if first is None or len(tail) + 1 >= len(messages):
        return None  # nothing to gain: let another compactor try
    return CompactionResult(messages=[first, *tail], summary=f"dropped the middle ({reason})")


@hookimpl
async def before_tool_call(call: Any, args: Any, tool: Any) -> Block | Ask | None:
    """Refuse "rm -rf" in shell commands; ask a person before anything with "sudo"."""
    if call.name != "shell":
        return None
    command = args.get("command", "")  # the same ToolArgs for every kind of tool
    if "rm -rf" in command:
        return Block("rm -rf is not allowed; delete specific files instead")
    if "sudo" in command:
        return Ask(f"run as root: {command}")
    return None


@hookimpl
def label_tool_result(tool: Any) -> Labels | None:
    """Mark what network tools return as untrusted: a page may carry injected instructions."""
    if "egress" in tool.effects:
        return Labels(integrity="untrusted", sources=("web",))
    return None


@hookimpl
async def request_approval(requests: tuple[Any, ...]) -> dict[str, Approval]:
    """An approver for unattended runs: allow reads, refuse everything else."""
    return {
        request.tool_call_id: Approval(allow=True, remember="tool")
        if request.tool_name.startswith("read")
        else Approval(allow=False, reason="nobody is here to approve this")
        for request in requests
    }


@hookimpl
async def after_tool_result(call: Any, result: ToolResult) -> ToolResult | None:
    """Redact anything that looks like an API key from tool output."""
    if SECRET_MARK not in result.text:
        return None
    words = result.text.split(" ")
    clean = " ".join("[redacted]" if word.startswith(SECRET_MARK) else word for word in words)
    return ToolResult(clean, details=result.details, is_error=result.is_error)


@hookimpl
async def filter_tool_update(partial_result: Any) -> Any | None:
    """Redact API keys from progress reports too (the same rule as the results)."""
    text = partial_result if isinstance(partial_result, str) else json.dumps(partial_result)
    if SECRET_MARK not in text:
        return None
    return " ".join("[redacted]" if w.startswith(SECRET_MARK) else w for w in text.split(" "))


@hookimpl
def review_reply(message: Any) -> Block | str | None:
    """Withhold a reply that quotes an API key; mark one that says "guaranteed"."""
    if "sk-live-" in message.text:
        return Block("it contained an API key")
    if "guaranteed" in message.text:
        return message.text + "\n\n(Not a guarantee: check before relying on it.)"
    return None


@hookimpl
async def should_stop_after_turn(state: Any) -> bool:
    """Stop a run after eight turns of tool calls, whatever the model wants."""
    turns = sum(1 for message in state.messages if message.role == "assistant")
    return turns >= 8


@hookimpl
async def prepare_next_turn(state: Any) -> NextTurn | None:
    """Think harder for the rest of the run once a tool call failed."""
    last = state.messages[-1]
    if last.role == "tool_result" and last.is_error:
        return NextTurn(thinking_level="high")
    return None


events_seen: list[str] = []


@hookimpl
def on_event(event: Any) -> None:
    """Log the run's milestones (not every streamed delta) with a timestamp."""
    if event.type in ("agent_start", "tool_execution_end", "agent_end"):
        events_seen.append(f"{time.strftime('%H:%M:%S')} #{event.seq} {event.type}")


@tool
def word_count(text: str) -> int:
    """Count the words of a text.

    Args:
        text: the text to count
    """
    return len(text.split())


@hookimpl
def register_tools(agent: Any) -> list[Any]:
    """Give every agent the word_count tool."""
    return [word_count]


class EchoProvider:
    """A provider that answers with the last user message ("echo:any-id")."""

    name = "echo"

    async def stream(self, request: Any, signal: Any) -> Any:
        last = next(m for m in reversed(request.messages) if m.role == "user")
        yield TextDelta(f"you said: {last.text}")
        yield StreamDone("stop")


@hookimpl
def register_providers(agent: Any) -> list[Any]:
    """Make "echo:…" model strings resolve to the echo provider."""
    return [EchoProvider()]
