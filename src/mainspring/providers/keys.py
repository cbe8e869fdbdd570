"""API keys: when a missing key is an error, and the error that says so.

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

import ipaddress

import httpx

__all__ = ["LOCAL_SUFFIXES", "is_local_url", "missing_key"]

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
