"""MCP prompts: listed for an agent, fetched as messages to send it.

A server's prompts (``prompts/list``, read when it started) are :class:`McpPrompt`
values (:func:`prompts`). :func:`get_prompt` fetches one (``prompts/get``) with its
string arguments and returns its messages as mainspring messages, ready for
``agent.prompt(...)``; ``mainspring chat`` does this for ``/prompt NAME ARG=VALUE...``.
A prompt is named ``NAME``, or ``SERVER:NAME`` when several servers have one of that
name. Content maps as a tool result's does (:func:`~mainspring.mcp.to_tool_result`:
the server's content limits, control characters escaped); an assistant message keeps
its text (other blocks are described in a line).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import mcp_types as types

from ..messages import AssistantMessage, TextContent, UserMessage
from . import runtime
from .binding import connections_of
from .connection import ServerFailure
from .tools import to_tool_result

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = ["McpPrompt", "PromptArgument", "find_prompt", "get_prompt", "prompts"]


@dataclass(frozen=True, slots=True)
class PromptArgument:
    """One argument of a prompt (its value is a string)."""

    name: str
    description: str | None
    required: bool


@dataclass(frozen=True, slots=True)
class McpPrompt:
    """A prompt a server offers: ``server``, ``name``, ``description``, ``arguments``."""

    server: str
    name: str
    description: str | None
    arguments: tuple[PromptArgument, ...]

    @property
    def qualified(self) -> str:
        """``SERVER:NAME``, which names it whatever other servers offer."""
        return f"{self.server}:{self.name}"


def prompts(agent: Agent) -> list[McpPrompt]:
    """Every prompt of every server ``agent`` uses, in server order."""
    found = []
    for server, connection in connections_of(agent).items():
        for prompt in connection.prompts:
            arguments = tuple(
                PromptArgument(a.name, a.description, bool(a.required))
                for a in prompt.arguments or ()
            )
            found.append(McpPrompt(server, prompt.name, prompt.description, arguments))
    return found


def find_prompt(agent: Agent, name: str) -> McpPrompt:
    """The prompt ``name`` (``NAME`` or ``SERVER:NAME``); ``ValueError`` saying why not."""
    offered = prompts(agent)
    if ":" in name:
        matches = [prompt for prompt in offered if prompt.qualified == name]
    else:
        matches = [prompt for prompt in offered if prompt.name == name]
    if len(matches) == 1:
        return matches[0]
    if matches:
        names = ", ".join(prompt.qualified for prompt in matches)
        raise ValueError(f"several servers have a prompt {name!r}: name one of {names}")
    known = ", ".join(prompt.qualified for prompt in offered) or "none"
    raise ValueError(f"no MCP prompt {name!r} (the servers' prompts: {known})")


async def get_prompt(
    agent: Agent, name: str, arguments: Mapping[str, str] | None = None
) -> list[UserMessage | AssistantMessage]:
    """The messages of prompt ``name`` filled with ``arguments``, for ``agent.prompt()``.

    ``ValueError`` (a sentence) for an unknown prompt, a missing required argument, an
    argument the prompt does not take, or a server that fails or refuses.
    """
    prompt = find_prompt(agent, name)
    given = dict(arguments or {})
    taken = {argument.name for argument in prompt.arguments}
    unknown = sorted(set(given) - taken)
    if unknown:
        takes = ", ".join(sorted(taken)) or "no arguments"
        raise ValueError(f"prompt {prompt.qualified} takes {takes}, not {', '.join(unknown)}")
    missing = [a.name for a in prompt.arguments if a.required and a.name not in given]
    if missing:
        raise ValueError(f"prompt {prompt.qualified} needs {', '.join(missing)}")
    for key, value in given.items():
        if not isinstance(value, str):
            raise ValueError(f"prompt argument {key} is a string, not {type(value).__name__}")
    connection = connections_of(agent)[prompt.server]
    try:
        result = await runtime.call(connection.get_prompt(prompt.name, given))
    except ServerFailure as failure:
        raise ValueError(str(failure)) from None
    except Exception as error:  # the server's refusal (an MCP error), said as a sentence
        raise ValueError(f"prompt {prompt.qualified}: the server answered: {error}") from None
    messages = [
        _message(prompt.server, message, connection.settings) for message in result.messages
    ]
    if not messages:
        raise ValueError(f"prompt {prompt.qualified} has no messages")
    return messages


def _message(
    server: str, message: types.PromptMessage, settings: Any
) -> UserMessage | AssistantMessage:
    mapped = to_tool_result(types.CallToolResult(content=[message.content]), server, "", settings)
    if message.role == "user":
        return UserMessage(content=tuple(mapped.content))
    text = [block for block in mapped.content if isinstance(block, TextContent)]
    if len(text) != len(mapped.content):
        text.append(TextContent(text="[an image of the prompt is left out]"))
    return AssistantMessage(content=tuple(text), provider="mcp", model=server)
