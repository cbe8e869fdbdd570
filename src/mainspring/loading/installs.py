"""Stale editable installs: a plugin's source declares entry points its metadata lacks.

``pip install -e DIR`` writes a distribution's entry points (its ``mainspring`` plugins
and their ``mainspring.capabilities`` manifests) into its installed metadata once; an
edit of ``DIR/pyproject.toml`` after that changes nothing until it is reinstalled. The
loader then refuses the plugin for a reason that names neither the edit nor the fix.
:func:`stale_install` compares the two, and :func:`with_install_diagnosis` adds "reinstall
it" to a load error of such a plugin. Nothing here imports a plugin.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from ..contract.errors import PluginLoadError
from .controls import normalise
from .scan import installed

if TYPE_CHECKING:
    from importlib_metadata import EntryPoint, IDistribution

__all__ = ["stale_install", "with_install_diagnosis"]

_GROUPS = ("mainspring", "mainspring.capabilities")
"""The entry-point groups compared: the plugins and their capability manifests."""


def _source_directory(dist: IDistribution) -> Path | None:
    """The directory of an editable install (``None``: not one, or not a local one)."""
    try:
        text = dist.read_text("direct_url.json")
        found: Any = json.loads(text) if text else None
    except (OSError, ValueError):
        return None
    if not isinstance(found, dict) or not isinstance(found.get("dir_info"), dict):
        return None
    if found["dir_info"].get("editable") is not True or not isinstance(found.get("url"), str):
        return None
    url = urlparse(found["url"])
    return Path(unquote(url.path)) if url.scheme == "file" else None


def _declared(pyproject: Path) -> set[tuple[str, str, str]] | None:
    """The ``(group, name, value)`` entry points of :data:`_GROUPS` that ``pyproject``
    declares in ``[project.entry-points]`` (``None``: unreadable, or declared elsewhere)."""
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project")
    except (OSError, ValueError):
        return None
    if not isinstance(project, dict) or "entry-points" in project.get("dynamic", ()):
        return None
    groups = project.get("entry-points", {})
    if not isinstance(groups, dict):
        return None
    return {
        (group, str(name).strip(), str(value).strip())
        for group, points in groups.items()
        if group in _GROUPS and isinstance(points, dict)
        for name, value in points.items()
    }


def stale_install(dist: IDistribution) -> str | None:
    """A sentence saying that ``dist`` is an editable install whose ``pyproject.toml``
    declares other ``mainspring`` entry points than its installed metadata, with the
    command that fixes it; ``None`` when it is not (or it cannot be told)."""
    directory = _source_directory(dist)
    if directory is None:
        return None
    declared = _declared(directory / "pyproject.toml")
    if declared is None:
        return None
    points: Iterable[EntryPoint] = getattr(dist, "entry_points", ())  # not in the protocol
    metadata = {
        (ep.group, ep.name.strip(), ep.value.strip()) for ep in points if ep.group in _GROUPS
    }
    if declared == metadata:
        return None
    differences = [
        f"{where} [{group}] {name} = {value!r}"
        for where, entries in (
            ("pyproject.toml has", declared - metadata),
            ("the installed metadata has", metadata - declared),
        )
        for group, name, value in sorted(entries)
    ]
    return (
        f"the installed metadata of {dist.metadata['Name']} is stale: its pyproject.toml was "
        f"edited since it was installed ({'; '.join(differences)}); reinstall it: "
        f'pip install -e "{directory}"'
    )


def _distribution_of(error: PluginLoadError) -> IDistribution | None:
    if error.plugin is None:
        return None
    for ep in installed().get(normalise(error.plugin), ()):
        if ep.dist is not None:
            return ep.dist
    return None


def with_install_diagnosis(error: PluginLoadError) -> PluginLoadError:
    """``error``, or when the plugin it names comes from a stale editable install
    (:func:`stale_install`), a copy that ends by saying so."""
    dist = _distribution_of(error)
    stale = stale_install(dist) if dist is not None else None
    if stale is None:
        return error
    diagnosed = PluginLoadError(
        f"{error} Likely cause: {stale}",
        plugin=error.plugin,
        distribution=error.distribution,
        version=error.version,
    )
    diagnosed.__cause__ = error.__cause__
    return diagnosed
