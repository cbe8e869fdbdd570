"""The installed plugins: one entry-point scan per process, redone when ``sys.path`` changes.

:func:`installed` gives the ``mainspring`` entry points by normalised name and
:func:`manifests` the capability manifests installed distributions declare (the
``mainspring.capabilities`` group, see :mod:`~mainspring.loading.capabilities`). Both come
from one scan, cached until ``sys.path`` changes or a distribution is installed into or
removed from one of its directories, or until :func:`rescan_installed_plugins`. Nothing
here imports a plugin.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from .capabilities import MANIFEST_GROUP, metadata_manifests
from .controls import forget_distributions, normalise

if TYPE_CHECKING:
    from importlib_metadata import EntryPoint

__all__ = ["ENTRY_POINT_GROUP", "Installed", "installed", "manifests", "rescan_installed_plugins"]

ENTRY_POINT_GROUP = "mainspring"

Installed = dict[str, list["EntryPoint"]]

_PathState = tuple[tuple[str, tuple[int, int] | None], ...]

_Distributions = tuple[tuple[str, object], ...]

_scan: tuple[_PathState, Installed, dict[str, frozenset[str]]] | None = None
"""The last scan (plugins, their manifests) and the state of ``sys.path`` it was made on."""

_scanned_distributions: _Distributions | None = None
"""What :func:`_distributions` found when the last scan was made."""

_METADATA_SUFFIXES = (".dist-info", ".egg-info", ".pth", ".egg-link")


def _path_state() -> _PathState:
    """Each ``sys.path`` entry with its modification time and link count (``None``: missing).

    Installing or removing a distribution adds or removes entries (its ``*.dist-info``
    directory, a ``.pth`` file) in a ``sys.path`` directory, which changes that
    directory's modification time and, for a subdirectory, its link count.
    """
    state: list[tuple[str, tuple[int, int] | None]] = []
    for entry in sys.path:
        try:
            found = os.stat(entry or ".")
        except (OSError, ValueError):
            state.append((entry, None))
        else:
            state.append((entry, (found.st_mtime_ns, found.st_nlink)))
    return tuple(state)


def _distributions(paths: _PathState) -> _Distributions:
    """What is installed along ``paths`` (:func:`_path_state`): for each directory, its
    metadata entries (``*.dist-info``, ``*.egg-info``, ``*.pth``, ``*.egg-link``) with
    their modification times, so a reinstall of the same version counts as a change; for
    any other entry (a zip archive, a missing directory), its state as it is.

    Asked only when the path state changed: a directory's time also changes when
    something else appears in it (a ``__pycache__`` written by importing a plugin
    module), which installs nothing and must not cost a rescan.
    """
    state: list[tuple[str, object]] = []
    for entry, stat in paths:
        try:
            with os.scandir(entry or ".") as listing:
                metadata = sorted(
                    (item.name, item.stat().st_mtime_ns)
                    for item in listing
                    if item.name.endswith(_METADATA_SUFFIXES)
                )
        except (OSError, ValueError):
            state.append((entry, stat))
        else:
            state.append((entry, tuple(metadata)))
    return tuple(state)


def rescan_installed_plugins() -> None:
    """Forget the cached entry-point scan: the next agent looks installed plugins up afresh.

    The scan is redone anyway when ``sys.path`` or one of its directories changed; call
    this after changing an installed distribution in place (editing its
    ``entry_points.txt``, say) in a running process.
    """
    global _scan, _scanned_distributions
    _scan = None
    _scanned_distributions = None
    forget_distributions()


def installed() -> Installed:
    """The ``mainspring`` entry points by normalised name, in ``sys.path`` order (cached)."""
    return _scanned()[1]


def manifests() -> dict[str, frozenset[str]]:
    """The installed plugins' metadata manifests by normalised plugin name (cached)."""
    return _scanned()[2]


def _scanned() -> tuple[_PathState, Installed, dict[str, frozenset[str]]]:
    global _scan, _scanned_distributions
    state = _path_state()
    if _scan is not None and _scan[0] == state:
        return _scan
    distributions = _distributions(state)
    if _scan is not None and distributions == _scanned_distributions:
        _scan = (state, _scan[1], _scan[2])  # a directory changed, nothing was installed
        return _scan
    from importlib_metadata import entry_points  # only when installed plugins are wanted

    every = entry_points()
    found: Installed = {}
    for ep in every.select(group=ENTRY_POINT_GROUP):
        found.setdefault(normalise(ep.name), []).append(ep)
    forget_distributions()
    owners = {
        name: getattr(getattr(eps[0], "dist", None), "name", None) for name, eps in found.items()
    }
    _scan = (state, found, metadata_manifests(every.select(group=MANIFEST_GROUP), owners))
    _scanned_distributions = distributions
    return _scan
