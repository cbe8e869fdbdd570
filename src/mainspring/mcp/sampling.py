"""A server's sampling requests, answered by the agent's own model once the person agrees.

Off by default: a server with ``sampling_budget = N`` (N > 0) is told the client samples,
and each agent may answer N of its requests. A request (``sampling/createMessage``, or an
``InputRequiredResult`` of the 2026-07-28 protocol) is routed to the call that caused it
as an elicitation is (:mod:`~mainspring.mcp.elicitation`), then:

1. the budget: past it, refused;
2. the gate: the call asks the person (``ctx.ask``, through the approvers, see
   :mod:`mainspring.questions`), showing the server's system prompt and messages; only an
   accepted answer goes on (no approver, a refusal, a timeout or an abort refuse);
3. the agent's model (its provider, the model the agent's next run uses), sent the
   server's text messages and system prompt only (never the agent's transcript, tools or
   system prompt), its reply cut at ``maxTokens`` (about four characters a token).

The reply is the model's text; anything but text in the server's messages (images, tool
use) refuses the request. A failure is an error the server gets, never a hang.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import mcp_types as types

from ..logs import get_logger
from ..messages import AssistantMessage, TextContent, UserMessage
from ..providers.base import ModelRequest, StreamDone, TextDelta
from ..questions import Question
from ..tools import ToolContext
from .text import escape_control

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = ["Sampler"]

_log = get_logger(__name__)

_CHARS_PER_TOKEN = 4
_SHOWN_CHARS = 4_000
_CONSENT = {"type": "object", "properties": {}}


class Sampler:
    """One agent's sampling for one server: its budget, and its model (see the module)."""

    __slots__ = ("agent_ref", "budget", "server", "used")

    def __init__(self, server: str, budget: int, agent_ref: Any) -> None:
        self.server = server
        self.budget = budget
        self.used = 0
        self.agent_ref = agent_ref

    async def sample(
        self, params: types.CreateMessageRequestParams, ctx: ToolContext
    ) -> types.CreateMessageResult | types.ErrorData:
        """Answer ``params`` for the call ``ctx`` (on the agent's loop)."""
        agent: Agent | None = self.agent_ref()
        if agent is None:
            return _refused("the agent is gone")
        if self.used >= self.budget:
            return _refused(f"the sampling budget of {self.budget} request(s) is spent")
        messages = _messages(params)
        if isinstance(messages, str):
            return _refused(messages)
        ask = getattr(ctx, "ask", None)
        if ask is None:
            return _refused("nobody can be asked to allow it")
        answer = await ask(_question(self.server, params))
        if not answer.accepted:
            return _refused(f"not allowed: {answer.reason}")
        self.used += 1
        model = agent.state.model
        request = ModelRequest(
            model=model,
            system_prompt=params.system_prompt or "",
            messages=tuple(messages),
            session_id=None,
        )
        limit = max(1, params.max_tokens) * _CHARS_PER_TOKEN
        text: list[str] = []
        size = 0
        try:
            async for event in agent.provider.stream(request, ctx.signal):
                if isinstance(event, TextDelta):
                    text.append(event.text)
                    size += len(event.text)
                    if size >= limit:
                        break
                elif isinstance(event, StreamDone):
                    break
        except Exception as error:  # a provider's failure: the server is told, nothing hangs
            return _refused(f"the model failed: {type(error).__name__}: {error}")
        _log.info("mcp_sampled", server=self.server, used=self.used, budget=self.budget)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(text="".join(text)[:limit]),
            model=f"{model.provider}:{model.id}",
            stop_reason="maxTokens" if size >= limit else "endTurn",
        )


def _refused(why: str) -> types.ErrorData:
    return types.ErrorData(code=types.INVALID_REQUEST, message=f"sampling refused: {why}")


def _messages(params: types.CreateMessageRequestParams) -> list[Any] | str:
    """The server's messages as the agent's (text only), or why they cannot be sent."""
    found: list[Any] = []
    for message in params.messages:
        blocks = message.content if isinstance(message.content, list) else [message.content]
        if not all(isinstance(block, types.TextContent) for block in blocks):
            return "only text messages are sampled"
        text = "".join(block.text for block in blocks if isinstance(block, types.TextContent))
        if message.role == "user":
            found.append(UserMessage(content=text))
        else:
            reply = (TextContent(text=text),)
            found.append(AssistantMessage(content=reply, provider="mcp", model="-"))
    if not found or not isinstance(found[-1], UserMessage):
        return "the messages must end with the user's"
    return found


def _question(server: str, params: types.CreateMessageRequestParams) -> Question:
    shown = {
        "system_prompt": params.system_prompt,
        "messages": [m.model_dump(mode="json", exclude_none=True) for m in params.messages],
        "max_tokens": params.max_tokens,
    }
    described = escape_control(json.dumps(shown, ensure_ascii=False))[:_SHOWN_CHARS]
    message = f"may the agent's model answer this request of the server? {described}"
    return Question(f'MCP server "{server}"', message, "form", schema=_CONSENT)
