"""``mainspring plugins`` and ``mainspring tools`` diagnose instead of refusing.

A broken plugin or two tools with one name stop an agent from starting, as they must.
The listing commands are how a person finds out why: they build the agent again without
each plugin that fails (one at a time, each failure kept), list what loads, then name
every broken plugin with its error (the traceback with ``--log-level DEBUG``) and, for an
installed one, the capabilities its distribution declares (read without importing it).
``mainspring plugins`` shows each plugin's declared and granted capabilities;
``mainspring tools show NAME`` prints exactly what the model is told about a tool.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..agent import Agent
from ..contract.errors import PluginLoadError
from ..loading import OPTION_DISABLE, installed_manifest, plugin_name
from .errors import usage_error

__all__ = [
    "build_for_listing",
    "disabled_reported_once",
    "list_plugins",
    "report_broken",
    "show_tool",
]

_MAX_BROKEN = 20
"""How many broken plugins a listing works around before it gives up."""


def build_for_listing(
    args: argparse.Namespace, build: Callable[[argparse.Namespace], Agent]
) -> tuple[Agent, list[PluginLoadError]]:
    """The agent without the plugins that fail to load, and each failure, in order."""
    broken: list[PluginLoadError] = []
    while True:
        try:
            with _unreported(error.plugin for error in broken):
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


class _SetAside(logging.Filter):
    """Drops the loader's ``plugin_disabled`` warning: for the plugins of ``names`` turned
    off by ``--no-plugin``, or for every plugin when ``names`` is ``None``."""

    def __init__(self, names: frozenset[str] | None) -> None:
        super().__init__()
        self.names = names

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != "plugin_disabled":
            return True
        if self.names is None:
            return False
        return not (
            getattr(record, "reason", None) == OPTION_DISABLE
            and getattr(record, "plugin", None) in self.names
        )


@contextlib.contextmanager
def _set_aside(names: frozenset[str] | None) -> Iterator[None]:
    aside = _SetAside(names)
    handlers = list(logging.getLogger("mainspring").handlers)
    for handler in handlers:
        handler.addFilter(aside)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(aside)


def _unreported(names: Iterable[str | None]) -> contextlib.AbstractContextManager[None]:
    """While the agent is rebuilt without the broken plugins, the loader's warning that
    they are turned off is not printed: the user did not ask for it, and ``broken:``
    already says why each is left out."""
    return _set_aside(frozenset(name for name in names if name))


def disabled_reported_once() -> contextlib.AbstractContextManager[None]:
    """While ``run`` or ``chat`` builds its agent, the loader's per-plugin
    ``plugin_disabled`` warnings are not printed: the command names every plugin turned
    off in one ``plugins off:`` line of its own."""
    return _set_aside(None)


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


def report_broken(broken: list[PluginLoadError], debug: bool) -> None:
    """Print each broken plugin on stderr: its error, the capabilities its distribution
    declares (if any), and with ``debug`` the traceback."""
    for error in broken:
        print(f"broken: {error.plugin}: {error}", file=sys.stderr)
        declared = installed_manifest(error.plugin) if error.plugin else None
        if declared is not None:
            print(f"    declared capabilities: {_names(declared)}", file=sys.stderr)
        if debug:
            traceback.print_exception(error, file=sys.stderr)


def _names(capabilities: Any) -> str:
    return ", ".join(sorted(capabilities)) or "none"


def _capabilities(declared: list[str] | None, granted: list[str] | None) -> str:
    shown = "undeclared" if declared is None else _names(declared)
    if granted is not None and granted != declared:
        shown += f"; granted: {_names(granted)}"
    return shown


def list_plugins(agent: Agent, broken: list[PluginLoadError], as_json: bool) -> None:
    """Print every loaded plugin (its origin, hooks, capabilities, tools), then the broken
    ones; with ``as_json`` one JSON list whose broken rows carry their ``error`` (``null``
    on the others)."""
    rows: list[dict[str, Any]] = [
        {
            "name": info.name,
            "source": info.source,
            "distribution": info.distribution,
            "version": info.version,
            "essential": info.essential,
            "hooks": list(info.hooks),
            "tools": list(info.tools),
            "capabilities": {
                "declared": sorted(info.declared) if info.declared is not None else None,
                "granted": sorted(info.granted) if info.granted is not None else None,
            },
            "error": None,
        }
        for info in agent.plugins.infos
    ]
    for error in broken:
        declared = installed_manifest(error.plugin) if error.plugin else None
        rows.append(
            {
                "name": error.plugin,
                "source": "entrypoint" if declared or error.distribution else None,
                "distribution": error.distribution,
                "version": error.version,
                "essential": False,
                "hooks": [],
                "tools": [],
                "capabilities": {
                    "declared": sorted(declared) if declared is not None else None,
                    "granted": None,
                },
                "error": str(error),
            }
        )
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    for row in rows:
        if row["error"] is not None:
            continue  # on stderr (report_broken)
        origin = row["source"]
        if row["distribution"] and row["source"] == "entrypoint":
            origin = f"{row['distribution']} {row['version'] or ''}".strip()
        print(f"{row['name']}  ({origin}{', essential' if row['essential'] else ''})")
        print(f"    hooks: {', '.join(row['hooks']) or '-'}")
        capabilities = row["capabilities"]
        print(
            f"    capabilities: {_capabilities(capabilities['declared'], capabilities['granted'])}"
        )
        if row["tools"]:
            print(f"    tools: {', '.join(row['tools'])}")


def show_tool(agent: Agent, name: str, as_json: bool) -> int:
    """Print ``name``'s description and JSON schema, as the model receives them, and its
    effects and argument roles (``--json``: the spec with ``effects`` and ``roles`` added)."""
    tools = {tool.name: tool for tool in agent.state.tools}
    tool = tools.get(name)
    if tool is None:
        known = ", ".join(sorted(tools)) or "none"
        return usage_error(f"no tool named {name!r}; tools: {known}")
    spec = tool.spec
    effects, roles = sorted(tool.effects), dict(tool.roles)
    if as_json:
        print(json.dumps({**spec.model_dump(), "effects": effects, "roles": roles}, indent=2))
        return 0
    print(f"{spec.name}  [{agent.tool_owners.get(name)}]")
    print(f"effects: {', '.join(effects)}")
    if roles:
        print("roles: " + ", ".join(f"{arg}={role}" for arg, role in roles.items()))
    print()
    print(spec.description or "(no description: the model sees only the name)")
    print()
    print(json.dumps(spec.parameters, indent=2))
    return 0
