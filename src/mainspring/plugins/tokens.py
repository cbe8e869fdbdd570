"""Built-in (essential): the token estimate behind ``count_tokens``.

The estimate itself lives in the kernel (:mod:`mainspring.estimate`), which keeps
it current as messages arrive; this plugin answers ``count_tokens`` with it, after every
other implementation.
"""

from __future__ import annotations

from typing import Any

from ..contract.markers import hookimpl
from ..estimate import IMAGE_TOKENS, RunningEstimate, estimate_tokens, tail_tokens

__all__ = ["IMAGE_TOKENS", "RunningEstimate", "count_tokens", "estimate_tokens", "tail_tokens"]

CAPABILITIES = ("context",)
"""What this plugin does (its manifest; see ``docs/capabilities.md``)."""


@hookimpl(trylast=True)
def count_tokens(messages: tuple[Any, ...]) -> int:
    """The built-in estimate; answers when no other plugin does."""
    return estimate_tokens(messages)
