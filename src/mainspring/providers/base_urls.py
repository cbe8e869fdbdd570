"""Base URLs in either form: with or without the API's ``/v1`` segment.

Users copy base URLs from many places: ``http://localhost:8080`` for a llama.cpp server,
``https://api.openai.com/v1`` from OpenAI's documentation, ``https://api.anthropic.com/v1``
by analogy. Each provider accepts both forms and turns them into the one its endpoint
path needs, instead of failing later with a bare 404:

- OpenAI-compatible servers want the version in the base URL (the endpoint is
  ``/chat/completions``): a URL with no path at all gets ``/v1``. A URL that has a path
  is kept as it is, since OpenAI-compatible services put the API under their own paths
  (``/openai/v1``, ``/api/v1``, ``/v1beta/openai``).
- Anthropic's base URL has no version (the endpoint is ``/v1/messages``): one trailing
  ``/v1`` is removed.
"""

from __future__ import annotations

import httpx

__all__ = ["with_api_version", "without_api_version"]


def with_api_version(base_url: str) -> str:
    """``base_url`` without a trailing slash, with ``/v1`` added if it has no path."""
    trimmed = base_url.rstrip("/")
    try:
        path = httpx.URL(trimmed).path
    except httpx.InvalidURL:
        return trimmed
    return f"{trimmed}/v1" if path in ("", "/") else trimmed


def without_api_version(base_url: str) -> str:
    """``base_url`` without a trailing slash and without one trailing ``/v1``."""
    trimmed = base_url.rstrip("/")
    return trimmed.removesuffix("/v1") if trimmed.endswith("/v1") else trimmed
