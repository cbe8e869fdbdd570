"""Plugin loading: which plugins an agent gets, and what each may do.

The built-ins (:mod:`~mainspring.loading.builtins`), installed entry points found by the
scan (:mod:`~mainspring.loading.scan`), and in-process plugins, filtered by the controls
(:mod:`~mainspring.loading.controls`) and held to their capability manifests
(:mod:`~mainspring.loading.capabilities`), loaded into one agent's
:class:`~mainspring.loading.plugin_set.PluginSet` by :func:`load_plugins`.

This package's own names below are its public API, for the command line and the testing
kit; its modules are internal.
"""

from ..contract.plugin_info import PluginInfo
from .controls import OPTION_DISABLE, normalise
from .installs import stale_install
from .loader import installed_manifest, load_plugins, plugin_name
from .scan import installed, rescan_installed_plugins

__all__ = [
    "OPTION_DISABLE",
    "PluginInfo",
    "installed",
    "installed_manifest",
    "load_plugins",
    "normalise",
    "plugin_name",
    "rescan_installed_plugins",
    "stale_install",
]
