"""One agent's plugins: the manager, what was loaded into it, and how it may change.

:class:`PluginSet` lists the registered plugins in load order. Its manager, a
:class:`KernelManager`, keeps that list true after loading: a plugin registered later is
validated and listed, one unregistered leaves the list, a required plugin cannot be
unregistered, and listeners hear of every change.

Agents that load the same plugin objects under the same names in the same order share
one read-only manager (a :class:`Registration`): thousands of agents with the built-ins
hold one set of pluggy's hook callers and implementations, not one each. An agent gets a
manager of its own, a copy, the first time anyone asks for it (``PluginSet.pm``, which
every registration, unregistration and blocking goes through), so no change made to one
agent is ever seen by another.

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
    "Registration",
    "disable_hint",
    "hooks_of",
    "required_hint",
    "validate",
]


_log = get_logger("mainspring.plugins")


@final
@dataclass(slots=True)
class PluginSet:
    """An agent's plugin manager and what was loaded into it, in load order.

    ``registration`` holds the plugins as loaded, in a manager other agents may share;
    :attr:`pm` is this agent's own copy of it, made on first use. ``disabled`` lists the
    plugins the controls turned off, with the control that did; ``required`` holds the
    normalised names of the plugins the agent must not run without; ``policy`` the
    manifest rules every plugin is held to. ``infos`` follows :attr:`pm`: a plugin
    registered later (``pm.register``) is appended as ``inprocess`` once it passes the
    same validation and manifest checks, one unregistered (:meth:`unregister`, ``pm.unregister``,
    ``pm.set_blocked``) is removed, and every listener added with :meth:`on_change` is
    called after each such change.
    """

    registration: Registration
    infos: list[PluginInfo]
    disabled: tuple[DisabledPlugin, ...] = ()
    required: frozenset[str] = frozenset()
    policy: ManifestPolicy = field(default_factory=ManifestPolicy)
    _listeners: list[Callable[[], None]] = field(default_factory=list, init=False, repr=False)
    _ceiling: frozenset[str] | None = field(default=None, init=False, repr=False)
    _own: KernelManager | None = field(default=None, init=False, repr=False)

    @property
    def pm(self) -> pluggy.PluginManager:
        """This agent's own plugin manager: registering, unregistering or blocking a
        plugin on it changes this agent only.

        Made on first use, a copy of the shared one with the same plugins in the same
        order; from then on it is the manager the agent's hooks are read from.
        """
        own = self._own
        if own is None:
            own = self.registration.copy()
            own.owner = self
            self._own = own
        return own

    def manager(self) -> pluggy.PluginManager:
        """The manager the agent's hooks are read from, for reading only: the shared one
        until :attr:`pm` was asked for (asking for it here would copy it for nothing)."""
        own = self._own
        return self.registration.manager if own is None else own

    @property
    def fallbacks(self) -> frozenset[str]:
        """The essential built-ins, whose implementations run after every plugin's."""
        return _interned(frozenset(info.name for info in self.infos if info.essential))

    @property
    def builtins(self) -> frozenset[str]:
        """mainspring's own plugins (essential or not)."""
        return _interned(frozenset(info.name for info in self.infos if info.source == "builtin"))

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
        checked = apply_manifest(info, self.policy, required=required, hint=hint)
        if checked.source != "builtin":
            return checked
        # a built-in's record is the same for every agent with the same grants: one copy
        return _builtin_infos.setdefault(checked, checked)

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
        plugin = self.manager().get_plugin(name)
        if plugin is None:
            raise KeyError(f"no plugin is registered as {name!r}")
        self._check_removable(name)
        self.pm.unregister(plugin, name)
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
        self.read_only = False
        """Set once a :class:`Registration` shares it: every change is refused."""

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
        self._refuse_if_read_only()
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
        self._refuse_if_read_only()
        owner = self.owner
        if owner is not None:
            target = name if name is not None or plugin is None else self.get_name(plugin)
            if target is not None:
                owner._check_removable(target)
        removed = super().unregister(plugin, name)
        if owner is not None and removed is not None:
            owner._unregistered(removed)
        return removed

    def _refuse_if_read_only(self) -> None:
        if self.read_only:
            raise RuntimeError(
                "this plugin manager is shared by agents and cannot change; change one "
                "agent's plugins through agent.plugins.pm (its own manager)"
            )


_Key = tuple[tuple[str, int], ...]


@final
class Registration:
    """Plugins registered, in order, into one read-only manager agents may share.

    :meth:`of` returns the registration of the same plugin objects under the same names
    in the same order if one is alive and still matches its plugins (none of the
    attributes pluggy found hook implementations on was replaced, and no attribute was
    added or removed since); otherwise it registers them into a new manager. ``hooks``
    holds, for each plugin in order, the hooks it implements (:func:`hooks_of`).
    """

    __slots__ = ("__weakref__", "_marks", "hooks", "manager", "plugins")

    def __init__(
        self,
        manager: KernelManager,
        plugins: tuple[tuple[str, Any], ...],
        hooks: tuple[tuple[str, ...], ...],
    ) -> None:
        self.manager = manager
        self.plugins = plugins
        self.hooks = hooks
        self._marks = tuple(_marks(manager, plugin) for _, plugin in plugins)
        manager.read_only = True

    @classmethod
    def of(
        cls,
        plugins: tuple[tuple[str, Any], ...],
        register: Callable[[KernelManager, str, Any], tuple[str, ...]],
    ) -> Registration:
        """The registration of ``plugins`` (name, plugin object), shared if possible.

        ``register(manager, name, plugin)`` registers one plugin into a new manager and
        returns its hooks (raising :class:`~mainspring.PluginLoadError` to refuse it).
        """
        key: _Key = tuple((name, id(plugin)) for name, plugin in plugins)
        known = _registrations.get(key)
        if known is not None and known._current():
            return known
        manager = KernelManager()
        hooks = tuple(register(manager, name, plugin) for name, plugin in plugins)
        made = cls(manager, plugins, hooks)
        # the registration holds its plugins, so no id in the key is reused while it lives
        _registrations[key] = made
        return made

    def copy(self) -> KernelManager:
        """A new, changeable manager with the same plugins registered in the same order."""
        manager = KernelManager()
        for name, plugin in self.plugins:
            manager.register(plugin, name)
        return manager

    def _current(self) -> bool:
        return all(
            _marks_hold(plugin, marks)
            for (_, plugin), marks in zip(self.plugins, self._marks, strict=True)
        )


_Marks = tuple[int, tuple[tuple[str, Any], ...]]


def _marks(manager: KernelManager, plugin: Any) -> _Marks:
    """How many attributes ``plugin`` has, and the hook implementations pluggy read off it."""
    found = tuple(
        (attribute, _unbound(getattr(plugin, attribute, None)))
        for attribute in dir(plugin)
        if manager.parse_hookimpl_opts(plugin, attribute) is not None
    )
    return _attribute_count(plugin), found


def _marks_hold(plugin: Any, marks: _Marks) -> bool:
    count, found = marks
    return _attribute_count(plugin) == count and all(
        _unbound(getattr(plugin, attribute, None)) is value for attribute, value in found
    )


def _attribute_count(plugin: Any) -> int:
    attributes = getattr(plugin, "__dict__", None)
    return len(attributes) if attributes is not None else -1


def _unbound(value: Any) -> Any:
    """A bound method's function (each attribute read makes a new bound method)."""
    return getattr(value, "__func__", value)


_registrations: weakref.WeakValueDictionary[_Key, Registration] = weakref.WeakValueDictionary()
"""The live registrations by their plugins' names and ids, in order."""

_names: dict[frozenset[str], frozenset[str]] = {}
"""The built-in and fallback name sets, one object each (a bounded set of subsets)."""

_builtin_infos: dict[PluginInfo, PluginInfo] = {}
"""Built-ins' checked records, one object each (built-ins times the grants in use)."""


def _interned(names: frozenset[str]) -> frozenset[str]:
    return _names.setdefault(names, names)


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
