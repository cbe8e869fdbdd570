"""Capability manifests: a plugin says what it does, and the loader holds it to that.

Every hook needs exactly one capability (:data:`CAPABILITY_OF`). A plugin declares the
ones it uses in two places, which must agree when both are given:

- a ``CAPABILITIES`` attribute (a module-level tuple, or a class attribute of a plugin
  object), read when the plugin is registered: ``CAPABILITIES = ("tools", "gate")``;
- for an installed plugin, its distribution's metadata, readable without importing it: one
  entry point per capability in the :data:`MANIFEST_GROUP` group, named
  ``PLUGIN.CAPABILITY`` (``PLUGIN`` being its name in the ``mainspring`` group).

At registration:

- a plugin that implements a hook whose capability it did not declare fails to load
  (:class:`~mainspring.PluginLoadError` naming the plugin, the hook and the capability);
- a plugin without a manifest loads as *undeclared*, unless the settings require manifests
  (``[plugins] require_manifest = true``);
- the operator may narrow any plugin in the config file (``[plugins.NAME] capabilities =
  ["tools"]``): its implementations of hooks outside the grant are never called. Each is
  named in a WARNING at load; one of a *protective* capability (:data:`PROTECTIVE`: a gate,
  a redactor, an approver) in an ERROR, and narrowing a protective capability of a
  plugin listed in ``required_plugins`` is a load error.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

from ..contract.errors import PluginLoadError
from ..contract.table import HOOKS
from ..logs import get_logger
from .controls import normalise

if TYPE_CHECKING:
    from importlib_metadata import EntryPoint

    from ..contract.plugin_info import PluginInfo

__all__ = [
    "CAPABILITIES",
    "CAPABILITY_OF",
    "MANIFEST_GROUP",
    "PROTECTIVE",
    "ManifestPolicy",
    "apply_manifest",
    "check_manifest",
    "declared_capabilities",
    "granted_capabilities",
    "metadata_manifests",
]

log = get_logger("mainspring.plugins")

MANIFEST_GROUP: Final = "mainspring.capabilities"
"""The entry-point group of installed plugins' manifests (one ``PLUGIN.CAPABILITY`` each)."""

CAPABILITY_OF: Final[Mapping[str, str]] = MappingProxyType(
    {name: rules.capability for name, rules in HOOKS.items()}
)
"""The capability each hook needs (from the hook table). ``context`` and ``observe`` see
the conversation."""

CAPABILITIES: Final = frozenset(CAPABILITY_OF.values()) | {"register"}
"""Every capability: one per hook, and ``register`` (registering and unregistering plugins at
run time, through the agent view), which only the operator can grant."""

PROTECTIVE: Final = frozenset({"gate", "redact", "approve"})
"""Capabilities that protect the user: narrowing one away switches a protection off."""


@dataclass(frozen=True, slots=True)
class ManifestPolicy:
    """The operator's rules for manifests, and the manifests installed distributions declare.

    ``grants`` and ``metadata`` are keyed by normalised plugin name.
    """

    grants: Mapping[str, frozenset[str]] = field(default_factory=dict)
    require_manifest: bool = False
    metadata: Mapping[str, frozenset[str]] = field(default_factory=dict)
    allow_unregister: frozenset[str] = frozenset()
    """Protective plugins a plugin holding ``register`` may unregister (normalised names)."""

    @classmethod
    def build(
        cls,
        grants: Mapping[str, Iterable[str]],
        require_manifest: bool,
        metadata: Mapping[str, frozenset[str]],
        allow_unregister: Iterable[str] = (),
    ) -> ManifestPolicy:
        """The policy; an unknown capability in ``grants`` is a load error (before imports)."""
        checked: dict[str, frozenset[str]] = {}
        for name, grant in grants.items():
            granted = frozenset(grant)
            _check_known(granted, f"[plugins.{name}] capabilities", name)
            checked[normalise(name)] = granted
        removable = frozenset(normalise(name) for name in allow_unregister)
        if not (checked or require_manifest or metadata or removable):
            return _NO_RULES  # what most agents have: one object for all of them
        return cls(checked, require_manifest, metadata, removable)


_NO_RULES: Final = ManifestPolicy()


def metadata_manifests(
    eps: Iterable[EntryPoint], owners: Mapping[str, str | None] | None = None
) -> dict[str, frozenset[str]]:
    """The manifests in :data:`MANIFEST_GROUP` entry points, by normalised plugin name.

    An entry named without a ``.`` contributes its whole name as a (bad) capability, so the
    plugin's load error names it. ``owners`` maps a plugin's normalised name to the
    distribution whose ``mainspring`` entry point declares it: only that distribution's
    own entries count for it (another distribution cannot widen a plugin's manifest);
    one from elsewhere is ignored with a warning naming both.
    """
    found: dict[str, set[str]] = {}
    for ep in eps:
        plugin, dot, capability = ep.name.strip().rpartition(".")
        key = normalise(plugin) if dot else normalise(capability)
        if owners is not None and key in owners:
            source = _distribution_of(ep)
            if source is not None and normalise(source) != normalise(owners[key] or ""):
                log.warning(
                    "plugin_manifest_foreign",
                    plugin=key,
                    distribution=source,
                    owner=owners[key],
                    detail="a manifest entry for a plugin of another distribution is ignored",
                )
                continue
        found.setdefault(key, set()).add(capability.strip() if dot else ep.name)
    return {name: frozenset(capabilities) for name, capabilities in found.items()}


def _distribution_of(ep: EntryPoint) -> str | None:
    """The name of the distribution declaring ``ep``, if known."""
    dist = getattr(ep, "dist", None)
    name = getattr(dist, "name", None) if dist is not None else None
    return name if isinstance(name, str) else None


def _check_known(names: frozenset[str], where: str, plugin: str, hint: str = "") -> None:
    unknown = sorted(str(item) for item in names - CAPABILITIES)
    if unknown:
        raise PluginLoadError(
            f"{where} names unknown capabilities {', '.join(unknown)}; known: "
            f"{', '.join(sorted(CAPABILITIES))}{hint}",
            plugin=plugin,
        )


def check_manifest(name: str, metadata: frozenset[str] | None, hint: str = "") -> None:
    """Refuse a metadata manifest naming unknown capabilities (before the plugin is imported)."""
    if metadata is not None:
        where = f"plugin {name!r}: its distribution's {MANIFEST_GROUP} entry points"
        _check_known(metadata, where, name, f". {hint}" if hint else "")


_manifests: dict[tuple[Any, ...], frozenset[str]] = {}


def _interned(manifest: Iterable[Any]) -> frozenset[str]:
    """``frozenset(manifest)``, one shared object per distinct manifest of the process.

    Every agent reads each plugin's ``CAPABILITIES``; the sets are few and immutable, so
    thousands of agents share them. A manifest that is not hashable as a tuple is not
    interned.
    """
    key = tuple(manifest)
    try:
        known = _manifests.get(key)
    except TypeError:  # an unhashable entry: _check_known reports it
        return frozenset(key)
    if known is None:
        if len(_manifests) >= 1024:
            _manifests.clear()
        known = _manifests[key] = frozenset(key)
    return known


def declared_capabilities(
    name: str, plugin: Any, hooks: Iterable[str], metadata: frozenset[str] | None = None
) -> frozenset[str] | None:
    """The capabilities ``plugin`` declares (``None``: no manifest), checked against ``hooks``.

    ``metadata`` is the manifest its distribution declares, if any; when the plugin also
    has a ``CAPABILITIES`` attribute, the two must be the same. Raises
    :class:`~mainspring.PluginLoadError` for a malformed manifest, two that differ, or a
    hook outside it.
    """
    manifest = getattr(plugin, "CAPABILITIES", None)
    declared = metadata
    if manifest is not None:
        if isinstance(manifest, str) or not isinstance(manifest, Iterable):
            raise PluginLoadError(
                f"plugin {name!r}: CAPABILITIES must be a tuple of names, got {manifest!r}",
                plugin=name,
            )
        declared = _interned(manifest)
        _check_known(declared, f"plugin {name!r}: CAPABILITIES", name)
        if metadata is not None and metadata != declared:
            raise PluginLoadError(
                f"plugin {name!r}: its CAPABILITIES ({_names(declared)}) differ from its "
                f"distribution's {MANIFEST_GROUP} entry points ({_names(metadata)}); make "
                "them the same and reinstall it",
                plugin=name,
            )
    if declared is None:
        return None
    for hook in hooks:
        needed = CAPABILITY_OF.get(hook)
        if needed is not None and needed not in declared:
            raise PluginLoadError(
                f"plugin {name!r} implements {hook}, which needs the capability {needed!r}, "
                f"but declares only {_names(declared)}; add {needed!r} to its CAPABILITIES"
                + (f" and its {MANIFEST_GROUP} entry points" if metadata is not None else ""),
                plugin=name,
            )
    return declared


def _names(capabilities: Iterable[str]) -> str:
    return ", ".join(sorted(capabilities)) or "none"


def granted_capabilities(
    name: str,
    declared: frozenset[str] | None,
    hooks: Iterable[str],
    grant: frozenset[str] | None,
    required: bool = False,
) -> frozenset[str] | None:
    """What ``name`` may use: its declaration narrowed by the operator's ``grant``.

    ``None`` means everything (no manifest, no grant). Each hook it implements outside the
    result is logged (an ERROR for a :data:`PROTECTIVE` one, else a WARNING): the kernel
    will not call it. A ``required`` plugin whose protective hook is narrowed away is a
    :class:`~mainspring.PluginLoadError`.
    """
    if grant is None:
        return declared
    granted = grant if declared is None else grant & declared
    for hook in hooks:
        needed = CAPABILITY_OF.get(hook)
        if needed is None or needed in granted:
            continue
        if needed in PROTECTIVE and required:
            raise PluginLoadError(
                f"plugin {name!r} is in required_plugins, but [plugins.{name}] capabilities "
                f"leaves out {needed!r}, so its {hook} would never run; add {needed!r} to "
                "that list, or remove the plugin from required_plugins",
                plugin=name,
            )
        if needed in PROTECTIVE:
            log.error(
                "plugin_protection_off",
                plugin=name,
                hook=hook,
                capability=needed,
                detail=f"[plugins.{name}] capabilities leaves out {needed!r}: this "
                "protection is off; add it to the list to turn it back on",
            )
        else:
            log.warning(
                "plugin_hook_not_granted",
                plugin=name,
                hook=hook,
                capability=needed,
                detail="the config file narrows this plugin; the hook will not be called",
            )
    return granted


def apply_manifest(
    info: PluginInfo, policy: ManifestPolicy, *, required: bool = False, hint: str = ""
) -> PluginInfo:
    """``info`` with ``declared`` and ``granted`` set from the plugin and ``policy``.

    The metadata manifest counts for installed plugins only. Raises
    :class:`~mainspring.PluginLoadError` (ending with ``hint``) when the plugin breaks its
    manifest, has none although one is required, or is required and narrowed unsafely.
    """
    key = normalise(info.name)
    metadata = policy.metadata.get(key) if info.source == "entrypoint" else None
    suffix = f". {hint}" if hint else ""
    try:
        declared = declared_capabilities(info.name, info.plugin, info.hooks, metadata)
        if declared is None and policy.require_manifest and info.source != "builtin":
            raise PluginLoadError(
                f"plugin {info.name!r} declares no capabilities, and the config file "
                "requires a manifest ([plugins] require_manifest = true); give it a "
                "CAPABILITIES tuple (see docs/capabilities.md)",
                plugin=info.name,
            )
        granted = granted_capabilities(
            info.name, declared, info.hooks, policy.grants.get(key), required
        )
    except PluginLoadError as error:
        raise PluginLoadError(
            f"{error}{suffix}",
            plugin=info.name,
            distribution=info.distribution,
            version=info.version,
        ) from None
    return replace(info, declared=declared, granted=granted)
