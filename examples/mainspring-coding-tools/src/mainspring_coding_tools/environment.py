"""The environment a ``bash`` command runs with: an allowlist, never the agent's secrets.

The agent's own environment holds what the model must not see (``OPENAI_API_KEY``, cloud
credentials, tokens), and a command's output goes back to the model. So a command gets
only:

- the variables in :data:`ALLOWED_NAMES` and those matching :data:`ALLOWED_PATTERNS`
  (``PATH``, ``HOME``, ``LANG``, ``LC_*``, ``TERM``, ``TMPDIR``, ``USER``, ``SHELL``), when
  the agent has them;
- the names in the ``bash_env_passthrough`` option: exact names, or patterns with ``*``;
- what the tool sets itself: ``MAINSPRING_WORKSPACE`` (the workspace root),
  ``PAGER=cat`` and ``GIT_PAGER=cat``, and a default ``PATH`` when the agent has none.

A name that looks like a secret (:data:`SECRET_PATTERNS`: ``*_KEY``, ``*_TOKEN``,
``*_SECRET*``, ``*PASSWORD*``, ``*_CREDENTIALS``…, compared case-insensitively) is passed
only when ``bash_env_passthrough`` lists it by its exact name, never through a pattern.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from typing import Final

from .options import WORKSPACE_ENV

__all__ = [
    "ALLOWED_NAMES",
    "ALLOWED_PATTERNS",
    "SECRET_PATTERNS",
    "command_environment",
    "looks_secret",
]

ALLOWED_NAMES: Final[frozenset[str]] = frozenset(
    {"PATH", "HOME", "LANG", "TERM", "TMPDIR", "USER", "SHELL"}
)
"""Variables every command gets from the agent's environment."""

ALLOWED_PATTERNS: Final[tuple[str, ...]] = ("LC_*",)
"""Patterns of variables every command gets from the agent's environment."""

SECRET_PATTERNS: Final[tuple[str, ...]] = (
    "*_KEY",
    "*_KEY_*",
    "*APIKEY*",
    "*_TOKEN",
    "*_TOKEN_*",
    "*_SECRET*",
    "SECRET*",
    "*PASSWORD*",
    "*PASSWD*",
    "*_CREDENTIALS",
    "*_CREDENTIAL",
)
"""Names (upper-cased) that are never passed unless named exactly."""

DEFAULT_PATH: Final = "/usr/local/bin:/usr/bin:/bin"
"""``PATH`` when the agent's environment has none."""


def looks_secret(name: str) -> bool:
    """Whether ``name`` looks like the name of a secret (see :data:`SECRET_PATTERNS`)."""
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, pattern) for pattern in SECRET_PATTERNS)


def command_environment(
    source: Mapping[str, str], passthrough: Iterable[str], workspace: str
) -> dict[str, str]:
    """The environment of a command: the allowed part of ``source`` (see the module
    docs), the ``passthrough`` names and patterns, and the variables the tool sets."""
    wanted = tuple(passthrough)
    exact = {name for name in wanted if "*" not in name}
    patterns = ALLOWED_PATTERNS + tuple(name for name in wanted if "*" in name)
    environment: dict[str, str] = {}
    for name, value in source.items():
        if name in exact:
            environment[name] = value
        elif looks_secret(name):
            continue
        elif name in ALLOWED_NAMES or any(fnmatch.fnmatchcase(name, p) for p in patterns):
            environment[name] = value
    environment.setdefault("PATH", DEFAULT_PATH)
    environment.update({WORKSPACE_ENV: workspace, "PAGER": "cat", "GIT_PAGER": "cat"})
    return environment
