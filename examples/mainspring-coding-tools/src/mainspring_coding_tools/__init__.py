"""mainspring-coding-tools: file and shell tools confined to a workspace directory.

Installed, this plugin gives every agent six tools: ``read``, ``write``, ``edit``, ``ls``,
``grep`` and ``bash`` (see :mod:`mainspring_coding_tools.tools`). Every path argument is
resolved inside one workspace root and refused if it leaves it (``..``, an absolute path
elsewhere, a symlink out, ``~``; see :mod:`mainspring_coding_tools.workspace`), and files
are opened through directory descriptors with ``O_NOFOLLOW``, so a swapped symlink cannot
redirect them; files with several hard links are refused. ``grep`` matches in linear time
(RE2, :mod:`mainspring_coding_tools.patterns`) and every file tool has a deadline.
``bash`` runs with the root as its working directory, a scrubbed environment
(:mod:`mainspring_coding_tools.environment`), a timeout and an output cap, under a
supervisor that ends every process the command started
(:mod:`mainspring_coding_tools.supervisor`).

The root is, in order: ``plugin_options["mainspring-coding-tools"]["workspace"]`` of the
agent's settings, ``$MAINSPRING_WORKSPACE``, the current directory when the agent is
built. Other options (limits, the shell) are in
:class:`~mainspring_coding_tools.options.CodingToolsOptions`::

    Settings(plugin_options={"mainspring-coding-tools": {
        "workspace": "/srv/checkout", "bash_timeout_s": 120,
    }})

A workspace that is not an existing directory, or an unknown or invalid option, makes
``register_tools`` raise, so the agent does not start (``PluginLoadError``).

Without the plugin machinery: ``Agent(tools=build_tools("/srv/checkout"), autoload=False)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import mainspring
from mainspring import hookimpl

from .options import WORKSPACE_ENV, CodingToolsOptions, parse_options
from .tools import TOOL_NAMES, build_tools
from .workspace import ToolFailure, Workspace

__all__ = [
    "PLUGIN_NAME",
    "TOOL_NAMES",
    "WORKSPACE_ENV",
    "CodingToolsOptions",
    "ToolFailure",
    "Workspace",
    "build_tools",
    "name",
    "options_for",
    "parse_options",
    "register_tools",
]

CAPABILITIES = ("tools",)
"""What this plugin does (its manifest; see ``docs/capabilities.md``)."""

PLUGIN_NAME = "mainspring-coding-tools"
"""The distribution and entry point name; also the key of this plugin's options."""

name = PLUGIN_NAME
"""The plugin's name when it is passed in-process (``Agent(plugins=[module])``): the kernel
names an in-process plugin by its ``name`` attribute, so errors, ``tool_owners`` and
``mainspring plugins`` say ``mainspring-coding-tools`` whether it was installed or not."""


def options_for(agent: mainspring.Agent) -> CodingToolsOptions:
    """This plugin's validated options for ``agent`` (``ValueError`` if invalid)."""
    return parse_options(agent.settings.plugin_options.get(PLUGIN_NAME, {}))


@hookimpl
def register_tools(agent: mainspring.Agent) -> Sequence[mainspring.Tool]:
    """The six tools, rooted in this agent's workspace (resolved now, once)."""
    options = options_for(agent)
    return build_tools(Workspace(options.workspace_root()), options)
