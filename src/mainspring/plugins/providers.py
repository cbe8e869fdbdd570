"""Built-in: the bundled providers, ``faux``, ``openai``, ``anthropic`` and ``local``.

Each is built from ``agent.settings.providers[name]`` options when given (``base_url``,
``api_key``, ``options``), else from the environment variables the official SDKs read.
Creating a provider opens no connection and starts no server; that happens on first use.
"""

from __future__ import annotations

from typing import Any

from ..hookspecs import hookimpl

__all__ = ["register_providers"]


@hookimpl(trylast=True)
def register_providers() -> list[Any]:
    """The bundled providers (later plugins may replace any of them by name)."""
    from ..providers.anthropic import AnthropicProvider
    from ..providers.local import LocalProvider
    from ..providers.openai import OpenAIProvider
    from ..testing.faux import FauxProvider

    return [FauxProvider(), OpenAIProvider(), AnthropicProvider(), LocalProvider()]
