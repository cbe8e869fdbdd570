"""What is known of one registered plugin: :class:`PluginInfo`, an immutable record."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, final

__all__ = ["PluginInfo", "Source"]

Source = Literal["builtin", "entrypoint", "inprocess"]
"""Where a plugin came from: mainspring's own list, an installed entry point, or code."""


@final
@dataclass(frozen=True, slots=True)
class PluginInfo:
    """What ``mainspring plugins`` shows about one registered plugin (immutable)."""

    name: str
    source: Source
    plugin: Any
    distribution: str | None = None
    version: str | None = None
    hooks: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    essential: bool = False
    declared: frozenset[str] | None = None
    """The capabilities its manifest declares; ``None``: undeclared."""
    granted: frozenset[str] | None = None
    """What it may use (the declaration, narrowed by the config file); ``None``: all."""
