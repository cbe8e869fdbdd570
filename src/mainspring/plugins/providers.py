"""Built-in: the bundled providers, ``faux``, ``openai``, ``anthropic`` and ``local``.

Each HTTP provider is built from ``agent.settings.providers[name]`` when given
(``base_url``, ``api_key``, ``options``, ``timeout_s``), else from the environment
variables the official SDKs read.

Every bundled provider is registered as a :class:`LazyProvider`: its module is imported
and the provider built on first use (its first ``stream()``, or the first look at its
catalogue or any other attribute, as resolving a ``"name:id"`` model does), once per
agent. So an agent that never uses the local provider never imports its module, and
environment variables are read when the provider is first used. Options for the local
provider are still checked when the agent is built. Building a provider opens no
connection and starts no server; that happens on its first request.

The agent owns the providers built here: ``Agent.aclose()`` closes each one that was
built (its ``aclose()``: the HTTP providers' pooled connections), none that was not.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, final

from ..contract.markers import hookimpl
from ..providers.local_templates import TURN_FORMATS

__all__ = ["CONFIGURABLE_PROVIDERS", "LazyProvider", "local_options", "register_providers"]

CAPABILITIES = ("providers",)
"""What this plugin does (its manifest; see ``docs/capabilities.md``)."""

CONFIGURABLE_PROVIDERS = ("openai", "anthropic", "local")
"""The bundled providers built from ``settings.providers[name]`` (``faux`` takes none)."""


@final
class LazyProvider:
    """A provider named ``name`` that ``build(*arguments)`` makes on first use (see the
    module).

    ``stream`` and every attribute but ``name`` are the built provider's. A ``build``
    that raises raises again on the next use.
    """

    __slots__ = ("_arguments", "_build", "_built", "name")

    def __init__(self, name: str, build: Callable[..., Any], *arguments: Any) -> None:
        self.name = name
        self._build = build
        self._arguments = arguments
        self._built: Any = None

    @property
    def provider(self) -> Any:
        """The provider itself, built now if it was not yet."""
        built = self._built
        if built is None:
            built = self._built = self._build(*self._arguments)
        return built

    @property
    def built(self) -> bool:
        """Whether the provider was built (used) already."""
        return self._built is not None

    def stream(self, request: Any, signal: Any) -> AsyncIterator[Any]:
        """The built provider's ``stream``."""
        stream: AsyncIterator[Any] = self.provider.stream(request, signal)
        return stream

    async def aclose(self) -> None:
        """Close the built provider (its ``aclose()``, if it has one); nothing if unbuilt."""
        aclose = getattr(self._built, "aclose", None)
        if aclose is not None:
            await aclose()

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("__") or attribute in LazyProvider.__slots__:
            raise AttributeError(attribute)
        return getattr(self.provider, attribute)

    def __repr__(self) -> str:
        if self._built is None:
            return f"<provider {self.name!r}, built on first use>"
        return repr(self._built)


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


def _faux() -> Any:
    from ..providers.faux import FauxProvider

    return FauxProvider()


def _openai(settings: Any) -> Any:
    from ..providers.openai import OpenAIProvider

    return OpenAIProvider(**_http_options(settings, "openai"))


def _anthropic(settings: Any) -> Any:
    from ..providers.anthropic import AnthropicProvider

    return AnthropicProvider(**_http_options(settings, "anthropic"))


def _local(settings: Any) -> Any:
    from ..providers.local import LocalProvider

    return LocalProvider(**local_options(settings))


@hookimpl(trylast=True)
def register_providers(agent: Any) -> list[Any]:
    """The bundled providers, each built on first use (later plugins may replace any of
    them by name)."""
    settings = agent.settings
    local_options(settings)  # checked now; the options are read again (settings are frozen)
    providers = _Bundled(
        (
            LazyProvider("faux", _faux),
            LazyProvider("openai", _openai, settings),
            LazyProvider("anthropic", _anthropic, settings),
            LazyProvider("local", _local, settings),
        )
    )
    agent.on_close(providers.aclose)
    return providers


@final
class _Bundled(list[LazyProvider]):
    """One agent's bundled providers (a list, as the hook returns)."""

    __slots__ = ()

    async def aclose(self) -> None:
        """Close every provider, even when one raises (the first is re-raised)."""
        failure: Exception | None = None
        for provider in self:
            try:
                await provider.aclose()
            except Exception as error:
                failure = failure or error
        if failure is not None:
            raise failure


_LOCAL_OPTIONS = frozenset(
    {
        "tool_mode",
        "dedupe_tool_calls",
        "repetition_guard",
        "context_window",
        "max_output_tokens",
        "threads",
        "model_file",
        "model_id",
        "turn_format",
    }
)


_TOOL_MODES = ("off", "force_first", "auto")
"""The local provider's ``tool_mode`` values (``ToolMode``, not imported here: the local
provider's module is imported on first use only)."""


def local_options(settings: Any) -> dict[str, Any]:
    """The local provider's options from ``settings.providers["local"].options``; a
    ``ValueError`` names an unknown option, or a ``tool_mode``, ``turn_format``,
    ``model_file`` or ``model_id`` that is not allowed. ``~`` in ``model_file`` is
    expanded."""
    config = settings.providers.get("local")
    if config is None:
        return {}
    unknown = sorted(set(config.options) - _LOCAL_OPTIONS)
    if unknown:
        raise ValueError(
            f"unknown option(s) for the local provider: {', '.join(unknown)}; "
            f"known: {', '.join(sorted(_LOCAL_OPTIONS))}"
        )
    options = dict(config.options)
    _check_choice(options, "tool_mode", _TOOL_MODES)
    _check_choice(options, "turn_format", tuple(TURN_FORMATS))
    for key in ("model_file", "model_id"):
        value = options.get(key)
        if key in options and (not isinstance(value, str) or not value.strip()):
            raise ValueError(
                f"providers.local.options.{key} = {value!r} is not allowed; give a "
                + ("path to a .gguf file" if key == "model_file" else "model id")
            )
    if "model_file" in options:
        options["model_file"] = str(Path(options["model_file"]).expanduser())
    return options


def _check_choice(options: dict[str, Any], key: str, allowed: tuple[str, ...]) -> None:
    if key in options and options[key] not in allowed:
        raise ValueError(
            f"providers.local.options.{key} = {options[key]!r} is not allowed; use "
            + ", ".join(repr(value) for value in allowed)
        )
