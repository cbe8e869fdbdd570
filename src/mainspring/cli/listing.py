"""``mainspring plugins`` and ``mainspring tools`` diagnose instead of refusing.

A broken plugin or two tools with one name stop an agent from starting, as they must.
The listing commands are how a person finds out why: they build the agent again without
each plugin that fails (one at a time, each failure kept), list what loads, then name
every broken plugin with its error (the traceback with ``--log-level DEBUG``).
``mainspring tools show NAME`` prints exactly what the model is told about a tool.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections.abc import Callable
from typing import Any

from ..errors import PluginLoadError
from ..kernel.agent import Agent
from ..kernel.plugins import plugin_name

__all__ = ["build_for_listing", "report_broken", "show_tool"]

_MAX_BROKEN = 20
"""How many broken plugins a listing works around before it gives up."""


def build_for_listing(
    args: argparse.Namespace, build: Callable[[argparse.Namespace], Agent]
) -> tuple[Agent, list[PluginLoadError]]:
    """The agent without the plugins that fail to load, and each failure, in order."""
    broken: list[PluginLoadError] = []
    while True:
        try:
            return build(args), broken
        except PluginLoadError as error:
            if error.plugin is None or len(broken) >= _MAX_BROKEN:
                raise
            passed = _passed_as(args.plugin, error.plugin)
            if passed is not None:
                args.plugin = [name for name in args.plugin if name != passed]
            elif error.plugin in args.no_plugin:
                raise
            else:
                args.no_plugin = [*args.no_plugin, error.plugin]
            broken.append(error)


def _passed_as(modules: list[str], plugin: str) -> str | None:
    """The ``--plugin`` argument that gave the plugin named ``plugin``, if one did."""
    for spec in modules:
        module_name = spec.partition(":")[0]
        module = sys.modules.get(module_name)
        target = module
        if module is not None and ":" in spec:
            target = getattr(module, spec.partition(":")[2], None)
        if spec == plugin or (target is not None and plugin_name(target) == plugin):
            return spec
    return None


def report_broken(broken: list[PluginLoadError], debug: bool, as_json: bool) -> Any:
    """Print each broken plugin on stderr (JSON rows when ``as_json``); the rows."""
    rows = [{"plugin": error.plugin, "error": str(error)} for error in broken]
    if as_json:
        return rows
    for error in broken:
        print(f"broken: {error.plugin}: {error}", file=sys.stderr)
        if debug:
            traceback.print_exception(error, file=sys.stderr)
    return rows


def show_tool(agent: Agent, name: str, as_json: bool) -> int:
    """Print ``name``'s description and JSON schema, as the model receives them."""
    tools = {tool.name: tool for tool in agent.state.tools}
    tool = tools.get(name)
    if tool is None:
        known = ", ".join(sorted(tools)) or "none"
        print(f"mainspring: no tool named {name!r}; tools: {known}", file=sys.stderr)
        return 2
    spec = tool.spec
    if as_json:
        print(json.dumps(spec.model_dump(), indent=2))
        return 0
    print(f"{spec.name}  [{agent.tool_owners.get(name)}]")
    print()
    print(spec.description or "(no description: the model sees only the name)")
    print()
    print(json.dumps(spec.parameters, indent=2))
    return 0
