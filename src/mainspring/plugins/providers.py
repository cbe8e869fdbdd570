"""Built-in: the bundled providers, ``faux``, ``openai``, ``anthropic`` and ``local``.

Each HTTP provider is built from ``agent.settings.providers[name]`` when given
(``base_url``, ``api_key``, ``options``, ``timeout_s``), else from the environment
variables the official SDKs read.
Creating a provider opens no connection and starts no server; that happens on first use.
"""

from __future__ import annotations

from typing import Any

from ..hookspecs import hookimpl

__all__ = ["register_providers"]


def _http_options(settings: Any, name: str) -> dict[str, Any]:
    config = settings.providers.get(name)
    if config is None:
        return {}
    options: dict[str, Any] = {"options": dict(config.options) or None}
    if config.base_url:
        options["base_url"] = config.base_url
    if config.api_key is not None:
        options["api_key"] = config.api_key.get_secret_value()
    if config.timeout_s is not None:
        options["timeout"] = config.timeout_s
    options["request_timeout_s"] = config.request_timeout_s
    return options


@hookimpl(trylast=True)
def register_providers(agent: Any) -> list[Any]:
    """The bundled providers (later plugins may replace any of them by name)."""
    from ..providers.anthropic import AnthropicProvider
    from ..providers.local import LocalProvider
    from ..providers.openai import OpenAIProvider
    from ..testing.faux import FauxProvider

    settings = agent.settings
    return [
        FauxProvider(),
        OpenAIProvider(**_http_options(settings, "openai")),
        AnthropicProvider(**_http_options(settings, "anthropic")),
        LocalProvider(**_local_options(settings)),
    ]


_LOCAL_OPTIONS = frozenset(
    {"tool_mode", "dedupe_tool_calls", "context_window", "max_output_tokens", "threads"}
)


def _local_options(settings: Any) -> dict[str, Any]:
    config = settings.providers.get("local")
    if config is None:
        return {}
    unknown = sorted(set(config.options) - _LOCAL_OPTIONS)
    if unknown:
        raise ValueError(
            f"unknown option(s) for the local provider: {', '.join(unknown)}; "
            f"known: {', '.join(sorted(_LOCAL_OPTIONS))}"
        )
    return dict(config.options)
