"""A scripted provider for tests: :class:`FauxProvider` and its reply builders.

Use the module as a namespace: ``from mainspring.testing import faux``, then
``faux.FauxProvider([...])``, ``faux.text(...)``, ``faux.tool_call(...)``… The provider
lives in :mod:`mainspring.providers.faux` (it also serves the ``faux`` model provider),
the script format in :mod:`mainspring.providers.faux_script`.
"""

from ..providers.faux import FauxProvider
from ..providers.faux_script import (
    Cut,
    Failure,
    Reply,
    ReplyBlock,
    StaticStep,
    Step,
    StepFunction,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    cut,
    error,
    raises,
    reply,
    text,
    thinking,
    tool_call,
)

__all__ = [
    "Cut",
    "Failure",
    "FauxProvider",
    "Reply",
    "ReplyBlock",
    "StaticStep",
    "Step",
    "StepFunction",
    "TextBlock",
    "ThinkingBlock",
    "ToolCallBlock",
    "cut",
    "error",
    "raises",
    "reply",
    "text",
    "thinking",
    "tool_call",
]
