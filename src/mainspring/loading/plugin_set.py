"""One agent's plugins: the manager, what was loaded into it, and how it may change.

:class:`PluginSet` lists the registered plugins in load order. Its manager, a
:class:`KernelManager`, keeps that list true after loading: a plugin registered later is
validated and listed, one unregistered leaves the list, a required plugin cannot be
unregistered, and listeners hear of every change.

Validation follows pluggy's own rules where they exist: an implementation of a hook
this kernel does not know is refused unless it is marked ``optionalhook=True`` (a plugin
written for a newer mainspring then loads, its unknown hooks ignored), as
``PluginManager.check_pending`` decides.
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import Any, final

import pluggy

from ..contract import hookspecs
from ..contract.errors import PluginLoadError
from ..contract.markers import PROJECT
from ..contract.plugin_info import PluginInfo
from ..logs import get_logger
from .capabilities import ManifestPolicy, apply_manifest
from .controls import DisabledPlugin, normalise

__all__ = [
    "KernelManager",
    "PluginSet",
    "disable_hint",
    "hooks_of",
    "required_hint",
    "validate",
]


_log = get_logger("mainspring.plugins")


@final
@dataclass(slots=True)
class PluginSet:
    """A plugin manager and what was loaded into it, in load order.

    ``disabled`` lists the plugins the controls turned off, with the control that did;
    ``required`` holds the normalised names of the plugins the agent must not run without;
    ``policy`` the manifest rules every plugin is held to. When ``pm`` was built by
    :func:`load_plugins`, ``infos`` follows it: a plugin registered later
    (``pm.register``) is appended as ``inprocess`` once it passes the same validation and
    manifest checks, one unregistered (:meth:`unregister`, ``pm.unregister``,
    ``pm.set_blocked``) is removed, and every listener added with :meth:`on_change` is
    called after each such change.
    """

    pm: pluggy.PluginManager
    infos: list[PluginInfo]
    disabled: tuple[DisabledPlugin, ...] = ()
    required: frozenset[str] = frozenset()
    policy: ManifestPolicy = field(default_factory=ManifestPolicy)
    _listeners: list[Callable[[], None]] = field(default_factory=list, init=False, repr=False)
    _ceiling: frozenset[str] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.pm, KernelManager):
            self.pm.owner = self

    @property
    def fallbacks(self) -> frozenset[str]:
        """The essential built-ins, whose implementations run after every plugin's."""
        return frozenset(info.name for info in self.infos if info.essential)

    @property
    def builtins(self) -> frozenset[str]:
        """mainspring's own plugins (essential or not)."""
        return frozenset(info.name for info in self.infos if info.source == "builtin")

    @property
    def granted(self) -> Mapping[str, frozenset[str] | None]:
        """Each registered plugin's granted capabilities (``None``: all), kept current."""
        return _Granted(self.infos)

    def check_manifests(self) -> None:
        """Hold every plugin to its manifest and the policy (:func:`apply_manifest`).

        A grant in the policy that names no registered plugin is logged at WARNING (a
        misspelt ``[plugins.NAME]`` would otherwise narrow nothing).
        """
        self.infos[:] = [self._check_manifest(info) for info in self.infos]
        names = {normalise(info.name) for info in self.infos}
        for name in sorted(set(self.policy.grants) - names):
            _log.warning(
                "plugin_grant_unused",
                plugin=name,
                detail=f"[plugins.{name}] capabilities names no loaded plugin",
            )

    def _check_manifest(self, info: PluginInfo) -> PluginInfo:
        hint = self.fix_hint(info.name) if info.source == "entrypoint" else ""
        required = normalise(info.name) in self.required and info.source != "inprocess"
        return apply_manifest(info, self.policy, required=required, hint=hint)

    def with_tools(self, name: str, tools: tuple[str, ...]) -> None:
        """Record the tools plugin ``name`` contributed (its record is replaced, not changed)."""
        self.infos[:] = [
            replace(info, tools=tools) if info.name == name else info for info in self.infos
        ]

    def info(self, name: str) -> PluginInfo | None:
        """The plugin registered as ``name``."""
        return next((info for info in self.infos if info.name == name), None)

    def fix_hint(self, name: str) -> str:
        """How to get past a failure of plugin ``name``: disable it, unless it is required."""
        return required_hint(name) if self._is_required(name) else disable_hint(name)

    def unregister(self, name: str) -> Any:
        """Unregister the plugin registered as ``name``; returns the plugin object.

        Its hook implementations leave the manager and it leaves ``infos`` (so
        ``Agent.plugins`` and ``mainspring plugins`` no longer list it); the listeners are
        told. Tools it contributed were collected when the agent was built: what becomes
        of them is the agent's business. Raises ``KeyError`` if no plugin has that name
        and :class:`~mainspring.PluginLoadError` if it is a required plugin or an essential
        built-in (the same holds for ``pm.unregister`` and ``pm.set_blocked``).
        """
        plugin = self.pm.get_plugin(name)
        if plugin is None:
            raise KeyError(f"no plugin is registered as {name!r}")
        self._check_removable(name)
        self.pm.unregister(plugin, name)
        if not isinstance(self.pm, KernelManager):
            self._unregistered(plugin)
        return plugin

    def register_narrowed(self, plugin: object, name: str | None, ceiling: frozenset[str]) -> str:
        """Register ``plugin`` granted at most ``ceiling``, whatever it declares.

        For a plugin registered by another one at run time: it never holds more than the
        plugin that registered it. Returns the name it was registered as; raises
        :class:`~mainspring.PluginLoadError` as ``pm.register`` does.
        """
        self._ceiling = ceiling
        try:
            registered = self.pm.register(plugin, name)
        finally:
            self._ceiling = None
        if registered is None:
            raise PluginLoadError(f"plugin {name or plugin!r} is blocked", plugin=name)
        return registered

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after every later registration or unregistration."""
        self._listeners.append(listener)

    def _is_required(self, name: str) -> bool:
        info = self.info(name)
        return normalise(name) in self.required and info is not None and info.source != "inprocess"

    def _check_removable(self, name: str) -> None:
        info = self.info(name)
        if info is not None and info.essential:
            raise PluginLoadError(
                f"plugin {name!r} is an essential built-in and cannot be unregistered",
                plugin=name,
            )
        if self._is_required(name):
            raise PluginLoadError(
                f"plugin {name!r} is required (required_plugins) and cannot be unregistered",
                plugin=name,
            )

    def _registered(self, name: str, plugin: Any) -> None:
        info = PluginInfo(name, "inprocess", plugin, hooks=hooks_of(self.pm, plugin))
        info = self._check_manifest(info)
        ceiling = self._ceiling
        if ceiling is not None:
            granted = ceiling if info.granted is None else info.granted & ceiling
            info = replace(info, granted=granted)
        self.infos.append(info)
        self._changed()

    def _unregistered(self, plugin: Any) -> None:
        self.infos[:] = [info for info in self.infos if info.plugin is not plugin]
        self._changed()

    def _changed(self) -> None:
        for listener in list(self._listeners):
            listener()


@final
class _Granted(Mapping[str, "frozenset[str] | None"]):
    """A live view of the plugins' granted capabilities, by registered name."""

    __slots__ = ("_infos",)

    def __init__(self, infos: list[PluginInfo]) -> None:
        self._infos = infos

    def __getitem__(self, name: str) -> frozenset[str] | None:
        for info in self._infos:
            if info.name == name:
                return info.granted
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter([info.name for info in self._infos])

    def __len__(self) -> int:
        return len(self._infos)


_Opts = pluggy.HookimplOpts | None
_MISSING = object()

_module_opts: weakref.WeakKeyDictionary[ModuleType, dict[str, tuple[Any, _Opts]]] = (
    weakref.WeakKeyDictionary()
)
"""What :meth:`KernelManager.parse_hookimpl_opts` found on module plugins, per attribute
with the object it was found on."""


class KernelManager(pluggy.PluginManager):
    """The kernel's plugin manager: once loading is done, each change goes to its set.

    Registering a module (the built-ins, installed plugins) reads each of its attributes
    once per process: what pluggy parses off an attribute is remembered for as long as
    the module holds the same object under that name.
    """

    def __init__(self) -> None:
        super().__init__(PROJECT)
        self.add_hookspecs(hookspecs)
        self.owner: PluginSet | None = None

    def parse_hookimpl_opts(self, plugin: Any, name: str) -> _Opts:
        """pluggy's answer, remembered for module plugins (see the class docstring)."""
        if type(plugin) is not ModuleType:
            return super().parse_hookimpl_opts(plugin, name)
        value = plugin.__dict__.get(name, _MISSING)
        memo = _module_opts.get(plugin)
        if memo is None:
            memo = _module_opts[plugin] = {}
        known = memo.get(name)
        if known is None or known[0] is not value:
            known = memo[name] = (value, super().parse_hookimpl_opts(plugin, name))
        # the options dict pluggy keeps on the function itself, as pluggy hands it out
        return known[1]

    def register(self, plugin: object, name: str | None = None) -> str | None:
        """Register ``plugin``; after loading, validate it and list it in the plugin set."""
        registered = super().register(plugin, name)
        owner = self.owner
        if owner is not None and registered is not None:
            try:
                validate(self, plugin, registered)
                owner._registered(registered, plugin)
            except PluginLoadError:
                super().unregister(plugin)
                raise
        return registered

    def unregister(self, plugin: object | None = None, name: str | None = None) -> Any | None:
        """Unregister like pluggy; after loading, a required plugin is refused."""
        owner = self.owner
        if owner is not None:
            target = name if name is not None or plugin is None else self.get_name(plugin)
            if target is not None:
                owner._check_removable(target)
        removed = super().unregister(plugin, name)
        if owner is not None and removed is not None:
            owner._unregistered(removed)
        return removed


def hooks_of(pm: pluggy.PluginManager, plugin: Any) -> tuple[str, ...]:
    """The hooks of this kernel that ``plugin`` implements (ignored optional ones left out)."""
    callers = pm.get_hookcallers(plugin) or ()
    return tuple(sorted(caller.name for caller in callers if caller.spec is not None))


def validate(pm: pluggy.PluginManager, plugin: Any, name: str) -> None:
    """Refuse ``plugin`` (registered as ``name``) with a :class:`~mainspring.PluginLoadError`.

    Hook wrappers (on any hook), async implementations of synchronous hooks, and
    implementations of unknown hooks not marked ``optionalhook=True`` are refused.
    """
    for caller in pm.get_hookcallers(plugin) or ():
        for impl in caller.get_hookimpls():
            if impl.plugin is not plugin:
                continue
            if impl.hookwrapper or impl.wrapper:
                raise PluginLoadError(
                    f"plugin {name!r}: hook wrappers are not supported on {caller.name} "
                    "(the kernel calls each implementation itself, with the hook's rules); "
                    "implement it as an ordinary hook",
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
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as error:
        unknown = next(
            caller.name
            for caller in pm.get_hookcallers(error.plugin) or ()
            if caller.spec is None
            and any(
                impl.plugin is error.plugin and not impl.optionalhook
                for impl in caller.get_hookimpls()
            )
        )
        culprit = name if error.plugin is plugin else pm.get_name(error.plugin) or "?"
        raise PluginLoadError(
            f"plugin {culprit!r} implements unknown hook {unknown!r} (mark it "
            "@hookimpl(optionalhook=True) if it is meant for another version of "
            f"mainspring); known hooks: "
            f"{', '.join(sorted(hookspecs.ASYNC_HOOKS | hookspecs.SYNC_HOOKS))}",
            plugin=culprit,
        ) from None


def disable_hint(name: str) -> str:
    """How to start without the installed plugin ``name``."""
    return (
        f"To start without it, pass disable_plugins=[{name!r}] (on the command line: "
        f"--no-plugin {name}) or set MAINSPRING_DISABLE_PLUGINS={name} (or uninstall it)."
    )


def required_hint(name: str) -> str:
    """How to get past a failure of ``name``, a plugin the agent cannot start without."""
    return (
        f"It is listed in required_plugins, so the agent cannot start without it: fix or "
        f"reinstall it (pip install --force-reinstall {name}), or remove it from "
        "required_plugins in the config file."
    )
