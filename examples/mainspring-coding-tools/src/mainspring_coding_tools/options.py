"""The plugin's options: ``agent.settings.plugin_options["mainspring-coding-tools"]``.

Every option has a default; an unknown option or a value of the wrong type is an error,
raised from ``register_tools``, so the agent does not start with a typo in its config.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .environment import never_passed
from .sandbox import SandboxMode

__all__ = ["WORKSPACE_ENV", "CodingToolsOptions", "parse_options"]

WORKSPACE_ENV = "MAINSPRING_WORKSPACE"
"""The environment variable naming the workspace when no ``workspace`` option is set."""


class CodingToolsOptions(BaseModel):
    """Limits and locations of the coding tools (all optional).

    - ``workspace``: the root directory; default ``$MAINSPRING_WORKSPACE``, else the current
      directory when the agent is built.
    - ``read_max_lines``: lines ``read`` returns when no ``limit`` is given (2000).
    - ``read_max_chars``: the most characters one ``read`` returns (50,000); the model is
      told which ``offset`` continues.
    - ``max_line_chars``: longer lines are cut in ``read`` and ``grep`` output (2000).
    - ``ls_max_entries``: entries ``ls`` lists (1000).
    - ``grep_max_results``: matching lines ``grep`` returns (200).
    - ``grep_max_file_bytes``: larger files are skipped by ``grep`` (5 MB).
    - ``bash_timeout_s``: a command's timeout when the call gives none (30 s).
    - ``bash_max_timeout_s``: the largest timeout a call may ask for (600 s).
    - ``bash_max_output_chars``: output kept per command (30,000: the first and last
      halves, with the number of characters cut in between).
    - ``shell``: the shell that runs commands (``/bin/bash``, else ``/bin/sh``).
    - ``bash_env_passthrough``: more environment variables a command may see, beyond the
      allowlist (see :mod:`mainspring_coding_tools.environment`): exact names, or patterns
      with ``*`` (``"PYTHON*"``). A name that looks like a secret (``*_KEY``, ``*_TOKEN``,
      ``*_SECRET*``, ``*PASSWORD*``, ``*_CREDENTIALS``…) passes only when it is listed
      exactly, never through a pattern.
      Names of the agent's configuration (``MAINSPRING_*``), database URLs and ``HOME``
      are refused.
    - ``bash_sandbox``: ``"auto"`` (default), ``"namespaces"`` or ``"off"``: whether a
      command runs in its own PID and mount namespace (see
      :mod:`mainspring_coding_tools.sandbox`).
    - ``file_timeout_s``: the longest one ``read``, ``write``, ``edit``, ``ls`` or ``grep``
      call may run (30 s); past it the call stops with an error result.
    - ``allow_hard_links``: let ``read``, ``edit`` and ``grep`` open regular files that
      have more than one hard link (default ``False``: such a file may be a second name of
      a file outside the workspace, so it is refused).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    workspace: str | None = None
    read_max_lines: int = Field(default=2000, ge=1)
    read_max_chars: int = Field(default=50_000, ge=100)
    max_line_chars: int = Field(default=2000, ge=20)
    ls_max_entries: int = Field(default=1000, ge=1)
    grep_max_results: int = Field(default=200, ge=1)
    grep_max_file_bytes: int = Field(default=5_000_000, ge=1)
    bash_timeout_s: float = Field(default=30.0, gt=0)
    bash_max_timeout_s: float = Field(default=600.0, gt=0)
    bash_max_output_chars: int = Field(default=30_000, ge=100)
    shell: str | None = None
    bash_env_passthrough: tuple[str, ...] = ()
    bash_sandbox: SandboxMode = "auto"
    file_timeout_s: float = Field(default=30.0, gt=0)
    allow_hard_links: bool = False

    @field_validator("bash_env_passthrough")
    @classmethod
    def _passable(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        refused = [name for name in names if never_passed(name)]
        if refused:
            raise ValueError(
                f"{', '.join(refused)}: the agent's configuration (MAINSPRING_*), database "
                "URLs and HOME are never passed to a command"
            )
        return names

    def workspace_root(self, environ: Mapping[str, str] | None = None) -> str:
        """The configured workspace, else ``$MAINSPRING_WORKSPACE``, else the cwd."""
        env = os.environ if environ is None else environ
        return self.workspace or env.get(WORKSPACE_ENV) or os.getcwd()

    def shell_path(self) -> str:
        """The shell that runs ``bash`` commands."""
        if self.shell:
            return self.shell
        return "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"


def parse_options(raw: Mapping[str, Any]) -> CodingToolsOptions:
    """Validate the plugin options; ``ValueError`` says which option is wrong and why."""
    try:
        return CodingToolsOptions.model_validate(dict(raw))
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in item['loc']) or '(options)'}: {item['msg']}"
            for item in error.errors(include_url=False)
        )
        raise ValueError(f"invalid mainspring-coding-tools options: {problems}") from None
