"""Putting an agent together: its providers and its tools, from its plugins.

Everything here runs when an :class:`~mainspring.Agent` is built or reconfigured, never
during a run. Configuration errors raise here, before any run: a plugin whose
``register_tools``/``register_providers`` fails (:class:`~mainspring.PluginLoadError`),
two tools with one name. (The checks of an agent's arguments, which a run's
``prepare_next_turn`` also needs, are :mod:`mainspring.kernel.arguments`.)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..contract.errors import HookError, PluginLoadError
from ..hooks.facade import Hooks
from ..loading.loader import PluginSet
from ..providers.base import Provider
from ..tools import Tool

__all__ = ["ToolSet", "collect_providers", "collect_tools", "load_error"]

GIVEN = "tools="
"""The owner name of the tools an embedder passes as ``tools=``."""


def load_error(plugin_set: PluginSet, error: HookError) -> PluginLoadError:
    """``error`` from a registration hook as the load error of the plugin that raised it."""
    info = plugin_set.info(error.plugin)
    if info is None or info.source != "entrypoint":
        return PluginLoadError(str(error), plugin=error.plugin)
    return PluginLoadError(
        f"{error} (installed plugin {info.name!r}, distribution {info.distribution} "
        f"{info.version}). {plugin_set.fix_hint(info.name)}",
        plugin=info.name,
        distribution=info.distribution,
        version=info.version,
    )


def collect_providers(
    hooks: Hooks, agent: Any, plugin_set: PluginSet, override: Provider | None
) -> dict[str, Provider]:
    """Every registered provider by name (later ones win), ``override`` last."""
    try:
        registered = hooks.register_providers(agent)
    except HookError as error:
        raise load_error(plugin_set, error) from error
    providers = {provider.name: provider for _, provider in registered}
    if override is not None:
        providers[override.name] = override
    return providers


class ToolSet:
    """The agent's tools by name, and where each came from (a plugin, or ``"tools="``)."""

    __slots__ = ("owners", "tools")

    def __init__(self, owned: Iterable[tuple[str, Any]]) -> None:
        self.tools: dict[str, Tool] = {}
        self.owners: dict[str, str] = {}
        for owner, tool in owned:
            if not isinstance(tool, Tool):
                raise TypeError(f"tools= takes Tool objects, got {tool!r}")
            if tool.name in self.tools:
                first = self.owners[tool.name]
                plugin = first if owner == GIVEN else owner
                # a tool may say how to rename it (an MCP server's: its tool_prefix)
                hints = (getattr(t, "rename_hint", None) for t in (tool, self.tools[tool.name]))
                fix = next((hint for hint in hints if isinstance(hint, str)), None) or (
                    f"disable a plugin (disable_plugins=[{plugin!r}]; on the "
                    f"command line --no-plugin {plugin}) or rename a tool"
                )
                raise PluginLoadError(
                    f'two tools are named "{tool.name}": one from {first!r} and one from '
                    f"{owner!r}; {fix}",
                    plugin=owner,
                )
            self.owners[tool.name] = owner
            self.tools[tool.name] = tool

    def _owner_of(self, tool: Any) -> str:
        name = getattr(tool, "name", None)
        known = self.tools.get(name) if isinstance(name, str) else None
        if known is tool and isinstance(name, str):
            return self.owners[name]
        claimed = getattr(tool, "owner", None)
        return claimed if isinstance(claimed, str) and claimed in self.owners.values() else GIVEN

    def replaced(self, tools: Iterable[Any]) -> ToolSet:
        """Exactly ``tools``: a tool already here keeps its owner, any other is ``tools=``
        unless it names (``tool.owner``) a plugin that already owns tools here (a plugin
        refreshing the tools it gives: MCP servers whose tool list changed).

        Two tools with one name raise ``ValueError``, anything but a ``Tool`` ``TypeError``.
        """
        owned = [(self._owner_of(tool), tool) for tool in tools]
        try:
            return ToolSet(owned)
        except PluginLoadError as error:
            raise ValueError(str(error)) from None


def collect_tools(hooks: Hooks, agent: Any, plugin_set: PluginSet, given: Iterable[Any]) -> ToolSet:
    """Every plugin's tools and the ``given`` ones; recorded in each plugin's info."""
    try:
        contributed = hooks.register_tools(agent)
    except HookError as error:
        raise load_error(plugin_set, error) from error
    tool_set = ToolSet([*contributed, *((GIVEN, tool) for tool in given)])
    by_owner: dict[str, list[str]] = {}
    for owner, tool in contributed:
        by_owner.setdefault(owner, []).append(tool.name)
    for owner, names in by_owner.items():
        plugin_set.with_tools(owner, tuple(names))
    return tool_set
