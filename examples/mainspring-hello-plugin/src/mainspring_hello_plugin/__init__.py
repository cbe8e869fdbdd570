"""mainspring-hello-plugin: the smallest useful mainspring plugin.

It gives every agent one tool, ``greet(name)``, and one permission gate: a
``before_tool_call`` hook that refuses to greet one name (``"Voldemort"`` unless
configured otherwise). The model sees the refusal as an error tool result with the
reason, and the agent's event stream records it as a ``tool_decision`` of ``block``.

Configure the refused name through the agent's settings::

    Settings(plugin_options={"mainspring-hello-plugin": {"refuse": "Moriarty"}})

A plugin is just a module with ``@hookimpl`` functions named after hooks; each takes
only the hook parameters it needs (see ``mainspring.contract.hookspecs`` for every hook).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mainspring
from mainspring import Block, hookimpl

__all__ = [
    "DEFAULT_REFUSED_NAME",
    "PLUGIN_NAME",
    "before_tool_call",
    "greet",
    "refused_name",
    "register_tools",
]

CAPABILITIES = ("tools", "gate")
"""What this plugin does (its manifest; see ``docs/capabilities.md``)."""

PLUGIN_NAME = "mainspring-hello-plugin"
"""The entry point (and distribution) name; also the key of this plugin's options."""

DEFAULT_REFUSED_NAME = "Voldemort"
"""The name the gate refuses when no ``refuse`` option is configured."""


@mainspring.tool(effects="none")
def greet(name: str) -> str:
    """Greet someone by name.

    Args:
        name: The name of the person to greet.
    """
    return f"Hello, {name}!"


def refused_name(agent: mainspring.Agent) -> str:
    """The name this agent's gate refuses (the ``refuse`` plugin option)."""
    options = agent.settings.plugin_options.get(PLUGIN_NAME, {})
    return str(options.get("refuse", DEFAULT_REFUSED_NAME))


@hookimpl
def register_tools() -> Sequence[mainspring.Tool]:
    """Contribute the ``greet`` tool (called once per agent)."""
    return [greet]


@hookimpl
def before_tool_call(tool: mainspring.Tool, args: Any, agent: mainspring.Agent) -> Block | None:
    """Refuse to greet the configured name; allow every other call.

    ``args`` are the validated arguments that will run, as a read-only
    :class:`~mainspring.ToolArgs` (the same for every tool): ``args.name`` is a ``str``.
    """
    if tool is not greet:
        return None  # not our tool: no opinion
    refused = refused_name(agent)
    if args.name.strip().casefold() == refused.strip().casefold():
        return Block(f"{PLUGIN_NAME} will not greet {refused}. Greet someone else.")
    return None
