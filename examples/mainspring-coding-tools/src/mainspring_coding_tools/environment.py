"""The environment a ``bash`` command runs with: an allowlist, never the agent's secrets.

The agent's own environment holds what the model must not see (``OPENAI_API_KEY``, cloud
credentials, tokens), and a command's output goes back to the model. So a command gets
only:

- the variables in :data:`ALLOWED_NAMES` and those matching :data:`ALLOWED_PATTERNS`
  (``PATH``, ``LANG``, ``LC_*``, ``TERM``, ``TMPDIR``, ``USER``, ``SHELL``), when the agent
  has them;
- the names in the ``bash_env_passthrough`` option: exact names, or patterns with ``*``;
- what the tool sets itself: ``HOME``, a private directory of the tool's own (made once per
  process, mode ``0700``, removed at exit: never the user's home, which holds the agent's
  data directory and credentials), ``PAGER=cat`` and ``GIT_PAGER=cat``, and a default
  ``PATH`` when the agent has none.

A name that looks like a secret (:data:`SECRET_PATTERNS`: ``*_KEY``, ``*_TOKEN``,
``*_SECRET*``, ``*PASSWORD*``, ``*_CREDENTIALS``…, compared case-insensitively) is passed
only when ``bash_env_passthrough`` lists it by its exact name, never through a pattern. A
name of :data:`NEVER_PASSED` (``MAINSPRING_*``, database URLs) is never passed at all: the
agent's configuration and its durable-run database are not the command's business, and
the options refuse to list one.
"""

from __future__ import annotations

import atexit
import fnmatch
import functools
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from typing import Final

__all__ = [
    "ALLOWED_NAMES",
    "ALLOWED_PATTERNS",
    "NEVER_PASSED",
    "SECRET_PATTERNS",
    "command_environment",
    "command_home",
    "looks_secret",
    "never_passed",
]

ALLOWED_NAMES: Final[frozenset[str]] = frozenset(
    {"PATH", "LANG", "TERM", "TMPDIR", "USER", "SHELL"}
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

NEVER_PASSED: Final[tuple[str, ...]] = (
    "MAINSPRING_*",
    "*DATABASE_URL*",
    "*DATABASE_URI*",
    "*_DSN",
    "HOME",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
)
"""Names (upper-cased) never passed, even when listed exactly (``HOME`` is set by the
tool; the XDG directories would lead a command to mainspring's data directory and the
durable runs' approval keys)."""

DEFAULT_PATH: Final = "/usr/local/bin:/usr/bin:/bin"
"""``PATH`` when the agent's environment has none."""


def looks_secret(name: str) -> bool:
    """Whether ``name`` looks like the name of a secret (see :data:`SECRET_PATTERNS`)."""
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, pattern) for pattern in SECRET_PATTERNS)


def never_passed(name: str) -> bool:
    """Whether ``name`` is never passed to a command (see :data:`NEVER_PASSED`)."""
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, pattern) for pattern in NEVER_PASSED)


@functools.cache
def command_home() -> str:
    """The commands' ``HOME``: a private directory made once per process, removed at exit."""
    home = tempfile.mkdtemp(prefix="coding-tools-home-")
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    return home


def command_environment(source: Mapping[str, str], passthrough: Iterable[str]) -> dict[str, str]:
    """The environment of a command: the allowed part of ``source`` (see the module
    docs), the ``passthrough`` names and patterns, and the variables the tool sets."""
    wanted = tuple(passthrough)
    exact = {name for name in wanted if "*" not in name}
    patterns = ALLOWED_PATTERNS + tuple(name for name in wanted if "*" in name)
    environment: dict[str, str] = {}
    for name, value in source.items():
        if never_passed(name):
            continue
        if name in exact:
            environment[name] = value
        elif looks_secret(name):
            continue
        elif name in ALLOWED_NAMES or any(fnmatch.fnmatchcase(name, p) for p in patterns):
            environment[name] = value
    environment.setdefault("PATH", DEFAULT_PATH)
    environment.update({"HOME": command_home(), "PAGER": "cat", "GIT_PAGER": "cat"})
    return environment
