"""Plugin loading: built-ins, installed entry points, in-process plugins, into one manager.

Load order is deterministic: the built-ins (from the kernel's own list), then installed
plugins of the ``mainspring`` entry-point group sorted by name, then ``plugins=`` in the
order given. Allow, deny and autoload controls are applied to entry points *before* any
plugin module is imported. Any failure is a :class:`~mainspring.PluginLoadError`: an agent
whose security policy pack failed to load must not start.

Nothing is replaced or turned off silently: two installed distributions declaring one
plugin name is a :class:`~mainspring.PluginLoadError` naming both (neither is loaded);
every plugin a control turns off is logged at WARNING and listed in
:attr:`PluginSet.disabled`; a plugin named in ``required`` that is missing, disabled,
shadowed or fails to load stops the agent; once loaded, a required plugin cannot be
unregistered, and :attr:`PluginSet.infos` follows later registrations and unregistrations.

Loading is paid once per process: the entry-point scan is cached (rescanned when
``sys.path`` or one of its directories changes, or after :func:`rescan_installed_plugins`),
imported plugin modules stay in ``sys.modules``, and what pluggy reads off a plugin
module is remembered (see :class:`~mainspring.loading.plugin_set.KernelManager`). Agents
that load the same plugin objects share one read-only manager until one of them changes
its plugins (see :mod:`~mainspring.loading.plugin_set`).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import logging
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple, ParamSpec

import pluggy

from ..contract.errors import PluginLoadError
from ..contract.plugin_info import PluginInfo, Source
from ..logs import get_logger
from .builtins import BUILTIN_PLUGINS
from .capabilities import ManifestPolicy, check_manifest
from .controls import (
    ENV_AUTOLOAD,
    OPTION_AUTOLOAD,
    DisabledPlugin,
    PluginControls,
    distribution_of,
    normalise,
    plugin_controls,
    required_problems,
)
from .installs import with_install_diagnosis
from .plugin_set import (
    KernelManager,
    PluginSet,
    Registration,
    disable_hint,
    hooks_of,
    required_hint,
    validate,
)
from .scan import ENTRY_POINT_GROUP, Installed, rescan_installed_plugins
from .scan import installed as _installed
from .scan import manifests as _manifests

if TYPE_CHECKING:
    from importlib_metadata import EntryPoint

__all__ = [
    "ENTRY_POINT_GROUP",
    "DisabledPlugin",
    "PluginControls",
    "PluginSet",
    "disable_hint",
    "installed_manifest",
    "load_plugins",
    "plugin_controls",
    "required_hint",
    "rescan_installed_plugins",
]

_log = get_logger(__name__)


_NONE: frozenset[str] = frozenset()
"""No names (each ``frozenset()`` call makes a new object)."""


class _Loaded(NamedTuple):
    """A plugin to register, and what its record and its load errors say of it."""

    name: str
    plugin: Any
    source: Source
    distribution: str | None = None
    version: str | None = None
    essential: bool = False
    hint: str = "(a built-in plugin)"


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
        validate(pm, plugin, name)
    except PluginLoadError as error:
        pm.unregister(plugin)
        text = str(error).replace(f"plugin {name!r}", f"plugin {name!r}{origin}", 1)
        raise PluginLoadError(f"{text}. {hint}", plugin=name, **details) from None
    return hooks_of(pm, plugin)


def _origin(details: dict[str, Any]) -> str:
    distribution = details.get("distribution")
    if not distribution:
        return ""
    version = details.get("version")
    return f" (distribution {distribution} {version})" if version else f" ({distribution})"


def plugin_name(plugin: Any) -> str:
    """The one name of a plugin passed in-process: the same as when it is installed.

    In order: its ``PLUGIN_NAME`` attribute, its ``name`` attribute, the name of the
    installed entry point that points at it (the plugin is the object an installed
    distribution's entry point names, its module already imported), and last its module
    or class name. Installed plugins are named by their entry point; a plugin that sets
    ``PLUGIN_NAME`` to that name is called the same in tests and in production, in
    ``tool_decision.plugin``, ``plugin_options``, ``--no-plugin``, ``[plugins.NAME]`` and
    errors.
    """
    for attribute in ("PLUGIN_NAME", "name"):
        explicit = getattr(plugin, attribute, None)
        if isinstance(explicit, str) and explicit:
            return explicit
    for eps in _installed().values():
        for ep in eps:
            if _target(ep) is plugin:
                return str(ep.name)
    if isinstance(plugin, ModuleType) or inspect.isclass(plugin):
        return str(plugin.__name__)
    return type(plugin).__name__


def _target(ep: EntryPoint) -> Any:
    """The object ``ep`` names if its module is already imported (nothing is imported)."""
    reference = ep.value.partition("[")[0].strip()
    module_name, _, attribute = reference.partition(":")
    target: Any = sys.modules.get(module_name.strip())
    for part in attribute.strip().split(".") if attribute.strip() else ():
        target = getattr(target, part, None)
    return target


def installed_manifest(name: str) -> frozenset[str] | None:
    """The capabilities installed plugin ``name``'s distribution declares in its metadata.

    Read without importing the plugin (``None``: its distribution declares none).
    """
    return _manifests().get(normalise(name))


def _inprocess_name(plugin: Any, taken: set[str]) -> str:
    base = plugin_name(plugin)
    name, suffix = base, 2
    while name in taken:
        name, suffix = f"{base}-{suffix}", suffix + 1
    return name


def _discover(controls: PluginControls, required: bool) -> Installed | None:
    """The group's entry points by normalised name, in ``sys.path`` order; ``None`` when
    they need not be looked up (autoload turned off in code and nothing required)."""
    if not controls.autoload and controls.autoload_off_by != ENV_AUTOLOAD and not required:
        return None
    return {name: list(eps) for name, eps in _installed().items()}


def _select(
    controls: PluginControls, found: Installed | None
) -> tuple[list[list[EntryPoint]], list[DisabledPlugin]]:
    """The enabled entry points, grouped by name and sorted by it, and the turned-off ones."""
    selected: list[list[EntryPoint]] = []
    off: list[DisabledPlugin] = []
    for eps in sorted((found or {}).values(), key=lambda group: group[0].name):
        reason = controls.why_off(eps[0].name, "entrypoint")
        if reason is None:
            selected.append(eps)
        elif reason != OPTION_AUTOLOAD:
            off.extend(
                DisabledPlugin(ep.name, "entrypoint", reason, distribution_of(ep)[0]) for ep in eps
            )
    return selected, off


def _duplicate_error(eps: Sequence[EntryPoint]) -> PluginLoadError:
    name = eps[0].name
    declared = " and ".join(
        f"distribution {dist or '?'} {version or ''}".rstrip() + f" ({ep.name} = {ep.value})"
        for ep in eps
        for dist, version in [distribution_of(ep)]
    )
    return PluginLoadError(
        f"installed plugin {name!r} is declared by more than one distribution: {declared}; "
        "neither is loaded, since either could stand in for the other. Uninstall the one "
        f"you do not want. {disable_hint(name)}",
        plugin=name,
    )


def _load_entry_point(ep: EntryPoint, hint: str) -> tuple[Any, str | None, str | None]:
    dist_name, version = distribution_of(ep)
    try:
        plugin = ep.load()
    except Exception as error:
        raise PluginLoadError(
            f"installed plugin {ep.name!r} (entry point {ep.value!r} of distribution "
            f"{dist_name or '?'} {version or ''}) failed to load: "
            f"{type(error).__name__}: {error}. {hint}",
            plugin=ep.name,
            distribution=dist_name,
            version=version,
        ) from error
    return plugin, dist_name, version


def _warn(off: Sequence[DisabledPlugin], controls: PluginControls) -> None:
    for item in off:
        _log.warning(
            "plugin_disabled",
            plugin=item.name,
            source=item.source,
            distribution=item.distribution,
            reason=item.reason,
        )
    if controls.autoload_off_by == OPTION_AUTOLOAD and _log.isEnabledFor(logging.INFO):
        # asked first: building thousands of agents this way should cost no log event
        _log.info("installed_plugins_not_loaded", reason=OPTION_AUTOLOAD)


def _refuse(problems: Sequence[tuple[str, str]]) -> PluginLoadError:
    reasons = "; ".join(f"required plugin {name!r} is {why}" for name, why in problems)
    return PluginLoadError(
        f"the agent cannot start: {reasons}. (required_plugins in the settings or config "
        "file lists the plugins an agent must not start without.)",
        plugin=problems[0][0],
    )


_P = ParamSpec("_P")


def _diagnosed(load: Callable[_P, PluginSet]) -> Callable[_P, PluginSet]:
    """``load``, whose load errors say to reinstall a plugin from a stale editable install
    (one whose ``pyproject.toml`` was edited but never reinstalled)."""

    @functools.wraps(load)
    def diagnosed(*args: _P.args, **kwargs: _P.kwargs) -> PluginSet:
        try:
            return load(*args, **kwargs)
        except PluginLoadError as error:
            better = with_install_diagnosis(error)
            if better is error:
                raise
            raise better from error.__cause__

    return diagnosed


@_diagnosed
def load_plugins(
    *,
    plugins: Sequence[Any] = (),
    autoload: bool = True,
    disable_plugins: Iterable[str] = (),
    environ: Mapping[str, str] | None = None,
    required: Sequence[str] = (),
    grants: Mapping[str, Sequence[str]] | None = None,
    require_manifest: bool = False,
    allow_unregister: Sequence[str] = (),
) -> PluginSet:
    """Build one agent's plugin manager: built-ins, installed, then ``plugins``.

    ``required`` names built-in or installed plugins the agent must not start without;
    it comes from settings, never from the environment. ``grants`` narrows plugins'
    capabilities by name and ``require_manifest`` refuses plugins without one (see
    :mod:`~mainspring.loading.capabilities`); ``allow_unregister`` names the protective
    plugins another plugin may still unregister (see :mod:`~mainspring.agent.view`).
    Every check that needs no plugin import (controls, duplicates, required plugins, the
    grants and the installed plugins' metadata manifests) is made before any installed
    plugin is imported. Raises :class:`~mainspring.PluginLoadError` on any failure; the
    error of a plugin from a stale editable install says to reinstall it (see
    :mod:`~mainspring.loading.installs`).
    """
    controls = plugin_controls(autoload, disable_plugins, environ)
    off: list[DisabledPlugin] = []
    builtins: list[tuple[str, str, bool]] = []
    for name, module_name, essential in BUILTIN_PLUGINS:
        reason = None if essential else controls.why_off(name, "builtin")
        if reason is None:
            builtins.append((name, module_name, essential))
        else:
            off.append(DisabledPlugin(name, "builtin", reason, "mainspring"))
    found = _discover(controls, bool(required))
    selected, off_installed = _select(controls, found)
    off += off_installed
    _warn(off, controls)
    taken = {name for name, _, _ in builtins} | {eps[0].name for eps in selected}
    named: list[tuple[str, Any]] = []
    for plugin in plugins:
        named.append((_inprocess_name(plugin, taken), plugin))
        taken.add(named[-1][0])
    problems = required_problems(
        required,
        controls,
        {normalise(name): essential for name, _, essential in BUILTIN_PLUGINS},
        found,
        (name for name, _ in named),
    )
    if problems:
        raise _refuse(problems)
    for eps in selected:
        if len(eps) > 1:
            raise _duplicate_error(eps)
    must = frozenset(normalise(name) for name in required) if required else _NONE
    policy = ManifestPolicy.build(
        grants or {}, require_manifest, _manifests() if selected else {}, allow_unregister
    )
    for [ep] in selected:
        hint = required_hint(ep.name) if normalise(ep.name) in must else disable_hint(ep.name)
        check_manifest(ep.name, policy.metadata.get(normalise(ep.name)), hint)
    loaded: list[_Loaded] = []
    for name, module_name, essential in builtins:
        module = importlib.import_module(module_name)
        loaded.append(_Loaded(name, module, "builtin", "mainspring", None, essential))
    for [ep] in selected:
        hint = required_hint(ep.name) if normalise(ep.name) in must else disable_hint(ep.name)
        plugin, dist_name, version = _load_entry_point(ep, hint)
        declared = getattr(plugin, "PLUGIN_NAME", None)
        if isinstance(declared, str) and normalise(declared) != normalise(ep.name):
            _log.warning(
                "plugin_name_differs",
                plugin=ep.name,
                declared=declared,
                detail="the entry point's name is used; make PLUGIN_NAME the same",
            )
        loaded.append(_Loaded(ep.name, plugin, "entrypoint", dist_name, version, hint=hint))
    for name, plugin in named:
        loaded.append(_Loaded(name, plugin, "inprocess", hint="(passed in plugins=)"))
    by_name = {item.name: item for item in loaded}

    def register(pm: KernelManager, name: str, plugin: Any) -> tuple[str, ...]:
        item = by_name[name]
        if item.source != "entrypoint":
            return _register(pm, plugin, name, hint=item.hint)
        details = {"distribution": item.distribution, "version": item.version}
        return _register(pm, plugin, name, hint=item.hint, **details)

    registration = Registration.of(tuple((item.name, item.plugin) for item in loaded), register)
    infos = [
        PluginInfo(
            item.name,
            item.source,
            item.plugin,
            item.distribution,
            item.version,
            hooks,
            essential=item.essential,
        )
        for item, hooks in zip(loaded, registration.hooks, strict=True)
    ]
    plugin_set = PluginSet(registration, infos, tuple(off), must, policy)
    plugin_set.check_manifests()
    return plugin_set
