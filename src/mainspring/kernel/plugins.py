"""Plugin loading: built-ins, installed entry points, in-process plugins; one manager each.

Load order is deterministic: the built-ins (from the kernel's own list), then installed
plugins of the ``mainspring`` entry-point group sorted by name, then ``plugins=`` in the
order given. Allow, deny and autoload controls are applied to entry points *before* any
plugin module is imported. Any failure is a :class:`~mainspring.PluginLoadError`: an agent
whose security policy pack failed to load must not start.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal, final

import pluggy

from .. import hookspecs

if TYPE_CHECKING:
    from importlib_metadata import EntryPoint
from ..errors import PluginLoadError

__all__ = [
    "BUILTIN_PLUGINS",
    "ENTRY_POINT_GROUP",
    "PluginInfo",
    "PluginSet",
    "load_plugins",
    "plugin_controls",
]

ENTRY_POINT_GROUP = "mainspring"

BUILTIN_PLUGINS: tuple[tuple[str, str, bool], ...] = (
    # (name, module, essential)
    ("convert_to_llm", "mainspring.plugins.convert", True),
    ("token_estimate", "mainspring.plugins.tokens", True),
    ("fallback_compaction", "mainspring.plugins.compaction", True),
    ("providers", "mainspring.plugins.providers", False),
    ("max_turns", "mainspring.plugins.max_turns", False),
    ("session_writer", "mainspring.plugins.session_writer", False),
    ("event_log", "mainspring.plugins.event_log", False),
)
"""The built-in plugins, registered first; essential ones cannot be disabled."""

Source = Literal["builtin", "entrypoint", "inprocess"]


@final
@dataclass(slots=True)
class PluginInfo:
    """What ``mainspring plugins`` shows about one registered plugin."""

    name: str
    source: Source
    plugin: Any
    distribution: str | None = None
    version: str | None = None
    hooks: tuple[str, ...] = ()
    tools: list[str] = field(default_factory=list)
    essential: bool = False


@final
@dataclass(slots=True)
class PluginSet:
    """A plugin manager and what was loaded into it, in load order."""

    pm: pluggy.PluginManager
    infos: list[PluginInfo]

    @property
    def fallbacks(self) -> frozenset[str]:
        """The essential built-ins, whose implementations run after every plugin's."""
        return frozenset(info.name for info in self.infos if info.essential)

    def info(self, name: str) -> PluginInfo | None:
        """The plugin registered as ``name``."""
        return next((info for info in self.infos if info.name == name), None)


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _names(value: str | None) -> frozenset[str] | None:
    if value is None:
        return None
    return frozenset(_normalise(part.strip()) for part in value.split(",") if part.strip())


@final
@dataclass(frozen=True, slots=True)
class PluginControls:
    """The effective allow/deny/autoload controls."""

    autoload: bool
    allow: frozenset[str] | None
    deny: frozenset[str]


def plugin_controls(
    autoload: bool, disable: Iterable[str], environ: Mapping[str, str] | None = None
) -> PluginControls:
    """Combine constructor arguments with ``MAINSPRING_*`` environment variables.

    ``MAINSPRING_DISABLE_PLUGIN_AUTOLOAD`` (any value but empty/``0``) turns autoload off;
    ``MAINSPRING_PLUGINS="a,b"`` allows only those installed plugins (set but empty: none);
    ``MAINSPRING_DISABLE_PLUGINS`` adds names to ``disable``.
    """
    env = os.environ if environ is None else environ
    flag = env.get("MAINSPRING_DISABLE_PLUGIN_AUTOLOAD", "").strip().lower()
    autoload = autoload and flag in ("", "0", "false", "no")
    deny = {_normalise(name) for name in disable}
    deny |= _names(env.get("MAINSPRING_DISABLE_PLUGINS")) or frozenset()
    return PluginControls(autoload, _names(env.get("MAINSPRING_PLUGINS")), frozenset(deny))


def _new_manager() -> pluggy.PluginManager:
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    return pm


def _hooks_of(pm: pluggy.PluginManager, plugin: Any) -> tuple[str, ...]:
    return tuple(sorted(caller.name for caller in pm.get_hookcallers(plugin) or ()))


def _validate(pm: pluggy.PluginManager, plugin: Any, name: str) -> None:
    for caller in pm.get_hookcallers(plugin) or ():
        for impl in caller.get_hookimpls():
            if impl.plugin is not plugin:
                continue
            if caller.name in hookspecs.ASYNC_HOOKS and (impl.hookwrapper or impl.wrapper):
                raise PluginLoadError(
                    f"plugin {name!r}: {caller.name} is a run-time hook; hook wrappers are not "
                    "supported on it, implement it as an ordinary hook",
                    plugin=name,
                )
            function = impl.function
            if caller.name in hookspecs.SYNC_HOOKS and (
                inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function)
            ):
                raise PluginLoadError(
                    f"plugin {name!r}: {caller.name} is synchronous, but its implementation "
                    "is async; make it a plain def",
                    plugin=name,
                )
    for caller in pm.hook.__dict__.values():
        if not isinstance(caller, pluggy.HookCaller) or caller.spec is not None:
            continue
        for impl in caller.get_hookimpls():
            if impl.plugin is plugin:
                raise PluginLoadError(
                    f"plugin {name!r} implements unknown hook {caller.name!r}; known hooks: "
                    f"{', '.join(sorted(hookspecs.ASYNC_HOOKS | hookspecs.SYNC_HOOKS))}",
                    plugin=name,
                )


def _register(
    pm: pluggy.PluginManager, plugin: Any, name: str, *, hint: str, **details: Any
) -> tuple[str, ...]:
    origin = _origin(details)
    try:
        pm.register(plugin, name=name)
    except pluggy.PluginValidationError as error:
        raise PluginLoadError(
            f"plugin {name!r}{origin} is invalid: {error}. {hint}", plugin=name, **details
        ) from error
    except ValueError as error:
        raise PluginLoadError(
            f"plugin {name!r}{origin} could not be registered: {error}. {hint}",
            plugin=name,
            **details,
        ) from error
    try:
        _validate(pm, plugin, name)
    except PluginLoadError as error:
        pm.unregister(plugin)
        text = str(error).replace(f"plugin {name!r}", f"plugin {name!r}{origin}", 1)
        raise PluginLoadError(f"{text}. {hint}", plugin=name, **details) from None
    return _hooks_of(pm, plugin)


def _origin(details: dict[str, Any]) -> str:
    distribution = details.get("distribution")
    if not distribution:
        return ""
    version = details.get("version")
    return f" (distribution {distribution} {version})" if version else f" ({distribution})"


def _inprocess_name(plugin: Any, taken: set[str]) -> str:
    explicit = getattr(plugin, "name", None)
    if isinstance(explicit, str) and explicit:
        base = explicit
    elif isinstance(plugin, ModuleType) or inspect.isclass(plugin):
        base = plugin.__name__
    else:
        base = type(plugin).__name__
    name, suffix = base, 2
    while name in taken:
        name, suffix = f"{base}-{suffix}", suffix + 1
    return name


def _installed(controls: PluginControls) -> list[EntryPoint]:
    if not controls.autoload:
        return []
    from importlib_metadata import entry_points  # only when installed plugins are wanted

    found = {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    selected = []
    for name in sorted(found):
        key = _normalise(name)
        if key in controls.deny:
            continue
        if controls.allow is not None and key not in controls.allow:
            continue
        selected.append(found[name])
    return selected


def _load_entry_point(ep: EntryPoint) -> tuple[Any, str | None, str | None]:
    dist = ep.dist
    dist_name = dist.metadata["Name"] if dist is not None else None
    version = dist.version if dist is not None else None
    try:
        plugin = ep.load()
    except Exception as error:
        raise PluginLoadError(
            f"installed plugin {ep.name!r} (entry point {ep.value!r} of distribution "
            f"{dist_name or '?'} {version or ''}) failed to load: "
            f"{type(error).__name__}: {error}. {disable_hint(ep.name)}",
            plugin=ep.name,
            distribution=dist_name,
            version=version,
        ) from error
    return plugin, dist_name, version


def disable_hint(name: str) -> str:
    """How to start without the installed plugin ``name``."""
    return (
        f"To start without it, pass disable_plugins=[{name!r}] or set "
        f"MAINSPRING_DISABLE_PLUGINS={name} (or uninstall it)."
    )


def load_plugins(
    *,
    plugins: Sequence[Any] = (),
    autoload: bool = True,
    disable_plugins: Iterable[str] = (),
    environ: Mapping[str, str] | None = None,
) -> PluginSet:
    """Build one agent's plugin manager: built-ins, installed, then ``plugins``."""
    controls = plugin_controls(autoload, disable_plugins, environ)
    pm = _new_manager()
    infos: list[PluginInfo] = []
    for name, module_name, essential in BUILTIN_PLUGINS:
        if not essential and _normalise(name) in controls.deny:
            continue
        module = importlib.import_module(module_name)
        hooks = _register(pm, module, name, hint="(a built-in plugin)")
        infos.append(
            PluginInfo(name, "builtin", module, "mainspring", None, hooks, essential=essential)
        )
    for ep in _installed(controls):
        plugin, dist_name, version = _load_entry_point(ep)
        hooks = _register(
            pm,
            plugin,
            ep.name,
            hint=disable_hint(ep.name),
            distribution=dist_name,
            version=version,
        )
        infos.append(PluginInfo(ep.name, "entrypoint", plugin, dist_name, version, hooks))
    taken = {info.name for info in infos}
    for plugin in plugins:
        name = _inprocess_name(plugin, taken)
        taken.add(name)
        hooks = _register(pm, plugin, name, hint="(passed in plugins=)")
        infos.append(PluginInfo(name, "inprocess", plugin, None, None, hooks))
    return PluginSet(pm, infos)
