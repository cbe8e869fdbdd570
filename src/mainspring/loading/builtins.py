"""The built-in plugins: mainspring's own plugins, registered before any other.

They live in :mod:`mainspring.plugins` and are imported by name when an agent loads its
plugins (the loader does not depend on them). An *essential* built-in implements a part
of the run no agent may go without (turning transcripts into provider messages,
estimating tokens, the fallback compaction): it cannot be disabled or unregistered.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["BUILTIN_PLUGINS", "BuiltinPlugin"]


class BuiltinPlugin(NamedTuple):
    """One built-in plugin: its name, the module that is the plugin, whether essential."""

    name: str
    module: str
    essential: bool


BUILTIN_PLUGINS: tuple[BuiltinPlugin, ...] = (
    BuiltinPlugin("convert_to_llm", "mainspring.plugins.convert", essential=True),
    BuiltinPlugin("token_estimate", "mainspring.plugins.tokens", essential=True),
    BuiltinPlugin("fallback_compaction", "mainspring.plugins.compaction", essential=True),
    BuiltinPlugin("providers", "mainspring.plugins.providers", essential=False),
    BuiltinPlugin("max_turns", "mainspring.plugins.max_turns", essential=False),
    BuiltinPlugin("session_writer", "mainspring.plugins.session_writer", essential=False),
    BuiltinPlugin("event_log", "mainspring.plugins.event_log", essential=False),
    BuiltinPlugin("mcp", "mainspring.plugins.mcp", essential=False),
    BuiltinPlugin("otel", "mainspring.plugins.otel", essential=False),
)
"""The built-in plugins in load order."""
