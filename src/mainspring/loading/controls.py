"""Which plugins may load: the allow, deny and autoload controls, and required plugins.

The controls come from the constructor (``autoload=``, ``disable_plugins=``) and from
``MAINSPRING_*`` environment variables. Every plugin they turn off is recorded as a
:class:`DisabledPlugin` naming the control, so nothing is turned off silently.
``required_plugins`` (from settings only, never from the environment) names plugins the
agent must not start without: :func:`required_problems` says what keeps each one out.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, final

if TYPE_CHECKING:
    from importlib_metadata import EntryPoint

__all__ = [
    "ENV_ALLOW",
    "ENV_AUTOLOAD",
    "ENV_DISABLE",
    "OPTION_AUTOLOAD",
    "OPTION_DISABLE",
    "DisabledPlugin",
    "PluginControls",
    "distribution_of",
    "forget_distributions",
    "normalise",
    "plugin_controls",
    "required_problems",
]

OPTION_DISABLE = "disable_plugins"
"""Reason: named in ``disable_plugins=`` (the CLI's ``--no-plugin``)."""
ENV_DISABLE = "MAINSPRING_DISABLE_PLUGINS"
"""Reason: named in the denylist environment variable."""
ENV_ALLOW = "MAINSPRING_PLUGINS"
"""Reason: left out of the allowlist environment variable."""
ENV_AUTOLOAD = "MAINSPRING_DISABLE_PLUGIN_AUTOLOAD"
"""Reason: installed plugins turned off by the environment."""
OPTION_AUTOLOAD = "autoload=False"
"""Reason: installed plugins turned off by the constructor."""

_FIX = {
    OPTION_DISABLE: "remove it from disable_plugins= (the CLI's --no-plugin)",
    ENV_DISABLE: f"remove it from {ENV_DISABLE}",
    ENV_ALLOW: f"add it to {ENV_ALLOW} or unset that variable",
    ENV_AUTOLOAD: f"unset {ENV_AUTOLOAD}",
    OPTION_AUTOLOAD: "build the agent with autoload=True",
}


def normalise(name: str) -> str:
    """``name`` compared the way plugin names are: case and ``-_.`` runs folded."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _names(value: str | None) -> frozenset[str] | None:
    if value is None:
        return None
    return frozenset(normalise(part.strip()) for part in value.split(",") if part.strip())


@final
@dataclass(frozen=True, slots=True)
class DisabledPlugin:
    """A plugin that was present but not loaded, and the control that turned it off.

    ``reason`` is one of :data:`OPTION_DISABLE`, :data:`ENV_DISABLE`, :data:`ENV_ALLOW`,
    :data:`ENV_AUTOLOAD`, :data:`OPTION_AUTOLOAD`.
    """

    name: str
    source: Literal["builtin", "entrypoint"]
    reason: str
    distribution: str | None = None


@final
@dataclass(frozen=True, slots=True)
class PluginControls:
    """The effective allow/deny/autoload controls.

    ``deny`` is every denied name; ``deny_option`` and ``deny_env`` say where each came
    from; ``autoload_off_by`` names the control that turned autoload off (``None`` if on).
    """

    autoload: bool
    allow: frozenset[str] | None
    deny: frozenset[str]
    deny_option: frozenset[str] = frozenset()
    deny_env: frozenset[str] = frozenset()
    autoload_off_by: str | None = None

    def why_off(self, name: str, source: Literal["builtin", "entrypoint"]) -> str | None:
        """The control that keeps plugin ``name`` out, or ``None`` if none does.

        The allowlist and autoload apply to installed plugins only; the denylist wins over
        the allowlist.
        """
        key = normalise(name)
        if source == "entrypoint" and not self.autoload:
            return self.autoload_off_by or OPTION_AUTOLOAD
        if key in self.deny_option:
            return OPTION_DISABLE
        if key in self.deny_env:
            return ENV_DISABLE
        if source == "entrypoint" and self.allow is not None and key not in self.allow:
            return ENV_ALLOW
        return None


def plugin_controls(
    autoload: bool, disable: Iterable[str], environ: Mapping[str, str] | None = None
) -> PluginControls:
    """Combine constructor arguments with ``MAINSPRING_*`` environment variables.

    ``MAINSPRING_DISABLE_PLUGIN_AUTOLOAD`` (any value but empty/``0``/``false``/``no``)
    turns autoload off; ``MAINSPRING_PLUGINS="a,b"`` allows only those installed plugins
    (set but empty: none); ``MAINSPRING_DISABLE_PLUGINS`` adds names to ``disable``.
    """
    env = os.environ if environ is None else environ
    flag = env.get(ENV_AUTOLOAD, "").strip().lower()
    off_by = None if autoload else OPTION_AUTOLOAD
    if autoload and flag not in ("", "0", "false", "no"):
        off_by = ENV_AUTOLOAD
    option = frozenset(normalise(name) for name in disable)
    from_env = _names(env.get(ENV_DISABLE)) or frozenset()
    return PluginControls(
        off_by is None, _names(env.get(ENV_ALLOW)), option | from_env, option, from_env, off_by
    )


_distributions: dict[int, tuple[EntryPoint, str | None, str | None]] = {}
"""``distribution_of`` answers by ``id`` of the entry point (kept alive here, so the
``id`` is not reused); reading a distribution's metadata parses a file."""


def distribution_of(ep: EntryPoint) -> tuple[str | None, str | None]:
    """The name and version of the distribution declaring ``ep`` (``None`` if unknown).

    Remembered per entry point object until :func:`forget_distributions`.
    """
    known = _distributions.get(id(ep))
    if known is not None and known[0] is ep:
        return known[1], known[2]
    dist = ep.dist
    name, version = (None, None) if dist is None else (dist.metadata["Name"], dist.version)
    _distributions[id(ep)] = (ep, name, version)
    return name, version


def forget_distributions() -> None:
    """Drop what :func:`distribution_of` remembers (a new entry-point scan was made)."""
    _distributions.clear()


def _described(ep: EntryPoint) -> str:
    name, version = distribution_of(ep)
    return f"{name or '?'} {version or ''}".strip()


def required_problems(
    required: Sequence[str],
    controls: PluginControls,
    builtins: Mapping[str, bool],
    installed: Mapping[str, Sequence[EntryPoint]] | None,
    inprocess: Iterable[str] = (),
) -> list[tuple[str, str]]:
    """``(name, why and how to fix)`` for each required plugin that would not load.

    ``builtins`` maps each built-in's normalised name to whether it is essential;
    ``installed`` maps normalised entry point names to the entry points declaring them
    (``None``: not looked up, autoload being off). A required plugin is met by a built-in
    that is not disabled, or by exactly one enabled entry point of that name declared by
    the distribution of that name; an in-process plugin never stands in for it.
    Failures while importing or registering are reported where they happen.
    """
    stand_ins = {normalise(name) for name in inprocess}
    problems: list[tuple[str, str]] = []
    for name in required:
        key = normalise(name)
        if key in builtins:
            reason = None if builtins[key] else controls.why_off(key, "builtin")
            if reason is not None:
                problems.append((name, f"disabled by {reason}; {_FIX[reason]}"))
            continue
        found = list((installed or {}).get(key, ()))
        reason = controls.why_off(key, "entrypoint")
        if not found and installed is not None:
            text = f"not installed; install it (pip install {name})"
            if key in stand_ins:
                text += ", an in-process plugin of that name does not stand in for it"
            problems.append((name, text))
        elif reason is not None:
            problems.append((name, f"disabled by {reason}; {_FIX[reason]}"))
        elif len(found) > 1:
            dists = " and ".join(_described(ep) for ep in found)
            problems.append((name, f"shadowed: declared by {dists}; uninstall the impostor"))
        elif normalise(distribution_of(found[0])[0] or "") != key:
            problems.append(
                (
                    name,
                    f"shadowed: its entry point is declared by distribution "
                    f"{_described(found[0])}, not by {name}; uninstall that and install {name}",
                )
            )
    return problems
