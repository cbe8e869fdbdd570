"""Capability manifests: a plugin says what it does, and the loader holds it to that.

Every hook needs one capability (:data:`CAPABILITY_OF`). A plugin declares the ones it uses
with a ``CAPABILITIES`` attribute (a module-level tuple, or a class attribute of a plugin
object): ``CAPABILITIES = ("tools", "gate")``. At registration:

- a plugin that implements a hook whose capability it did not declare fails to load
  (:class:`~mainspring.PluginLoadError` naming the plugin, the hook and the capability);
- a plugin without a manifest loads as *undeclared*, unless the settings require manifests
  (``[plugins] require_manifest = true``);
- the operator may narrow any plugin in the config file (``[plugins.NAME] capabilities =
  ["tools"]``): its implementations of hooks outside the grant are never called (a
  WARNING names each one at load), so a tool bundle cannot read the conversation even if
  it asks to.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from ..errors import PluginLoadError
from ..logs import get_logger

__all__ = ["CAPABILITIES", "CAPABILITY_OF", "declared_capabilities", "granted_capabilities"]

log = get_logger("mainspring.plugins")

CAPABILITY_OF: Final[Mapping[str, str]] = {
    "register_tools": "tools",
    "register_providers": "providers",
    "before_tool_call": "gate",
    "request_approval": "approve",
    "after_tool_result": "redact",
    "filter_tool_update": "redact",
    "transform_context": "context",
    "convert_to_llm": "context",
    "count_tokens": "context",
    "compact": "compaction",
    "on_event": "observe",
    "should_stop_after_turn": "observe",
}
"""The capability each hook needs. ``context`` and ``observe`` see the conversation."""

CAPABILITIES: Final = frozenset(CAPABILITY_OF.values())


def declared_capabilities(name: str, plugin: Any, hooks: Iterable[str]) -> frozenset[str] | None:
    """The capabilities ``plugin`` declares (``None``: no manifest), checked against ``hooks``.

    Raises :class:`~mainspring.PluginLoadError` for a malformed manifest or a hook outside it.
    """
    manifest = getattr(plugin, "CAPABILITIES", None)
    if manifest is None:
        return None
    if isinstance(manifest, str) or not isinstance(manifest, Iterable):
        raise PluginLoadError(
            f"plugin {name!r}: CAPABILITIES must be a tuple of names, got {manifest!r}",
            plugin=name,
        )
    declared = frozenset(manifest)
    unknown = sorted(str(item) for item in declared - CAPABILITIES)
    if unknown:
        raise PluginLoadError(
            f"plugin {name!r} declares unknown capabilities {', '.join(unknown)}; known: "
            f"{', '.join(sorted(CAPABILITIES))}",
            plugin=name,
        )
    for hook in hooks:
        needed = CAPABILITY_OF.get(hook)
        if needed is not None and needed not in declared:
            raise PluginLoadError(
                f"plugin {name!r} implements {hook}, which needs the capability {needed!r}, "
                f"but declares only {', '.join(sorted(declared)) or 'none'}; add {needed!r} to "
                "its CAPABILITIES",
                plugin=name,
            )
    return declared


def granted_capabilities(
    name: str, declared: frozenset[str] | None, hooks: Iterable[str], grant: Iterable[str] | None
) -> frozenset[str] | None:
    """What ``name`` may use: its declaration narrowed by the operator's ``grant``.

    ``None`` means everything (no manifest, no grant). A hook it implements outside the
    result is logged at WARNING: the kernel will not call it.
    """
    if grant is None:
        return declared
    granted = frozenset(grant)
    unknown = sorted(granted - CAPABILITIES)
    if unknown:
        raise PluginLoadError(
            f"[plugins.{name}] capabilities names unknown capabilities {', '.join(unknown)}; "
            f"known: {', '.join(sorted(CAPABILITIES))}",
            plugin=name,
        )
    if declared is not None:
        granted &= declared
    for hook in hooks:
        needed = CAPABILITY_OF.get(hook)
        if needed is not None and needed not in granted:
            log.warning(
                "plugin_hook_not_granted",
                plugin=name,
                hook=hook,
                capability=needed,
                detail="the config file narrows this plugin; the hook will not be called",
            )
    return granted
