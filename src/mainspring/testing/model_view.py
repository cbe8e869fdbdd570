"""What the model saw: a scripted provider's requests, read as a person would check them.

``FauxProvider.requests`` holds every :class:`~mainspring.ModelRequest` the kernel sent,
after every ``transform_context`` and ``convert_to_llm``. :func:`what_the_model_saw`
gives one of them as a :class:`ModelView`: the system prompt, the tools offered, the
messages, and the whole as plain text, one line per message, to assert on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["ModelView", "what_the_model_saw"]


@dataclass(frozen=True, slots=True)
class ModelView:
    """One model request as the model saw it."""

    system_prompt: str
    messages: tuple[Any, ...]
    """The LLM messages (user, assistant, tool_result), in order."""
    tools: tuple[str, ...]
    """The names of the tools offered with the request."""

    @property
    def lines(self) -> list[str]:
        """One line per message: ``user: TEXT``, ``assistant: TEXT``, ``assistant calls
        NAME {ARGUMENTS}`` per call, ``tool_result NAME: TEXT`` (``error`` when it is one);
        the system prompt first (``system: TEXT``) when there is one."""
        shown = [f"system: {self.system_prompt}"] if self.system_prompt else []
        for message in self.messages:
            role = getattr(message, "role", "?")
            text = getattr(message, "text", "")
            if role == "tool_result":
                error = " error" if message.is_error else ""
                shown.append(f"tool_result {message.tool_name}{error}: {text}")
                continue
            if text or role != "assistant":
                shown.append(f"{role}: {text}")
            for call in getattr(message, "tool_calls", ()) if role == "assistant" else ():
                arguments = json.dumps(call.arguments, sort_keys=True, default=str)
                shown.append(f"assistant calls {call.name} {arguments}")
        return shown

    @property
    def text(self) -> str:
        """:attr:`lines` joined with newlines."""
        return "\n".join(self.lines)

    @property
    def tool_results(self) -> list[str]:
        """The text of every tool result the model saw, in order."""
        return [m.text for m in self.messages if getattr(m, "role", None) == "tool_result"]


def what_the_model_saw(provider: Any, request: int = -1) -> ModelView:
    """Request number ``request`` (default: the last) that ``provider`` received, as a
    :class:`ModelView`. ``provider`` is anything with a ``requests`` list (a
    :class:`~mainspring.testing.FauxProvider`). Raises ``AssertionError`` saying how many
    requests there were when there is no such one."""
    requests = list(getattr(provider, "requests", ()))
    try:
        seen = requests[request]
    except IndexError:
        raise AssertionError(
            f"the model was sent {len(requests)} request(s); there is no request {request}"
        ) from None
    return ModelView(
        seen.system_prompt, tuple(seen.messages), tuple(tool.name for tool in seen.tools)
    )
