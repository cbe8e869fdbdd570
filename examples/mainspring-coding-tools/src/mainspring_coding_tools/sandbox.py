"""The sandbox of a ``bash`` command: its own PID and mount namespace, when the system allows.

The agent's memory holds its API keys, and its initial environment (``/proc/<pid>/environ``)
may too; so may the environment of the program that started it. A command running as the
same user could read them through ``/proc/<ancestor>/environ`` and ``/proc/<ancestor>/mem``.
The agent clears its *dumpable* flag (:func:`mainspring.providers.keys.guard_process_memory`),
which refuses such reads to processes of the same user, but not to one that holds
``CAP_SYS_PTRACE`` (root), and not for the agent's own ancestors. So, on Linux, a command
runs under ``unshare --user --map-root-user --pid --fork --mount-proc --kill-child``:

- a new user namespace (no privilege needed; the user appears as root inside, with files
  owned as before), a new PID namespace whose first process is the command's supervisor,
  and a new mount namespace with ``/proc`` mounted afresh: the command sees only its own
  processes, never the agent nor the agent's ancestors;
- the supervisor, being the namespace's first process, drops every capability from its
  bounding set before starting the shell, so the command cannot unmount that ``/proc``
  to reach the agent's (:mod:`mainspring_coding_tools.supervisor`);
- the agent's data directory (``$MAINSPRING_DATA_DIR``, else
  ``~/.local/share/mainspring``: conversations, the key that seals remembered approvals,
  durable runs) is covered by an empty read-only directory in that mount namespace
  (:func:`hidden_directories`), unless the workspace is inside it;
- when the supervisor ends, the kernel kills every process left in the namespace.

``unshare`` is looked for in the system's directories only (:data:`UNSHARE_DIRS`), never
on ``PATH``: a command could put a program of that name in a directory on the user's
``PATH`` and so switch the sandbox off for the next agent.

``bash_sandbox`` chooses: ``"auto"`` (the default) uses the namespaces when a trial run
of ``unshare`` works (tried once per process), and otherwise logs a warning when the tools
are built saying that commands run without them; ``"namespaces"`` requires them (the
plugin refuses to load without); ``"off"`` never uses them.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Literal

from mainspring.data_directory import data_dir

__all__ = [
    "UNSHARE_DIRS",
    "UNSHARE_OPTIONS",
    "SandboxMode",
    "hidden_directories",
    "namespaces",
    "sandbox_command",
]

SandboxMode = Literal["auto", "namespaces", "off"]

UNSHARE_OPTIONS = (
    "--user",
    "--map-root-user",
    "--pid",
    "--fork",
    "--mount-proc",
    "--kill-child",
)
"""What ``unshare`` is asked for (see the module)."""

UNSHARE_DIRS = ("/usr/bin", "/bin", "/usr/sbin", "/sbin")
"""Where ``unshare`` is looked for (see the module)."""

_TRIAL_S = 20.0

log = logging.getLogger("mainspring_coding_tools")


@functools.cache
def namespaces() -> tuple[tuple[str, ...], str | None]:
    """The ``unshare`` prefix, or ``()`` and why not (tried once per process;
    ``namespaces.cache_clear()`` tries again)."""
    if not sys.platform.startswith("linux"):
        return (), "PID and mount namespaces need Linux"
    unshare = shutil.which("unshare", path=os.pathsep.join(UNSHARE_DIRS))
    if unshare is None:
        return (), f"the unshare program (util-linux) is not in {', '.join(UNSHARE_DIRS)}"
    prefix = (unshare, *UNSHARE_OPTIONS)
    try:
        trial = subprocess.run(
            [*prefix, sys.executable, "-I", "-S", "-c", "import os; print(os.getpid())"],
            capture_output=True,
            text=True,
            timeout=_TRIAL_S,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError) as error:
        return (), f"unshare could not be run: {error}"
    if trial.returncode != 0 or trial.stdout.strip() != "1":
        why = trial.stderr.strip().splitlines()[-1:] or [f"exit code {trial.returncode}"]
        return (), f"unshare failed: {why[0]} (are user namespaces disabled?)"
    return prefix, None


def hidden_directories(workspace: Path) -> tuple[str, ...]:
    """The directories a sandboxed command must not see: the agent's data directory, when
    it exists and does not hold the workspace."""
    hidden = []
    for directory in (data_dir(),):
        try:
            resolved = directory.resolve(strict=True)
        except OSError:
            continue
        if resolved.is_dir() and not Path(workspace).resolve().is_relative_to(resolved):
            hidden.append(str(resolved))
    return tuple(hidden)


def sandbox_command(mode: SandboxMode) -> tuple[str, ...]:
    """The argv prefix that runs a command's supervisor sandboxed (``()``: unsandboxed).

    ``"namespaces"`` raises ``ValueError`` when they are not available; ``"auto"`` logs a
    warning then.
    """
    if mode == "off":
        return ()
    prefix, why = namespaces()
    if why is None:
        return prefix
    if mode == "namespaces":
        raise ValueError(f"bash_sandbox is 'namespaces', but {why}")
    _warn_unsandboxed(why)
    return ()


def _warn_unsandboxed(why: str) -> None:
    log.warning(
        "bash commands run without their own PID and mount namespace (%s): a command "
        "running as root can read the agent's memory and environment through /proc; set "
        "bash_sandbox to 'off' to silence this, or allow user namespaces",
        why,
    )
