"""The embedded llama.cpp server: one per process and configuration, on a loopback port.

It runs llama.cpp's HTTP server *in this process* (the prebuilt ``xllamacpp`` wheel),
bound to a free loopback port and protected by a random per-process API key. A server is
started lazily by the first request (thread-safe; the blocking start runs in a worker
thread so the event loop keeps running), waited for until ``/health`` answers, and
stopped at interpreter exit. It renders prompts with :mod:`.local_templates`' tool-aware
template in the model's turn format (:data:`CHAT_TEMPLATE`, ChatML, by default), so
llama.cpp parses ``<tool_call>{json}</tool_call>`` output into OpenAI ``tool_calls``.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib
import os
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from .base import ProviderError
from .local_catalogue import DEFAULT_MODEL
from .local_install import LocalModelMissing, model_path, runtime_installed
from .local_templates import CHATML, TurnFormat, chat_template

__all__ = [
    "CHAT_TEMPLATE",
    "CONTEXT_WINDOW",
    "DEFAULT_START_TIMEOUT",
    "LOCAL_MODEL_ID",
    "LocalServer",
    "shared_server",
    "stop_shared_servers",
]

LOCAL_MODEL_ID = DEFAULT_MODEL
"""The default model's id, also the name the server reports in its responses."""

CONTEXT_WINDOW = 8192
"""SmolLM2-135M's trained context length, used as the server's context size."""

DEFAULT_START_TIMEOUT = 60.0
"""Seconds to wait for the server to load the model and answer ``/health``."""


CHAT_TEMPLATE = chat_template(CHATML)
"""The default template: :mod:`.local_templates`' tool-aware layout in ChatML (SmolLM2's
turn format). Without a system message SmolLM2's own default system prompt is used."""


def _default_threads() -> int:
    return max(1, min(4, os.cpu_count() or 1))


@dataclass(frozen=True, slots=True)
class _ServerConfig:
    model_file: Path
    context_window: int
    threads: int
    verbosity: int
    turn_format: TurnFormat
    model_alias: str


class LocalServer:
    """One in-process llama.cpp server on a free loopback port.

    :meth:`start` is idempotent and thread-safe; it blocks while the model loads, so
    async code calls :meth:`astart`. The server requires :attr:`api_key` (a random
    token, so other local programs and web pages cannot use it). :meth:`stop` shuts it
    down; a server inherited through ``fork`` is never reused by the child.
    ``verbosity`` is llama.cpp's log level on stderr: 0 (default) is silent, 1 logs
    errors, 3 logs everything. ``turn_format`` is the model's turn markers (the
    template is :func:`~.local_templates.chat_template` of it); ``model_alias`` is the
    model name the server answers with (in ``/v1/models`` and every response).
    """

    def __init__(
        self,
        model_file: str | os.PathLike[str] | None = None,
        *,
        context_window: int = CONTEXT_WINDOW,
        threads: int | None = None,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        verbosity: int = 0,
        turn_format: TurnFormat = CHATML,
        model_alias: str = LOCAL_MODEL_ID,
    ) -> None:
        self._model_file = Path(model_file) if model_file is not None else None
        self.context_window = context_window
        self.threads = threads if threads is not None else _default_threads()
        self.start_timeout = start_timeout
        self.verbosity = verbosity
        self.turn_format = turn_format
        self.model_alias = model_alias
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
            server = _start_xllamacpp(model_file, self)
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


def _start_xllamacpp(model_file: Path, config: LocalServer) -> Any:
    if not runtime_installed():
        raise LocalModelMissing("the xllamacpp runtime is not installed")
    xllamacpp: Any = importlib.import_module("xllamacpp")
    params = xllamacpp.CommonParams()
    params.model.path = str(model_file)
    params.model_alias = {config.model_alias}
    params.hostnames = ["127.0.0.1"]
    params.port = 0  # the OS picks a free port; listening_address reports it
    params.api_keys = [config.api_key]
    params.n_ctx = config.context_window
    params.n_parallel = 1
    params.cpuparams.n_threads = config.threads
    params.cpuparams_batch.n_threads = config.threads
    params.use_jinja = True
    params.chat_template = chat_template(config.turn_format)
    params.prefill_assistant = True
    params.warmup = False
    params.ui = False
    params.cache_ram_mib = 256
    params.verbosity = config.verbosity
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
    turn_format: TurnFormat = CHATML,
    model_alias: str = LOCAL_MODEL_ID,
) -> LocalServer:
    """The process-wide (not yet necessarily started) server for this configuration.

    ``model_file=None`` means :func:`model_path` (so a missing model raises
    :class:`LocalModelMissing` here). Every server made here is stopped at exit.
    """
    path = Path(model_file).resolve() if model_file is not None else model_path()
    config = _ServerConfig(
        path, context_window, threads or _default_threads(), verbosity, turn_format, model_alias
    )
    with _servers_lock:
        server = _servers.get(config)
        if server is None:
            server = LocalServer(
                path,
                context_window=config.context_window,
                threads=config.threads,
                start_timeout=start_timeout,
                verbosity=verbosity,
                turn_format=turn_format,
                model_alias=model_alias,
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
