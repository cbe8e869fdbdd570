"""``/prompt`` in ``mainspring chat``: list the MCP servers' prompts, or send one.

``/prompt`` lists them (``SERVER:NAME``, the arguments, required ones marked ``*``, and
the description). ``/prompt NAME [ARG=VALUE ...]`` fetches the prompt (arguments split
like a shell would, so ``topic="two words"``) and returns its messages for the chat to
send as the next prompt (:func:`mainspring.mcp.prompts.get_prompt`). A prompt that
cannot be fetched is said on stderr (``mainspring: error: ...``) and nothing is sent.
"""

from __future__ import annotations

import shlex
from typing import Any, TextIO

from ..agent import Agent
from .approve import visible
from .errors import usage_error

__all__ = ["is_prompt_command", "prompt_messages"]


def is_prompt_command(text: str) -> bool:
    """Whether ``text`` is a ``/prompt`` command."""
    return text == "/prompt" or text.startswith("/prompt ")


async def prompt_messages(agent: Agent, text: str, err: TextIO) -> list[Any] | None:
    """The messages ``/prompt ...`` sends, or ``None`` when there is nothing to send (the
    listing was shown, or the prompt could not be fetched: said on ``err``)."""
    try:
        from ..mcp.prompts import get_prompt, prompts
    except ImportError:
        print("no MCP prompts: the mcp extra is not installed", file=err, flush=True)
        return None
    try:
        words = shlex.split(text)[1:]
    except ValueError as error:
        usage_error(ValueError(f"/prompt: {error}"), err)
        return None
    if not words:
        _list(prompts(agent), err)
        return None
    name, arguments = words[0], {}
    for word in words[1:]:
        key, sep, value = word.partition("=")
        if not sep or not key:
            usage_error(ValueError(f"/prompt takes ARG=VALUE after the name, got {word!r}"), err)
            return None
        arguments[key] = value
    try:
        messages = await get_prompt(agent, name, arguments)
    except ValueError as error:
        usage_error(error, err)
        return None
    count = len(messages)
    print(f"» prompt {name}: {count} message{'' if count == 1 else 's'}", file=err, flush=True)
    return list(messages)


def _list(found: list[Any], err: TextIO) -> None:
    if not found:
        print("no MCP prompts (no server offers one)", file=err, flush=True)
        return
    for prompt in found:
        arguments = " ".join(
            f"{argument.name}{'*' if argument.required else ''}=…" for argument in prompt.arguments
        )
        line = visible(f"  {prompt.qualified} {arguments}".rstrip())
        if prompt.description:
            line += f"  — {visible(prompt.description)}"
        print(line, file=err)
    print("/prompt NAME ARG=VALUE... sends one (* required)", file=err, flush=True)
