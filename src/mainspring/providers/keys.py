"""API keys: read once, kept in memory only; when a missing key is an error.

**Reading.** :func:`api_key` is the one place a key is read from the environment
(:data:`KEY_VARIABLES`). The first read *takes* the variable: its value is kept in this
module's memory and the variable is removed from the process environment (``os.environ``
and the C environment), so no subprocess, tool or plugin that reads the environment later
finds it. A value set in the environment again later is taken the same way and replaces
the kept one. ``mainspring`` commands take every key at start (:func:`take_api_keys`);
a library user's providers take theirs when they are built.

**Guarding the process.** The kept key, and the process's *initial* environment (which
the kernel keeps in the process's memory and shows as ``/proc/<pid>/environ``, whatever
was removed later), are readable by any process of the same user through ``/proc``.
:func:`guard_process_memory` clears the process's *dumpable* flag on Linux
(``prctl(PR_SET_DUMPABLE, 0)``): ``/proc/<pid>/environ`` and ``/proc/<pid>/mem`` then
refuse other processes of the same user, unless they hold ``CAP_SYS_PTRACE`` (a process
running as root does): against those, only a separate PID namespace hides the agent (the
coding tools run ``bash`` in one when the system allows it).

A provider that talks to a hosted API needs a key; an OpenAI- or Anthropic-compatible
server on this machine or the local network usually does not. :func:`missing_key` is
called by the HTTP providers before each request, so a missing key is reported as such,
before any connection is made, instead of as the server's ``401``.

A base URL counts as *local* (no key needed) when its host is ``localhost`` or a name
under ``.localhost``, a loopback, private or link-local address, a single-label name
(``http://llm:8080``), or a name under a special-use or local-network suffix: ``.local``,
``.internal``, ``.lan``, ``.home.arpa``, ``.test``, ``.example``, ``.invalid``.
"""

from __future__ import annotations

import ctypes
import ipaddress
import os
import sys

import httpx

__all__ = [
    "KEY_VARIABLES",
    "LOCAL_SUFFIXES",
    "api_key",
    "forget_api_keys",
    "guard_process_memory",
    "is_local_url",
    "missing_key",
    "take_api_keys",
]

KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
"""The environment variables holding the built-in providers' keys."""

_PR_SET_DUMPABLE = 4

_taken: dict[str, str] = {}


def api_key(variable: str) -> str | None:
    """The key in the environment variable ``variable``, taken out of the environment on
    first read and kept in memory (see the module); ``None`` when there is none."""
    value = os.environ.pop(variable, None)
    if value is not None:
        _taken[variable] = value
    return _taken.get(variable)


def take_api_keys() -> None:
    """Take every variable of :data:`KEY_VARIABLES` out of the environment now."""
    for variable in KEY_VARIABLES:
        api_key(variable)


def forget_api_keys() -> None:
    """Drop the keys taken so far (for tests that change the environment between cases)."""
    _taken.clear()


def guard_process_memory() -> bool:
    """Clear this process's dumpable flag (Linux; see the module); whether it is clear."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


LOCAL_SUFFIXES = (
    ".localhost",
    ".local",
    ".internal",
    ".lan",
    ".home.arpa",
    ".test",
    ".example",
    ".invalid",
)
"""Host name suffixes of servers that are not on the public internet."""


def is_local_url(url: str) -> bool:
    """Whether ``url`` names a server on this machine or the local network (see module)."""
    try:
        host = httpx.URL(url).host.lower().rstrip(".")
    except (httpx.InvalidURL, TypeError):
        return False
    if not host:
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host == "localhost" or "." not in host or host.endswith(LOCAL_SUFFIXES)
    return address.is_loopback or address.is_private or address.is_link_local


def missing_key(provider: str, key: str | None, base_url: str, variable: str) -> str | None:
    """The error text for a request to ``base_url`` without ``key``, or ``None`` if fine.

    ``variable`` is the environment variable the key is read from; the text names it and
    the config file's ``[providers.<provider>]`` table. A local ``base_url`` needs no key.
    """
    if key or is_local_url(base_url):
        return None
    return (
        f"{variable} is not set; set it, or api_key in [providers.{provider}] of the config "
        f"file (needed for {base_url}; a local server needs no key)"
    )
